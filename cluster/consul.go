package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/hashicorp/consul/api"
)

// consulProvider is the member provider over a Consul agent. It replaces Proto.Actor's
// consul provider, which fails a self-healing cluster three ways:
//
//   - Proto.Actor blocks, for good, every member that once leaves the topology. Its
//     provider drops a member as soon as its health check is not passing, so a member
//     that misses one TTL deadline (a long GC pause, SIGSTOP, a saturated machine) is
//     never let back in, and the members' views diverge. This provider keeps a member
//     whose check is not passing in the topology for PauseGrace while its remoting port
//     still accepts connections (a paused process's kernel still accepts them; a dead
//     one's refuses): a pause is ridden out, a death is noticed at the TTL.
//   - After the Consul agent restarts (losing its registrations), Proto.Actor's provider
//     keeps updating a TTL check that no longer exists and never registers again. This
//     one registers again whenever a TTL update fails, and meanwhile keeps its last view
//     instead of reading the empty catalog as every member leaving.
//   - Its watch panics when the agent is unreachable at start.
//
// A member knows when it was away for longer than the grace (its own heartbeats stopped
// for that long, so the others dropped it, and Proto.Actor blocks a dropped member id for
// good): it then rejoins under a new member id (the actor system's id and a generation,
// at the same address) and deregisters the old one; until the new id is in its own
// topology, Dropped reports why, and the node reports itself not ready. The member id is
// never the actor system's id itself: a member refuses the connections of an actor system
// whose id it blocked, so a dropped member is blocked under an id its connections do not
// carry.
type consulProvider struct {
	cfg   consulConfig
	log   *slog.Logger
	agent *api.Client

	mu       sync.Mutex
	started  bool
	stopped  bool
	stop     chan struct{}   // closed by Shutdown
	life     context.Context // canceled by Shutdown: ends the agent calls in flight
	endLife  context.CancelFunc
	wg       sync.WaitGroup
	id       string // the member id in the topology: sysID.<gen>
	sysID    string // the actor system's id
	gen      int    // how many times this member rejoined under a new id
	name     string
	host     string
	port     int
	kinds    []string
	lastBeat time.Time // the last successful TTL update
	dropped  error     // set while this member, away longer than the grace, rejoins
	rejoined string    // the new id of the pending rejoin ("" when none is pending)
	retry    bool      // the last rejoin failed to register: try again
	c        *cluster.Cluster

	viewMu   sync.Mutex
	view     map[string]memberView // the members of the last topology, by id
	departed []Departure           // members that left the topology, oldest first (bounded)

	// formats is the range of the journal formats the members of the last topology
	// advertise (nil before the first); formats.go.
	formats atomic.Pointer[formatRange]
}

// memberView is what the catalog says of a member of the topology.
type memberView struct {
	addr    string // host:port
	meta    map[string]string
	passing bool // its check passed at the last look (else it is kept within the grace)
}

// maxDepartures bounds the departures the provider remembers.
const maxDepartures = 64

// consulConfig configures consulProvider.
type consulConfig struct {
	// Addr is the agent's HTTP address host:port.
	Addr string
	// TTL is the member's health check TTL; it is renewed every TTL/3.
	TTL time.Duration
	// PauseGrace is how long a member whose check is not passing stays in the topology
	// while its remoting port accepts connections.
	PauseGrace time.Duration
	// DeregisterAfter is Consul's DeregisterCriticalServiceAfter (at least a minute:
	// Consul's reaper runs about that often anyway).
	DeregisterAfter time.Duration
	// Timeout bounds every agent call but the blocking health query.
	Timeout time.Duration
	// Meta is advertised in the service's meta beside the member id (Config.Meta).
	Meta map[string]string
	// JournalKinds are Config.JournalKinds: listed only for the members of the newest
	// journal format (formats.go).
	JournalKinds []string
}

