package session

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// TestDrainWaitsForEveryBusyGrain: Begin tells every registered grain that the member
// drains and counts each busy until it reports; Wait returns once none is, or with its
// context's error, Busy naming the ones left; a grain registered while draining is told
// so and counts busy until it reports; a grain that stops counts no more.
func TestDrainWaitsForEveryBusyGrain(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	var mu sync.Mutex
	told := map[string]int{}
	spawn := func(id string) *actor.PID {
		return sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(*drainMsg); ok {
				mu.Lock()
				told[id]++
				mu.Unlock()
			}
		}))
	}
	d := NewDrain()
	a, b := spawn("a"), spawn("b")
	if d.register("a", a) || d.register("b", b) {
		t.Fatal("register reports draining before Begin")
	}
	if n := d.Begin(sys.Root); n != 2 || !d.Draining() {
		t.Fatalf("Begin = %d (draining %v), want 2 active grains", n, d.Draining())
	}
	if n := d.Begin(sys.Root); n != 2 {
		t.Fatalf("Begin again = %d, want 2", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		ok := told["a"] == 1 && told["b"] == 1
		mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("grains told %v, want each once", told)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c := spawn("c")
	if !d.register("c", c) {
		t.Fatal("a grain registered while draining is not told so")
	}
	if got := d.Busy(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Busy = %v, want a, b, c", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if err := d.Wait(ctx); err == nil {
		t.Fatal("Wait returned with grains busy")
	}
	cancel()
	done := make(chan error, 1)
	go func() { done <- d.Wait(context.Background()) }()
	d.report("a", false)
	d.report("b", true) // still running a call
	d.unregister("c", c)
	d.unregister("b", a) // another activation's pid: b stays
	select {
	case err := <-done:
		t.Fatalf("Wait returned (%v) with b busy", err)
	case <-time.After(20 * time.Millisecond):
	}
	d.report("b", false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Wait did not return once no grain was busy (busy: %v)", d.Busy())
	}
}
