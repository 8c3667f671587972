package fairshare_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/llm/fairshare"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// grant is one slot granted to a waiter of a tenant.
type grant struct {
	tenant  string
	release func()
}

// backlog holds the only slot, queues n[tenant] waiters of each tenant (in an
// interleaved order, the flooding tenant's first), then hands the slot out `grants`
// times and returns how many each tenant got. Every waiter is released or cancelled
// before it returns.
func backlog(t *testing.T, s *fairshare.Slots, order []string, n map[string]int, grants int) map[string]int {
	t.Helper()
	hold, err := s.Acquire(context.Background(), "holder")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan grant)
	var wg sync.WaitGroup
	total := 0
	for _, tenant := range order {
		for range n[tenant] {
			total++
			wg.Go(func() {
				release, err := s.Acquire(ctx, tenant)
				if err != nil {
					return
				}
				select {
				case got <- grant{tenant, release}:
				case <-ctx.Done():
					release()
				}
			})
			// Queue in a known order: this waiter is queued before the next starts.
			waitFor(t, "waiter queued", func() bool { return s.Stats().Waiting == total })
		}
	}
	counts := map[string]int{}
	hold()
	for range grants {
		g := <-got
		counts[g.tenant]++
		g.release()
	}
	cancel()
	wg.Wait()
	if st := s.Stats(); st.InUse != 0 || st.Waiting != 0 {
		t.Fatalf("after the run: %+v, want nothing in use or waiting", st)
	}
	return counts
}

func jain(xs ...float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// A tenant queueing 10× the calls of two others gets a third of the slot while all
// three are backlogged, not 10/12 of it.
func TestEqualWeightsShareWhileBacklogged(t *testing.T) {
	s := fairshare.New(fairshare.Config{Slots: 1})
	counts := backlog(t, s, []string{"a", "b", "c"}, map[string]int{"a": 300, "b": 30, "c": 30}, 60)
	j := jain(float64(counts["a"]), float64(counts["b"]), float64(counts["c"]))
	t.Logf("grants while backlogged: %v, Jain's index %.3f", counts, j)
	if j < 0.95 {
		t.Fatalf("Jain's index %.3f of %v, want ≥ 0.95", j, counts)
	}
}

// With weights 2:1 the heavier tenant gets two grants for each of the other's.
func TestWeightedShares(t *testing.T) {
	s := fairshare.New(fairshare.Config{Slots: 1, Weight: func(tenant string) int {
		if tenant == "a" {
			return 2
		}
		return 1
	}})
	counts := backlog(t, s, []string{"b", "a"}, map[string]int{"a": 100, "b": 100}, 90)
	t.Logf("grants while backlogged: %v", counts)
	if ratio := float64(counts["a"]) / float64(counts["b"]); ratio < 1.8 || ratio > 2.2 {
		t.Fatalf("a:b = %v (%.2f), want 2:1", counts, ratio)
	}
}

func TestFreeSlotIsGrantedAtOnce(t *testing.T) {
	s := fairshare.New(fairshare.Config{Slots: 2})
	r1, err := s.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.InUse != 2 || st.Waiting != 0 {
		t.Fatalf("stats %+v, want 2 in use", st)
	}
	r1()
	r1() // a second call does nothing
	r2()
	if st := s.Stats(); st.InUse != 0 {
		t.Fatalf("stats %+v after release, want 0 in use", st)
	}
}

// A waiter whose context ends leaves its queue and takes no slot; the slot it waited
// for goes to the next waiter.
func TestCancelledWaiterLeavesQueue(t *testing.T) {
	s := fairshare.New(fairshare.Config{Slots: 1})
	hold, err := s.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, "b")
		errc <- err
	}()
	waitFor(t, "b queued", func() bool { return s.Stats().Waiting == 1 })
	granted := make(chan func(), 1)
	go func() {
		r, err := s.Acquire(context.Background(), "c")
		if err == nil {
			granted <- r
		}
	}()
	waitFor(t, "c queued", func() bool { return s.Stats().Waiting == 2 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire: %v, want context.Canceled", err)
	}
	if st := s.Stats(); st.Waiting != 1 || st.InUse != 1 {
		t.Fatalf("after the cancel: %+v, want 1 in use, 1 waiting", st)
	}
	hold()
	(<-granted)()
	if st := s.Stats(); st.Waiting != 0 || st.InUse != 0 {
		t.Fatalf("at the end: %+v, want nothing in use or waiting", st)
	}
}

