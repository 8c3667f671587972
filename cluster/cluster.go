// Package cluster owns a Fathom node's membership in the Proto.Actor cluster: the actor
// system, remoting, the member provider (local in-memory or Consul), and disthash
// identity lookup (rendezvous hashing of grain identities onto members).
//
// Proto.Actor's own StartMember panics on error, sleeps a second and, with Consul
// unreachable, "starts" with no members while logging thousands of retries per second.
// Node wraps it into Start(ctx) error / Stop(ctx) error: Consul is checked first (fail
// fast, one clear error), panics become errors, and Start returns only once this member
// is part of the topology, so the first grain call after Start is placed.
//
// The Consul member provider is Fathom's own (consul.go): a member whose health check
// lapsed but whose port still accepts connections (paused, not dead) stays in the
// topology for Config.PauseGrace instead of being blocked for good, and a member
// registers again after the agent forgot it. Handover starts a graceful leave by
// stopping the member's grains at once (sessions release their leases), and Ready tells
// whether the member can place grains.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Provider names.
const (
	// ProviderLocal is a single in-process member with no external service.
	ProviderLocal = "local"
	// ProviderConsul discovers members through a Consul agent.
	ProviderConsul = "consul"
)

// Config configures one cluster member.
type Config struct {
	// Name is the cluster name; members with the same name (and provider) form one cluster.
	Name string
	// Host is the interface the member's remoting binds. Default 127.0.0.1.
	Host string
	// Port is the remoting port; 0 picks a free one.
	Port int
	// AdvertisedHost, when set, is the host:port other members dial instead of the bound
	// address (NAT, containers). Requires a fixed Port.
	AdvertisedHost string
	// Provider is "local" or "consul".
	Provider string
	// ConsulAddr is the Consul agent's HTTP address host:port (default CONSUL_HTTP_ADDR,
	// else 127.0.0.1:8500).
	ConsulAddr string
	// RequestTimeout is the default timeout of grain calls. Default 10s.
	RequestTimeout time.Duration
	// StartTimeout bounds Start (Consul check, joining, waiting for the topology). Default 20s.
	StartTimeout time.Duration
	// DrainTimeout bounds a graceful leave's wait for remote peers to close their
	// connections; the member's server is then closed. Default 6s.
	DrainTimeout time.Duration
	// PauseGrace is how long, with Consul, a member whose health check stopped passing
	// stays in the topology while its remoting port still accepts connections (a paused
	// process, not a dead one). Default 60s.
	PauseGrace time.Duration
	// ConsulCheckTTL is the TTL of the member's Consul health check, renewed every third
	// of it: a member killed without leaving is dropped by the others about this long
	// after its last renewal, and its sessions move then. Default 2s.
	ConsulCheckTTL time.Duration
	// Logger receives the member's logs; Proto.Actor's own are passed on at Warn and above.
	Logger *slog.Logger
	// Meta are labels this member advertises to the others (its build version, journal
	// format, start time): with Consul, in its service meta (the key "id" is the
	// provider's). The local provider has no other member to tell; Members reports them
	// for this member either way.
	Meta map[string]string
	// JournalKinds are the grain kinds whose activations read the journal (Fathom's
	// session kind). With Consul, while the members advertise different journal formats
	// (Meta's buildinfo.MetaFormat, a rolling upgrade), these kinds are placed only on
	// the members of the newest format, which read every event; with one format they are
	// placed on every member, as any other kind (formats.go).
	JournalKinds []string
}

// DefaultConfig is a local single-node member on a free loopback port.
func DefaultConfig() Config {
	addr := os.Getenv("CONSUL_HTTP_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8500"
	}
	return Config{
		Name: "fathom", Host: "127.0.0.1", Provider: ProviderLocal, ConsulAddr: addr,
		RequestTimeout: 10 * time.Second, StartTimeout: 20 * time.Second, DrainTimeout: 6 * time.Second,
	}
}

