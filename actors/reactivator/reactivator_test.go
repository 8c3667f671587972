package reactivator_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/reactivator"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/bolt"
)

// pokes records the sessions poked.
type pokes struct {
	mu  sync.Mutex
	ids map[string]int
}

func (p *pokes) poke(_ context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids[id]++
	if strings.HasPrefix(id, "panics") {
		panic("a bug in poke")
	}
	return nil
}

func (p *pokes) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for id := range p.ids {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func (p *pokes) count(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ids[id]
}

// TestReactivatorPokesDueUnownedSessions: over a real embedded journal, the reactivator
// pokes exactly the sessions that are due and unleased, again on every sweep until they
// are owned, and a poke that panics does not stop it.
func TestReactivatorPokesDueUnownedSessions(t *testing.T) {
	j, err := bolt.Open(filepath.Join(t.TempDir(), "journal.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	past, future := time.Now().Add(-time.Second), time.Now().Add(time.Hour)
	for _, e := range []persistence.IndexEntry{
		{SessionID: "due", Status: persistence.StatusRunning, DueAt: past},
		{SessionID: "panics", Status: persistence.StatusRunning, DueAt: past},
		{SessionID: "leased", Status: persistence.StatusRunning, DueAt: past},
		{SessionID: "later", Status: persistence.StatusAwaitingHuman, DueAt: future},
		{SessionID: "waits", Status: persistence.StatusAwaitingHuman},
		{SessionID: "done", Status: persistence.StatusCompleted},
	} {
		if _, err := j.AppendIndexed(ctx, e.SessionID, 0, []persistence.Record{{Type: "e"}}, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.RenewLease(ctx, "leased", "member-a", time.Hour); err != nil {
		t.Fatal(err)
	}
	p := &pokes{ids: map[string]int{}}
	system := actor.NewActorSystem()
	pid, err := reactivator.Spawn(system.Root, "reactivator", reactivator.Config{
		Index: j, Poke: p.poke, Interval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = system.Root.StopFuture(pid).Wait() }()
	testenv.Eventually(t, 10*time.Second, func() bool { return p.count("due") >= 2 && p.count("panics") >= 2 },
		"the due sessions were not poked on two sweeps")
	if got := strings.Join(p.seen(), ","); got != "due,panics" {
		t.Fatalf("poked %s, want due,panics", got)
	}
	// Once an activation takes the lease, the session is left alone.
	if err := j.RenewLease(ctx, "due", "member-b", time.Hour); err != nil {
		t.Fatal(err)
	}
	n := p.count("due")
	target := p.count("panics") + 3
	testenv.Eventually(t, 10*time.Second, func() bool { return p.count("panics") >= target }, "sweeps stopped")
	if p.count("due") > n+1 { // a sweep may have been under way when the lease was taken
		t.Fatalf("a leased session was poked %d more times", p.count("due")-n)
	}
}

func TestConfigNeedsIndexAndPoke(t *testing.T) {
	for _, c := range []reactivator.Config{{}, {Poke: func(context.Context, string) error { return nil }}} {
		if err := c.Validate(); err == nil {
			t.Fatalf("%+v validated", c)
		}
	}
}

// TestHurrySweepsAtOnceAndThenOften: with an hour between regular sweeps, Hurry makes
// the reactivator sweep at once, and keep sweeping every HurryInterval for HurryFor: a
// session whose lease is released a little after the Hurry (its old activation was
// still stopping) is poked without another Hurry.
func TestHurrySweepsAtOnceAndThenOften(t *testing.T) {
	j, err := bolt.Open(filepath.Join(t.TempDir(), "journal.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	past := time.Now().Add(-time.Second)
	for _, id := range []string{"moved", "stopping"} {
		e := persistence.IndexEntry{SessionID: id, Status: persistence.StatusRunning, DueAt: past}
		if _, err := j.AppendIndexed(ctx, id, 0, []persistence.Record{{Type: "e"}}, e); err != nil {
			t.Fatal(err)
		}
		if err := j.RenewLease(ctx, id, "member-a", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	p := &pokes{ids: map[string]int{}}
	system := actor.NewActorSystem()
	pid, err := reactivator.Spawn(system.Root, "reactivator", reactivator.Config{
		Index: j, Poke: p.poke, Interval: time.Hour, HurryInterval: 20 * time.Millisecond, HurryFor: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = system.Root.StopFuture(pid).Wait() }()

	// The first sweep (at start) finds both leased; the next regular one is an hour away.
	if err := j.ReleaseLease(ctx, "moved", "member-a"); err != nil {
		t.Fatal(err)
	}
	reactivator.Hurry(system.Root, pid)
	testenv.Eventually(t, 5*time.Second, func() bool { return p.count("moved") >= 1 }, "Hurry did not sweep: the released session was not poked")
	if err := j.ReleaseLease(ctx, "stopping", "member-a"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() bool { return p.count("stopping") >= 1 },
		"no sweep within 5s of a lease released during the hurried spell")
}
