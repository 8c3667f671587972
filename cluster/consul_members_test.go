package cluster

import (
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/hashicorp/consul/api"
)

func entry(t *testing.T, id, addr, status string) *api.ServiceEntry {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return &api.ServiceEntry{
		Service: &api.AgentService{ID: id, Address: host, Port: p, Tags: []string{"Session"}, Meta: map[string]string{"id": id}},
		Checks:  api.HealthChecks{{Status: status}},
	}
}

func ids(ms []*cluster.Member) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		out[m.Id] = true
	}
	return out
}

// TestProviderKeepsPausedMembersOnly: a member whose check stopped passing stays in the
// topology within the grace while its port accepts connections (paused), and leaves at
// once when its port refuses them (dead) or once the grace is over; a member missing from
// the catalog (the agent restarted) is kept like a paused one.
func TestProviderKeepsPausedMembersOnly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // the paused member's port: the kernel accepts
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // the dead member's port: refused

	p := &consulProvider{cfg: consulConfig{PauseGrace: 10 * time.Second}}
	seen := map[string]*seenMember{}
	t0 := time.Now()
	all := []*api.ServiceEntry{entry(t, "paused", ln.Addr().String(), api.HealthPassing), entry(t, "dead", deadAddr, api.HealthPassing),
		entry(t, "gone", ln.Addr().String(), api.HealthPassing)}
	if got := ids(p.members(all, seen, t0)); len(got) != 3 {
		t.Fatalf("all passing: %v", got)
	}
	later := []*api.ServiceEntry{entry(t, "paused", ln.Addr().String(), api.HealthCritical), entry(t, "dead", deadAddr, api.HealthCritical)}
	got := ids(p.members(later, seen, t0.Add(5*time.Second)))
	if !got["paused"] || got["dead"] || !got["gone"] || len(got) != 2 {
		t.Fatalf("within the grace: %v, want paused and gone (unlisted) kept, dead dropped", got)
	}
	if got := ids(p.members(later, seen, t0.Add(11*time.Second))); len(got) != 0 {
		t.Fatalf("after the grace: %v, want nobody", got)
	}
}

// TestProviderShutdownEndsHungAgentCalls: with the agent unreachable (its port accepts
// connections and never answers, as across a partition), Shutdown ends the heartbeat's
// call in flight instead of waiting it out, so a node leaving while cut off from Consul
// is held up by the deregistration's timeout only, and it reports the failed
// deregistration.
func TestProviderShutdownEndsHungAgentCalls(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // the kernel accepts; nobody ever answers
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const timeout = 2 * time.Second
	p, err := newConsulProvider(consulConfig{Addr: ln.Addr().String(), TTL: 300 * time.Millisecond, Timeout: timeout}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// The test's side of the agent accepts connections and never answers on them.
	conns := make(chan net.Conn, 1)
	stop := make(chan struct{})
	var accepting sync.WaitGroup
	accepting.Add(1)
	go func() {
		defer accepting.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case conns <- c:
			case <-stop:
				_ = c.Close()
				return
			}
		}
	}()
	defer func() { close(stop); _ = ln.Close(); accepting.Wait() }()
	p.started, p.id, p.lastBeat = true, "hung.0", time.Now()
	p.wg.Add(1)
	go p.heartbeat()
	select { // the first beat (at TTL/3) is in flight, hung on the agent
	case c := <-conns:
		defer c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the heartbeat never called the agent")
	}
	began := time.Now()
	err = p.Shutdown(true)
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), "deregister hung.0") {
		t.Fatalf("Shutdown with an unreachable agent returned %v, want the failed deregistration", err)
	}
	// Waiting the beat out would take the rest of its timeout and the re-registration's
	// (another timeout) before the deregistration's own.
	if took > timeout+time.Second {
		t.Fatalf("Shutdown took %s with the heartbeat's call hung; want about the deregistration's %s", took.Round(time.Millisecond), timeout)
	}
}