// Validate reports a configuration that cannot start.
func (c Config) Validate() error {
	if c.Name == "" {
		return errors.New("cluster: name is empty")
	}
	if c.Host == "" {
		return errors.New("cluster: host is empty")
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("cluster: port %d out of range", c.Port)
	}
	if c.AdvertisedHost != "" {
		if _, _, err := net.SplitHostPort(c.AdvertisedHost); err != nil {
			return fmt.Errorf("cluster: advertised host %q must be host:port: %w", c.AdvertisedHost, err)
		}
		if c.Port == 0 {
			return errors.New("cluster: an advertised host needs a fixed port")
		}
	}
	switch c.Provider {
	case ProviderLocal:
	case ProviderConsul:
		if _, _, err := net.SplitHostPort(c.ConsulAddr); err != nil {
			return fmt.Errorf("cluster: consul address %q must be host:port: %w", c.ConsulAddr, err)
		}
	default:
		return fmt.Errorf("cluster: unknown provider %q (want %q or %q)", c.Provider, ProviderLocal, ProviderConsul)
	}
	if c.RequestTimeout < 0 || c.StartTimeout < 0 || c.DrainTimeout < 0 || c.PauseGrace < 0 || c.ConsulCheckTTL < 0 {
		return errors.New("cluster: timeouts must not be negative")
	}
	return nil
}

// NewActorSystem creates an actor system whose Proto.Actor logs go to logger at Warn and
// above (its Info level is chatty), except that a connection ended by a peer's normal
// leave is logged at Info instead of Proto.Actor's ERROR (actorLogHandler). opts are
// passed on (e.g. actor.WithMetricProviders).
func NewActorSystem(logger *slog.Logger, opts ...actor.ConfigOption) *actor.ActorSystem {
	if logger == nil {
		logger = slog.Default()
	}
	l := slog.New(newActorLogHandler(logger.Handler(), slog.LevelWarn)).With("lib", "protoactor")
	opts = append([]actor.ConfigOption{actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return l })}, opts...)
	return actor.NewActorSystem(opts...)
}

// Node is one cluster member.
type Node struct {
	cfg     Config
	log     *slog.Logger
	system  *actor.ActorSystem
	cluster *cluster.Cluster

	mu         sync.Mutex
	started    bool
	stopped    bool
	handedOver bool

	// Proto.Actor's MemberList is not safe to read from outside its actors; the node
	// keeps its own copy of the topology from the ClusterTopology events instead.
	topoMu  sync.Mutex
	members []*cluster.Member
	sub     *eventstream.Subscription
	// placement is the rendezvous hashing disthash places identities with, over the same
	// topology (its own is not exported): Places reads it. Safe for concurrent use.
	placement *cluster.Rendezvous
}

