package live_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/live/feed"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence/bolt"
)

func newFeed(t *testing.T) *feed.Feed {
	t.Helper()
	j, err := bolt.Open(filepath.Join(t.TempDir(), "j.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	f := feed.New(j, feed.Options{Recent: -1})
	t.Cleanup(f.Close)
	return f
}

func event(seq uint64) *messages.Event {
	return &messages.Event{Seq: seq, SessionId: "s", Payload: &messages.Event_SessionStarted{SessionStarted: &messages.SessionStarted{}}}
}

// TestWaiterDeliversUpdatesAndTellsIdle: a waiter returns a subscription's events and
// deltas in order; it reports idle only once a wait lasted the whole interval (a timer
// armed by an earlier, shorter wait does not cut a later one short); it ends with ctx.
func TestWaiterDeliversUpdatesAndTellsIdle(t *testing.T) {
	f := newFeed(t)
	sub := f.Follow("s", 0, 16)
	defer sub.Close()
	w := live.NewWaiter(sub)
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	const idle = 300 * time.Millisecond
	// Nothing published: idle, after the interval.
	start := time.Now()
	if u, isIdle, err := w.Next(ctx, idle); err != nil || !isIdle || u.Event != nil {
		t.Fatalf("Next = %+v, %v, %v; want idle", u, isIdle, err)
	}
	if d := time.Since(start); d < idle {
		t.Fatalf("idle after %v, want %v", d, idle)
	}
	// A wait ended by an update (published while it waits) leaves the timer running...
	go f.Publish("s", []*messages.Event{event(1)})
	if u, isIdle, err := w.Next(ctx, idle); err != nil || isIdle || u.Event.GetSeq() != 1 {
		t.Fatalf("Next = %+v, %v, %v; want event 1", u, isIdle, err)
	}
	// ... and the next wait still lasts a whole interval before it is idle.
	start = time.Now()
	if _, isIdle, err := w.Next(ctx, idle); err != nil || !isIdle {
		t.Fatalf("Next = %v, %v; want idle", isIdle, err)
	}
	if d := time.Since(start); d < idle {
		t.Fatalf("idle after %v, want %v", d, idle)
	}
	// Updates come in order, a delta placed after its event.
	f.PublishDelta("s", live.Delta{CallID: "c", Index: 1, AfterSeq: 2, Text: "a"})
	f.Publish("s", []*messages.Event{event(2), event(3)})
	var got []string
	for range 3 {
		u, isIdle, err := w.Next(ctx, idle)
		if err != nil || isIdle {
			t.Fatalf("Next: %v, %v", isIdle, err)
		}
		if u.IsDelta {
			got = append(got, "delta:"+u.Delta.Text)
		} else {
			got = append(got, "event:"+string(rune('0'+u.Event.GetSeq())))
		}
	}
	if want := "[event:2 delta:a event:3]"; fmt.Sprint(got) != want {
		t.Fatalf("order %v, want %s", got, want)
	}
	// ctx ends a wait.
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, _, err := w.Next(cctx, idle); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with an ended ctx: %v", err)
	}
}

// TestWaiterWaitsWithoutAllocating: a wait for a published update allocates nothing
// (a context with a timeout per wait made two contexts and a timer).
func TestWaiterWaitsWithoutAllocating(t *testing.T) {
	f := newFeed(t)
	sub := f.Follow("s", 0, 16)
	defer sub.Close()
	w := live.NewWaiter(sub)
	defer w.Stop()
	ctx := context.Background()
	const rounds = 100
	evs := make([][]*messages.Event, rounds+1)
	for i := range evs {
		evs[i] = []*messages.Event{event(uint64(i) + 1)}
	}
	// A publisher that publishes each event once the reader waits for it.
	next := make(chan int)
	defer close(next)
	go func() {
		for i := range next {
			f.Publish("s", evs[i])
		}
	}()
	round := 0
	var bad error
	allocs := testing.AllocsPerRun(rounds, func() {
		next <- round
		u, isIdle, err := w.Next(ctx, time.Minute)
		if err != nil || isIdle || u.Event.GetSeq() != uint64(round)+1 {
			bad = errors.New("an update out of place")
		}
		round++
	})
	if bad != nil {
		t.Fatal(bad)
	}
	if allocs != 0 {
		t.Fatalf("%.1f allocations per wait, want none", allocs)
	}
}