// Defaults of consulConfig.
const (
	defaultConsulTTL        = 2 * time.Second
	defaultPauseGrace       = 60 * time.Second
	defaultDeregisterAfter  = 2 * time.Minute
	defaultConsulTimeout    = 3 * time.Second
	consulWatchWait         = time.Second
	consulRecheckWait       = 100 * time.Millisecond
	consulRetryDelay        = 500 * time.Millisecond
	memberDialTimeout       = 300 * time.Millisecond
	consulRegisterLogPeriod = 10 * time.Second
)

var _ cluster.ClusterProvider = (*consulProvider)(nil)

func newConsulProvider(cfg consulConfig, log *slog.Logger) (*consulProvider, error) {
	if cfg.TTL <= 0 {
		cfg.TTL = defaultConsulTTL
	}
	if cfg.PauseGrace <= 0 {
		cfg.PauseGrace = defaultPauseGrace
	}
	if cfg.DeregisterAfter < cfg.PauseGrace+time.Minute {
		cfg.DeregisterAfter = max(defaultDeregisterAfter, cfg.PauseGrace+time.Minute)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultConsulTimeout
	}
	client, err := api.NewClient(&api.Config{Address: cfg.Addr, WaitTime: consulWatchWait})
	if err != nil {
		return nil, fmt.Errorf("cluster: consul client for %s: %w", cfg.Addr, err)
	}
	life, endLife := context.WithCancel(context.Background())
	return &consulProvider{cfg: cfg, log: log, agent: client, stop: make(chan struct{}), life: life, endLife: endLife}, nil
}

// StartMember implements cluster.ClusterProvider: it registers the member and starts
// the heartbeat and the watch.
func (p *consulProvider) StartMember(c *cluster.Cluster) error {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return fmt.Errorf("consul provider: member address: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return errors.New("consul provider: already started")
	}
	p.started = true
	p.c, p.id, p.sysID, p.name, p.host, p.port, p.kinds = c, c.ActorSystem.ID+".0", c.ActorSystem.ID, c.Config.Name, host, port, c.GetClusterKinds()
	if err := p.registerAs(p.id); err != nil {
		return err
	}
	p.lastBeat = time.Now()
	p.wg.Add(2)
	go p.heartbeat()
	go p.watch()
	return nil
}

// StartClient implements cluster.ClusterProvider. Fathom runs no client-only members.
func (p *consulProvider) StartClient(*cluster.Cluster) error {
	return errors.New("consul provider: client-only members are not supported")
}

// Shutdown implements cluster.ClusterProvider: it stops the heartbeat and the watch
// (ending their agent calls in flight, so an unreachable agent delays it by no more than
// the deregistration's Timeout) and deregisters the member. It is idempotent.
func (p *consulProvider) Shutdown(bool) error {
	p.mu.Lock()
	if !p.started || p.stopped {
		p.stopped = true
		p.mu.Unlock()
		p.endLife()
		return nil
	}
	p.stopped = true
	close(p.stop)
	p.endLife()
	p.mu.Unlock()
	p.wg.Wait()
	id := p.memberID()
	if err := p.deregister(id); err != nil {
		return err
	}
	p.log.Info("deregistered from consul", "member", id)
	return nil
}

// MemberID is this member's id in the topology (it changes when the member rejoins).
func (p *consulProvider) MemberID() string { return p.memberID() }

func (p *consulProvider) memberID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.id
}

// Dropped reports why this member cannot count on being in the other members'
// topology: its heartbeats stopped for longer than the grace (so they dropped it), and
// it has not rejoined yet.
func (p *consulProvider) Dropped() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dropped == nil && p.started && !p.stopped {
		if gap := time.Since(p.lastBeat); gap > p.cfg.PauseGrace {
			return fmt.Errorf("this member sent no heartbeat for %s (longer than the %s grace)", gap.Round(time.Second), p.cfg.PauseGrace)
		}
	}
	return p.dropped
}

func (p *consulProvider) deregister(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Timeout)
	defer cancel()
	if err := p.agent.Agent().ServiceDeregisterOpts(id, (&api.QueryOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("consul provider: deregister %s: %w", id, err)
	}
	return nil
}