// New prepares a member of system hosting kinds. It does not start anything.
func New(cfg Config, system *actor.ActorSystem, kinds ...*cluster.Kind) (*Node, error) {
	d := DefaultConfig()
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = d.RequestTimeout
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = d.StartTimeout
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = d.DrainTimeout
	}
	if cfg.Host == "" {
		cfg.Host = d.Host
	}
	if cfg.Provider == ProviderConsul && cfg.ConsulAddr == "" {
		cfg.ConsulAddr = d.ConsulAddr
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if system == nil {
		return nil, errors.New("cluster: nil actor system")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var provider cluster.ClusterProvider
	switch cfg.Provider {
	case ProviderLocal:
		provider = &localProvider{ClusterProvider: test.NewTestProvider(test.NewInMemAgent()), registered: make(chan struct{})}
	case ProviderConsul:
		p, err := newConsulProvider(consulConfig{Addr: cfg.ConsulAddr, PauseGrace: cfg.PauseGrace, TTL: cfg.ConsulCheckTTL, Meta: cfg.Meta, JournalKinds: cfg.JournalKinds}, cfg.Logger.With("component", "cluster"))
		if err != nil {
			return nil, err
		}
		provider = p
	}
	var ropts []remote.ConfigOption
	if cfg.AdvertisedHost != "" {
		ropts = append(ropts, remote.WithAdvertisedHost(cfg.AdvertisedHost))
	}
	copts := []cluster.ConfigOption{cluster.WithKinds(kinds...), cluster.WithRequestTimeout(cfg.RequestTimeout),
		cluster.WithClusterContextProducer(newRequestContext)}
	if cfg.Provider == ProviderConsul {
		// Gossip blocks, for good, the actor system of a member it has not heard from for
		// this long (20 s by default), so a member paused for longer could never talk to
		// the others again even once it rejoined under a new member id. The provider
		// decides who is alive (the Consul TTL and the pause grace); gossip does not.
		copts = append(copts, cluster.WithHeartbeatExpiration(gossipHeartbeatExpiration))
	}
	ccfg := cluster.Configure(cfg.Name, provider, disthash.New(), remote.Configure(cfg.Host, cfg.Port, ropts...), copts...)
	n := &Node{cfg: cfg, log: cfg.Logger.With("component", "cluster"), system: system, cluster: cluster.New(system, ccfg),
		placement: cluster.NewRendezvous()}
	n.sub = system.EventStream.Subscribe(func(ev any) {
		if t, ok := ev.(*cluster.ClusterTopology); ok {
			ms := make([]*cluster.Member, len(t.Members))
			copy(ms, t.Members)
			n.topoMu.Lock()
			n.members = ms
			n.topoMu.Unlock()
			n.placement.UpdateMembers(ms)
		}
	})
	return n, nil
}

// memberID is this member's id in the topology: the actor system's id, but with Consul
// the provider's (it changes when the member rejoins after being dropped).
func (n *Node) memberID() string {
	if p, ok := n.cluster.Config.ClusterProvider.(*consulProvider); ok {
		return p.MemberID()
	}
	return n.system.ID
}

func (n *Node) hasMember(id string) bool {
	n.topoMu.Lock()
	defer n.topoMu.Unlock()
	for _, m := range n.members {
		if m.Id == id {
			return true
		}
	}
	return false
}

// Start joins the cluster. It fails fast when the Consul agent is unreachable and
// returns once this member sees itself in the cluster topology.
func (n *Node) Start(ctx context.Context) (err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started {
		return errors.New("cluster: already started")
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.StartTimeout)
	defer cancel()
	if n.cfg.Provider == ProviderConsul {
		if err := CheckConsul(ctx, n.cfg.ConsulAddr); err != nil {
			return err
		}
	}
	n.started = true
	// Proto.Actor's StartMember ends with a fixed 1 s sleep after the member registered
	// with its provider. A local member is usable once its provider has registered it
	// (the topology it publishes has then reached every subscriber, the identity lookup
	// too), so its start runs on its own and is waited for only until then; startMu is
	// held until then too, not through the sleep. A Consul member's topology comes from
	// the agent: its start is waited for.
	startMu.Lock()
	defer startMu.Unlock()
	started := make(chan error, 1)
	go func() { started <- n.startMember() }()
	var registered <-chan struct{}
	if lp, ok := n.cluster.Config.ClusterProvider.(*localProvider); ok {
		registered = lp.registered
	}
	select {
	case err := <-started:
		if err != nil {
			return err
		}
	case <-registered:
	case <-ctx.Done():
		<-started
		n.shutdown(false)
		return fmt.Errorf("cluster: member %s:%d did not start: %w", n.cfg.Host, n.cfg.Port, ctx.Err())
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for self := n.memberID(); !n.hasMember(self); self = n.memberID() {
		select {
		case <-ctx.Done():
			n.shutdown(false)
			return fmt.Errorf("cluster: member %s:%d did not join the %s topology: %w", n.cfg.Host, n.cfg.Port, n.cfg.Provider, ctx.Err())
		case <-tick.C:
		}
	}
	n.log.Info("joined cluster", "name", n.cfg.Name, "provider", n.cfg.Provider, "address", n.Address(), "members", len(n.MemberAddresses()))
	return nil
}

// gossipHeartbeatExpiration is how long gossip waits before it blocks a silent member's
// actor system: far past any pause a member rides out or rejoins after.
const gossipHeartbeatExpiration = 7 * 24 * time.Hour

// startMu serialises member starts in one process: Proto.Actor's remote.Start writes
// grpc's global logger, a data race when two members start concurrently. Node.Start
// holds it until its member has started (a local member: is registered).
var startMu sync.Mutex

func (n *Node) startMember() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cluster: start member on %s:%d: %v", n.cfg.Host, n.cfg.Port, r)
		}
	}()
	n.cluster.StartMember()
	return nil
}