func TestQueueBound(t *testing.T) {
	s := fairshare.New(fairshare.Config{Slots: 1, QueueBound: 2})
	hold, err := s.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { _, _ = s.Acquire(ctx, "b") })
		waitFor(t, fmt.Sprintf("waiter %d queued", i), func() bool { return s.Stats().Waiting == i+1 })
	}
	_, err = s.Acquire(context.Background(), "b")
	var full *fairshare.QueueFullError
	if !errors.As(err, &full) || !errors.Is(err, fairshare.ErrQueueFull) || full.Tenant != "b" || full.Bound != 2 {
		t.Fatalf("third waiter of b: %v, want a QueueFullError of b, bound 2", err)
	}
	// Another tenant's queue is its own.
	go func() { _, _ = s.Acquire(ctx, "c") }()
	waitFor(t, "c queued", func() bool { return s.Stats().Waiting == 3 })
	cancel()
	wg.Wait()
	hold()
	waitFor(t, "queues empty", func() bool { st := s.Stats(); return st.Waiting == 0 && st.InUse == 0 })
}

// Many callers of several tenants acquiring with contexts cancelled at random moments
// never hold more than the slots and leave none held or queued.
func TestNoSlotLeakUnderRandomCancel(t *testing.T) {
	const slots = 3
	s := fairshare.New(fairshare.Config{Slots: slots, Weight: func(tenant string) int { return len(tenant) }})
	var held, peak atomic.Int64
	var ok, cancelled atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			tenant := []string{"a", "bb", "ccc"}[g%3]
			for range 200 {
				ctx, cancel := context.WithCancel(context.Background())
				if rand.N(2) == 0 {
					go func() {
						for range rand.N(20) {
							runtime.Gosched()
						}
						cancel()
					}()
				}
				release, err := s.Acquire(ctx, tenant)
				if err != nil {
					cancel()
					if !errors.Is(err, context.Canceled) {
						t.Errorf("Acquire: %v", err)
					}
					cancelled.Add(1)
					continue
				}
				n := held.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				runtime.Gosched()
				held.Add(-1)
				release()
				cancel()
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	t.Logf("%d granted, %d cancelled, peak %d held", ok.Load(), cancelled.Load(), peak.Load())
	if peak.Load() > slots {
		t.Fatalf("%d slots held at once, want at most %d", peak.Load(), slots)
	}
	if st := s.Stats(); st.InUse != 0 || st.Waiting != 0 {
		t.Fatalf("at the end: %+v, want nothing in use or waiting", st)
	}
	// Every slot is still there: all of them can be taken at once.
	for range slots {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := s.Acquire(ctx, "a")
		cancel()
		if err != nil {
			t.Fatalf("a slot was lost: %v", err)
		}
	}
}

// A tenant holding less than its share of the slots gets the next freed slot before a
// tenant above its share, even one that queued first and was granted less often: a
// light tenant's call waits for one freed slot, not behind a flood.
func TestTenantBelowItsShareGoesFirst(t *testing.T) {
	s := fairshare.New(fairshare.Config{Slots: 3})
	bg := context.Background()
	b0, err := s.Acquire(bg, "b")
	if err != nil {
		t.Fatal(err)
	}
	for range 10 { // b is granted often: its pass runs ahead of a's
		r, err := s.Acquire(bg, "b")
		if err != nil {
			t.Fatal(err)
		}
		r()
	}
	for range 2 { // a holds two of the three slots
		if _, err := s.Acquire(bg, "a"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range 5 {
		wg.Go(func() {
			if r, err := s.Acquire(ctx, "a"); err == nil {
				r()
			}
		})
		waitFor(t, "a's waiters queued", func() bool { return s.Stats().Waiting == i+1 })
	}
	got := make(chan func(), 1)
	wg.Go(func() {
		if r, err := s.Acquire(ctx, "b"); err == nil {
			got <- r
		}
	})
	waitFor(t, "b's waiter queued", func() bool { return s.Stats().Waiting == 6 })
	b0() // b now holds none of the slots, a two
	var r func()
	select {
	case r = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("b's waiter did not get the freed slot")
	}
	if st := s.Stats(); st.Waiting != 5 {
		t.Fatalf("stats %+v: a's waiters should all still wait", st)
	}
	r()
}