// TestProviderRecordsHowMembersLeft: a member that leaves the topology is recorded once,
// with its address, the meta it advertised and how: dropped as dead while the catalog
// still lists it failing (its port refuses, or the grace ran out), left gracefully once
// the catalog no longer lists it (a leaving member deregisters).
func TestProviderRecordsHowMembersLeft(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	withVersion := func(e *api.ServiceEntry) *api.ServiceEntry {
		e.Service.Meta["version"] = "v9 " + e.Service.ID
		return e
	}
	p := &consulProvider{cfg: consulConfig{PauseGrace: 10 * time.Second}}
	seen := map[string]*seenMember{}
	t0 := time.Now()
	p.members([]*api.ServiceEntry{withVersion(entry(t, "paused", ln.Addr().String(), api.HealthPassing)),
		withVersion(entry(t, "dead", deadAddr, api.HealthPassing)), withVersion(entry(t, "leaving", ln.Addr().String(), api.HealthPassing))}, seen, t0)
	if view, d := p.snapshot(); len(view) != 3 || len(d) != 0 || !view["dead"].passing || view["dead"].meta["version"] != "v9 dead" {
		t.Fatalf("all passing: view %v, departed %v", view, d)
	}
	later := []*api.ServiceEntry{withVersion(entry(t, "paused", ln.Addr().String(), api.HealthCritical)), withVersion(entry(t, "dead", deadAddr, api.HealthCritical))}
	p.members(later, seen, t0.Add(5*time.Second))
	view, d := p.snapshot()
	if len(d) != 1 || d[0].ID != "dead" || d[0].How != DepartureDead || d[0].Address != deadAddr || d[0].Meta["version"] != "v9 dead" || !d[0].At.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("within the grace: departed %+v, want dead dropped as dead", d)
	}
	if view["paused"].passing || view["leaving"].addr != ln.Addr().String() {
		t.Fatalf("within the grace: view %v, want paused failing and leaving kept", view)
	}
	p.members(later, seen, t0.Add(11*time.Second))
	_, d = p.snapshot()
	how := map[string]string{}
	for _, x := range d {
		how[x.ID] += x.How
	}
	if len(d) != 3 || how["paused"] != DepartureDead || how["leaving"] != DepartureLeft {
		t.Fatalf("after the grace: departed %+v, want paused dead (listed, failing) and leaving left (deregistered)", d)
	}
}

// TestProviderListsJournalKindsOnNewestFormat: with journal kinds configured, a member
// advertising an older journal format than the newest one (or none at all: format 1) is
// listed without them, and the provider keeps the range of formats; with one format
// every member keeps its kinds.
func TestProviderListsJournalKindsOnNewestFormat(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := &consulProvider{cfg: consulConfig{PauseGrace: 10 * time.Second, JournalKinds: []string{"Session"}}, log: slog.New(slog.DiscardHandler)}
	withFormat := func(e *api.ServiceEntry, f string) *api.ServiceEntry {
		e.Service.Meta["journal_format"] = f
		e.Service.Tags = []string{"Session", "prototopic"}
		return e
	}
	kinds := func(ms []*cluster.Member) map[string]string {
		out := map[string]string{}
		for _, m := range ms {
			out[m.Id] = strings.Join(m.Kinds, ",")
		}
		return out
	}
	addr := ln.Addr().String()
	got := kinds(p.members([]*api.ServiceEntry{withFormat(entry(t, "a", addr, api.HealthPassing), "2"), withFormat(entry(t, "b", addr, api.HealthPassing), "2")}, map[string]*seenMember{}, time.Now()))
	if got["a"] != "Session,prototopic" || got["b"] != "Session,prototopic" {
		t.Fatalf("one format: kinds %v; want every member's own", got)
	}
	if r := p.formatRange(); r != (formatRange{2, 2}) {
		t.Fatalf("one format: range %+v", r)
	}
	none := entry(t, "none", addr, api.HealthPassing)
	none.Service.Tags = []string{"Session", "prototopic"}
	got = kinds(p.members([]*api.ServiceEntry{withFormat(entry(t, "a", addr, api.HealthPassing), "2"), withFormat(entry(t, "new", addr, api.HealthPassing), "3"), none},
		map[string]*seenMember{}, time.Now()))
	if got["new"] != "Session,prototopic" || got["a"] != "prototopic" || got["none"] != "prototopic" {
		t.Fatalf("formats 1, 2 and 3: kinds %v; want Session on the member of format 3 only", got)
	}
	if r := p.formatRange(); r != (formatRange{1, 3}) {
		t.Fatalf("formats 1, 2 and 3: range %+v; want 1..3", r)
	}
	// A member hosting no journal kind (a program that joined only to call grains)
	// advertises no format and reads no journal: it holds nothing back.
	client := entry(t, "client", addr, api.HealthPassing)
	client.Service.Tags = []string{"prototopic"}
	got = kinds(p.members([]*api.ServiceEntry{withFormat(entry(t, "a", addr, api.HealthPassing), "3"), client}, map[string]*seenMember{}, time.Now()))
	if got["a"] != "Session,prototopic" {
		t.Fatalf("a grain client beside a member of format 3: kinds %v", got)
	}
	if r := p.formatRange(); r != (formatRange{3, 3}) {
		t.Fatalf("a grain client beside a member of format 3: range %+v; want 3..3 (the client reads no journal)", r)
	}
}