// CheckConsul asks the agent at addr for its leader, with a 2s timeout, and returns a
// clear error if it does not answer with one.
func CheckConsul(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/status/leader", nil)
	if err != nil {
		return fmt.Errorf("consul agent at %s: %w", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("consul agent at %s is unreachable: %w", addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("consul agent at %s answered HTTP %d: %s", addr, resp.StatusCode, body)
	}
	var leader string
	if err := json.Unmarshal(body, &leader); err != nil || leader == "" {
		return fmt.Errorf("consul agent at %s has no leader yet", addr)
	}
	return nil
}

// Handover is the first half of a graceful leave: the member withdraws from the
// provider (the Consul registration goes, so every member, this one included, drops it
// from the topology and places its identities elsewhere; the gossip marks it as left),
// then every grain activation on this member is stopped and waited for. A grain's
// Terminate runs at once, at a boundary of its own work (a session grain waits for its
// appends in flight and releases its lease), so the other members may activate the
// identity while this member still finishes its leave. Stop completes the leave; calling
// Handover before it is optional and only makes the hand-over earlier. It is a no-op on
// a member that is not running.
func (n *Node) Handover(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.started || n.stopped || n.handedOver {
		return nil
	}
	n.handedOver = true
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				n.log.Warn("cluster hand-over panicked", "panic", fmt.Sprint(r))
			}
		}()
		n.cluster.Gossip.SetState(cluster.GracefullyLeftKey, &emptypb.Empty{})
		if err := n.cluster.Config.ClusterProvider.Shutdown(true); err != nil {
			n.log.Warn("withdraw from the member provider", "error", err)
		}
		began := time.Now()
		n.cluster.IdentityLookup.Shutdown() // stops the placement actor: it poisons its grains and waits
		n.log.Info("handed grains over", "address", n.Address(), "took", time.Since(began).Round(time.Millisecond))
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cluster: hand grains over: %w", ctx.Err())
	}
}

// Stop leaves the cluster gracefully (deregistering from Consul and handing grains
// over), or abruptly if ctx ends first. It is idempotent.
func (n *Node) Stop(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.started || n.stopped {
		n.stopped = true
		return nil
	}
	n.stopped = true
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.shutdown(true)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cluster: graceful leave: %w", ctx.Err())
	}
}

// shutdown leaves the cluster. A graceful leave ends with gRPC's GracefulStop, which
// waits for peers to close their connections. Proto.Actor gives it 10 s and then returns
// while GracefulStop still runs in a goroutine of its own: that goroutine outlives Stop
// (and, in a process that starts another member later, races with the new member's start
// on gRPC's global logger). Closing the server after DrainTimeout ends GracefulStop
// inside the leave, so nothing of the member runs once Stop returned.
func (n *Node) shutdown(graceful bool) {
	defer func() {
		if r := recover(); r != nil {
			n.log.Warn("cluster shutdown panicked", "panic", fmt.Sprint(r))
		}
	}()
	if graceful && n.cfg.Provider == ProviderLocal {
		force := time.AfterFunc(n.cfg.DrainTimeout, n.closeServer)
		defer force.Stop()
		n.leaveAlone()
		return
	}
	if graceful {
		// Cluster.Shutdown's own steps before the server's drain take about 2 s.
		force := time.AfterFunc(2*time.Second+n.cfg.DrainTimeout, n.closeServer)
		defer force.Stop()
	}
	n.cluster.Shutdown(graceful)
	// Proto.Actor stops the provider only on a graceful leave; ours runs a heartbeat and a
	// watch that must end with the member either way (idempotent).
	if err := n.cluster.Config.ClusterProvider.Shutdown(graceful); err != nil {
		n.log.Warn("stop the member provider", "error", err)
	}
}

// leaveAlone is the graceful leave of a member of the local provider: Proto.Actor's
// Cluster.Shutdown(true) in its order, without its fixed 2 s wait for the ownership of
// grains to move to other members: a local member has none, and its grains were stopped
// by Handover or are stopped here by the identity lookup.
func (n *Node) leaveAlone() {
	c := n.cluster
	c.Gossip.SetState(cluster.GracefullyLeftKey, &emptypb.Empty{})
	c.ActorSystem.Shutdown()
	c.IdentityLookup.Shutdown()
	c.Gossip.Shutdown()
	c.Remote.Shutdown(true)
}

// closeServer closes the member's gRPC server and every connection to it.
func (n *Node) closeServer() {
	defer func() {
		if r := recover(); r != nil {
			n.log.Warn("closing the cluster server panicked", "panic", fmt.Sprint(r))
		}
	}()
	n.log.Warn("peers did not close their connections in time; closing the cluster server", "address", n.Address())
	n.cluster.Remote.Shutdown(false)
}