func (p *consulProvider) register() error { return p.registerAs(p.memberID()) }

func (p *consulProvider) registerAs(id string) error {
	ctx, cancel := context.WithTimeout(p.life, p.cfg.Timeout)
	defer cancel()
	s := &api.AgentServiceRegistration{
		ID: id, Name: p.name, Tags: p.kinds, Address: p.host, Port: p.port,
		Meta: p.meta(id),
		Check: &api.AgentServiceCheck{
			CheckID: "service:" + id, TTL: p.cfg.TTL.String(), Status: api.HealthPassing,
			DeregisterCriticalServiceAfter: p.cfg.DeregisterAfter.String(),
		},
	}
	if err := p.agent.Agent().ServiceRegisterOpts(s, api.ServiceRegisterOpts{}.WithContext(ctx)); err != nil {
		return fmt.Errorf("consul provider: register %s at %s: %w", id, p.cfg.Addr, err)
	}
	return nil
}

// meta is the service meta of member id: Config.Meta and the id.
func (p *consulProvider) meta(id string) map[string]string {
	m := make(map[string]string, len(p.cfg.Meta)+1)
	for k, v := range p.cfg.Meta {
		m[k] = v
	}
	m["id"] = id
	return m
}

// rejoin registers this member under a new id after the others dropped (and blocked)
// the current one, and deregisters the old id. Dropped reports the rejoin until the
// watch sees the new id passing.
func (p *consulProvider) rejoin(gap time.Duration) {
	p.mu.Lock()
	old := p.id
	p.gen++
	id := fmt.Sprintf("%s.%d", p.sysID, p.gen)
	p.dropped = fmt.Errorf("this member sent no heartbeat for %s (longer than the %s grace), so the other members dropped it; rejoining as %s", gap.Round(time.Second), p.cfg.PauseGrace, id)
	p.mu.Unlock()
	p.log.Warn("member dropped by the cluster; rejoining under a new id", "member", old, "new_member", id, "away", gap.Round(time.Millisecond))
	if err := p.registerAs(id); err != nil {
		p.log.Warn("rejoin under a new id failed; retrying at the next heartbeat", "member", id, "error", err)
		p.mu.Lock()
		p.gen--
		p.retry = true
		p.mu.Unlock()
		return
	}
	p.mu.Lock()
	p.id, p.rejoined, p.retry = id, id, false
	p.mu.Unlock()
	if err := p.deregister(old); err != nil {
		p.log.Warn("deregister the dropped member id", "member", old, "error", err)
	}
}

// heartbeat renews the member's TTL check every TTL/3, and registers the member again
// when the renewal fails (the agent restarted and forgot it).
func (p *consulProvider) heartbeat() {
	defer p.wg.Done()
	tick := time.NewTicker(p.cfg.TTL / 3)
	defer tick.Stop()
	var lastLog time.Time
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		select { // a tick that came while the last beat hung must not outrun a stop
		case <-p.stop:
			return
		default:
		}
		err := p.beat()
		if err != nil && p.life.Err() == nil {
			if err = p.register(); err == nil {
				p.log.Info("registered with consul again", "member", p.memberID())
				err = p.beat()
			}
		}
		if p.life.Err() != nil {
			return
		}
		now := time.Now()
		p.mu.Lock()
		gap, retry := now.Sub(p.lastBeat), p.retry
		if err == nil {
			p.lastBeat = now
		}
		p.mu.Unlock()
		if err == nil && (gap > p.cfg.PauseGrace || retry) {
			p.rejoin(gap)
		}
		if err != nil && now.Sub(lastLog) > consulRegisterLogPeriod {
			lastLog = now
			p.log.Warn("consul heartbeat failed; retrying", "member", p.memberID(), "agent", p.cfg.Addr, "error", err)
		}
	}
}

func (p *consulProvider) beat() error {
	ctx, cancel := context.WithTimeout(p.life, p.cfg.Timeout)
	defer cancel()
	return p.agent.Agent().UpdateTTLOpts("service:"+p.memberID(), "", api.HealthPassing, (&api.QueryOptions{}).WithContext(ctx))
}

// watch reads the service's health entries (a blocking query, at most a second long,
// so the grace is re-evaluated even when nothing changes) and hands the members to the
// member list.
func (p *consulProvider) watch() {
	defer p.wg.Done()
	ctx := p.life
	seen := map[string]*seenMember{}
	var index uint64
	var lastLog time.Time
	wait := consulWatchWait
	for ctx.Err() == nil {
		qctx, qcancel := context.WithTimeout(ctx, wait+p.cfg.Timeout)
		entries, meta, err := p.agent.Health().Service(p.name, "", false, (&api.QueryOptions{WaitIndex: index, WaitTime: wait}).WithContext(qctx))
		qcancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if time.Since(lastLog) > consulRegisterLogPeriod {
				lastLog = time.Now()
				p.log.Warn("consul watch failed; keeping the current members", "agent", p.cfg.Addr, "error", err)
			}
			index = 0
			select {
			case <-ctx.Done():
				return
			case <-time.After(consulRetryDelay):
			}
			continue
		}
		if meta.LastIndex < index { // the agent restarted: its index starts over
			index = 0
		} else {
			index = meta.LastIndex
		}
		now := time.Now()
		if members := p.members(entries, seen, now); len(members) > 0 {
			p.c.MemberList.UpdateClusterTopology(members)
			p.rejoinDone(members)
		}
		// A member kept only because its port answers may be leaving (its gossip says so
		// within a few hundred ms) or gone: look again soon rather than at the next change.
		wait = consulWatchWait
		for _, s := range seen {
			if !s.passing.Equal(now) {
				wait = consulRecheckWait
			}
		}
	}
}

// rejoinDone ends a pending rejoin once the new id is among the listed members.
func (p *consulProvider) rejoinDone(members []*cluster.Member) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rejoined == "" {
		return
	}
	for _, m := range members {
		if m.Id == p.rejoined {
			p.log.Info("rejoined the cluster", "member", p.rejoined)
			p.rejoined, p.dropped = "", nil
			return
		}
	}
}

// seenMember is a member as the catalog last listed it, and when its check last passed.
type seenMember struct {
	m       *cluster.Member
	meta    map[string]string
	passing time.Time
}

// members is the topology: every member whose check passes, and every member seen
// passing within the grace whose remoting port still accepts connections, listed or not
// (a member missing from the catalog because the agent restarted may well be alive).
// seen is updated with the listed members and forgets the ones past the grace.
func (p *consulProvider) members(entries []*api.ServiceEntry, seen map[string]*seenMember, now time.Time) []*cluster.Member {
	listed := make(map[string]bool, len(entries))
	for _, e := range entries {
		id := e.Service.Meta["id"]
		if id == "" {
			continue
		}
		m := &cluster.Member{Id: id, Host: e.Service.Address, Port: int32(e.Service.Port), Kinds: e.Service.Tags}
		s := seen[id]
		if s == nil {
			s = &seenMember{}
			seen[id] = s
		}
		s.m, s.meta = m, e.Service.Meta
		listed[id] = true
		if e.Checks.AggregatedStatus() == api.HealthPassing {
			s.passing = now
		}
	}
	var out []*cluster.Member
	view := make(map[string]memberView, len(seen))
	for id, s := range seen {
		switch {
		case p.leftGracefully(id):
			delete(seen, id) // its gossip said so: do not wait for the catalog or the grace
		case s.passing.Equal(now):
			out = append(out, s.m)
			view[id] = memberView{addr: memberAddr(s.m), meta: s.meta, passing: true}
		case s.passing.IsZero() || now.Sub(s.passing) > p.cfg.PauseGrace:
			delete(seen, id) // listed again, it is added again
		case reachable(s.m):
			out = append(out, s.m)
			view[id] = memberView{addr: memberAddr(s.m), meta: s.meta}
		}
	}
	p.noteView(view, listed, now)
	out, r := preferNewest(out, func(id string) int { return memberFormat(seen[id].meta) }, p.cfg.JournalKinds)
	p.noteFormats(r, len(out))
	return out
}