// localProvider is Proto.Actor's in-memory test provider over an agent of this member's
// own, without its deregistration at shutdown. Nobody else reads that agent, and the
// deregistration made the member list block the leaving member while the gossip loop,
// still running, read the block list unlocked (a data race inside Proto.Actor). The
// provider's refresh ticker is left running; it only touches the agent.
type localProvider struct {
	cluster.ClusterProvider
	// registered is closed once StartMember has registered the member: the agent
	// published the topology with it, synchronously, to every subscriber.
	registered chan struct{}
}

// StartMember implements cluster.ClusterProvider.
func (p *localProvider) StartMember(c *cluster.Cluster) error {
	if err := p.ClusterProvider.StartMember(c); err != nil {
		return err
	}
	close(p.registered)
	return nil
}

// Shutdown implements cluster.ClusterProvider: there is nobody to tell.
func (*localProvider) Shutdown(bool) error { return nil }

// Ready reports why this member cannot place grains, nil when it can: it must be
// running, see itself in its own topology, and (with Consul) not have been dropped by
// the other members after a pause longer than the grace.
func (n *Node) Ready() error {
	n.mu.Lock()
	started, stopped := n.started, n.stopped || n.handedOver
	n.mu.Unlock()
	switch {
	case !started:
		return errors.New("cluster: member not started")
	case stopped:
		return errors.New("cluster: member is leaving")
	}
	if p, ok := n.cluster.Config.ClusterProvider.(*consulProvider); ok {
		if err := p.Dropped(); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	if !n.hasMember(n.memberID()) {
		return fmt.Errorf("cluster: member %s is not in its own topology", n.Address())
	}
	return nil
}

// Cluster is the underlying Proto.Actor cluster (for generated grain clients).
func (n *Node) Cluster() *cluster.Cluster { return n.cluster }

// System is the member's actor system.
func (n *Node) System() *actor.ActorSystem { return n.system }

// Address is the member's remoting address host:port (valid after Start).
func (n *Node) Address() string { return n.system.Address() }

// Places reports whether the cluster places identity of kind on this member, as this
// member sees the topology (false before it has one): the answer disthash gives, except
// for the moment a topology change reaches one before the other.
func (n *Node) Places(kind, identity string) bool {
	return n.placement.GetByClusterIdentity(&cluster.ClusterIdentity{Identity: identity, Kind: kind}) == n.Address()
}

// MemberAddresses lists the addresses of the members this node currently sees, sorted.
func (n *Node) MemberAddresses() []string {
	n.topoMu.Lock()
	ms := n.members
	n.topoMu.Unlock()
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, net.JoinHostPort(m.Host, strconv.Itoa(int(m.Port))))
	}
	sort.Strings(out)
	return out
}

// MemberInfo is a member of the topology as this member sees it.
type MemberInfo struct {
	// ID is the member id; Address its host:port.
	ID, Address string
	// Self is true for this member.
	Self bool
	// Meta are the labels the member advertises (Config.Meta); empty for another member
	// of the local provider (there is none) or one the provider has not described yet.
	Meta map[string]string
	// Passing is false for a member whose Consul check stopped passing but which is kept
	// within the pause grace while its port still answers (a paused process).
	Passing bool
}

// Members describes the members of the topology this node sees, sorted by address.
func (n *Node) Members() []MemberInfo {
	n.topoMu.Lock()
	ms := n.members
	n.topoMu.Unlock()
	var view map[string]memberView
	if p, ok := n.cluster.Config.ClusterProvider.(*consulProvider); ok {
		view, _ = p.snapshot()
	}
	self := n.memberID()
	out := make([]MemberInfo, 0, len(ms))
	for _, m := range ms {
		mi := MemberInfo{ID: m.Id, Address: memberAddr(m), Passing: true}
		if v, ok := view[m.Id]; ok {
			mi.Meta, mi.Passing = v.meta, v.passing
		}
		if m.Id == self {
			mi.Self, mi.Meta = true, n.cfg.Meta
		}
		out = append(out, mi)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Address < out[b].Address })
	return out
}

// Departures lists the members that left this node's topology since it started (with
// Consul; the local provider has no other member), oldest first; the provider keeps the
// last 64.
func (n *Node) Departures() []Departure {
	if p, ok := n.cluster.Config.ClusterProvider.(*consulProvider); ok {
		_, d := p.snapshot()
		return d
	}
	return nil
}