// noteFormats records the range of the members' journal formats and logs when it
// changes: while it is not one format, journal-reading activations go to the members of
// the newest format and events newer than the lowest are held.
func (p *consulProvider) noteFormats(r formatRange, members int) {
	if members == 0 {
		return
	}
	old := p.formats.Swap(&r)
	if old != nil && *old == r {
		return
	}
	switch {
	case r.lowest == r.highest && old != nil:
		p.log.Info("every member advertises one journal format again", "journal_format", r.lowest)
	case r.lowest != r.highest:
		p.log.Warn("members advertise different journal formats (a rolling upgrade): sessions are placed on members of the newest format, and events newer than the lowest are not written until every member is upgraded",
			"lowest_format", r.lowest, "newest_format", r.highest)
	}
}

// formatRange is the range of the journal formats of the last topology (zero before it).
func (p *consulProvider) formatRange() formatRange {
	if r := p.formats.Load(); r != nil {
		return *r
	}
	return formatRange{}
}

// Departure is a member that left the topology: when, and how.
type Departure struct {
	// ID and Address are the member's id and host:port.
	ID, Address string
	// Meta is the service meta the member advertised.
	Meta map[string]string
	// At is when this member dropped it from its topology.
	At time.Time
	// How is DepartureLeft (it deregistered, or its gossip announced the leave) or
	// DepartureDead (its check failed and its port stopped answering, or the grace ran out).
	How string
}

// How a member left the topology (Departure.How).
const (
	// DepartureLeft is a member that left gracefully.
	DepartureLeft = "left"
	// DepartureDead is a member dropped as dead.
	DepartureDead = "dead"
)

// noteView replaces the view of the topology and records the members that left it since
// the last one: gracefully when the catalog no longer lists it (a leaving member
// deregisters) or gossip announced its leave, as dead otherwise (still listed, failing).
func (p *consulProvider) noteView(view map[string]memberView, listed map[string]bool, now time.Time) {
	p.viewMu.Lock()
	defer p.viewMu.Unlock()
	for id, old := range p.view {
		if _, ok := view[id]; ok {
			continue
		}
		how := DepartureDead
		if !listed[id] || p.leftGracefully(id) {
			how = DepartureLeft
		}
		p.departed = append(p.departed, Departure{ID: id, Address: old.addr, Meta: old.meta, At: now, How: how})
		if len(p.departed) > maxDepartures {
			p.departed = p.departed[len(p.departed)-maxDepartures:]
		}
	}
	p.view = view
}

// leftGracefully reports whether member id's actor system left the cluster gracefully:
// gossip blocks the actor system of a member that announced its leave, and a member id is
// its actor system's id and a generation.
func (p *consulProvider) leftGracefully(id string) bool {
	if p.c == nil || p.c.Remote == nil {
		return false
	}
	sys := id
	if i := strings.LastIndexByte(id, '.'); i > 0 {
		sys = id[:i]
	}
	return p.c.Remote.BlockList().IsBlocked(sys)
}

// reachable reports whether m's remoting port accepts a TCP connection: a paused
// process's does (its kernel accepts), a dead one's does not.
func reachable(m *cluster.Member) bool {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(m.Host, strconv.Itoa(int(m.Port))), memberDialTimeout)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// memberAddr is m's host:port.
func memberAddr(m *cluster.Member) string {
	return net.JoinHostPort(m.Host, strconv.Itoa(int(m.Port)))
}

// snapshot returns the view of the last topology (by id) and the departures, copied.
func (p *consulProvider) snapshot() (map[string]memberView, []Departure) {
	p.viewMu.Lock()
	defer p.viewMu.Unlock()
	view := make(map[string]memberView, len(p.view))
	for id, v := range p.view {
		view[id] = v
	}
	return view, append([]Departure(nil), p.departed...)
}
