package sweep

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// nowMsg asks the test actor for Loop.Now.
type nowMsg struct{}

type testActor struct {
	loop    Loop[int]
	reports chan error
}

func (a *testActor) Receive(ctx actor.Context) {
	if a.loop.Receive(ctx) {
		return
	}
	if _, ok := ctx.Message().(*nowMsg); ok {
		a.loop.Now(ctx)
		ctx.Respond(true)
	}
}

// TestLoopReportsPanicsAndSweepsAgain drives a loop in a real actor: a panicking sweep is
// reported as an error (the actor lives on), a Now during a sweep runs one more sweep right
// after it, and stopping the actor cancels the sweep in flight and waits for it.
func TestLoopReportsPanicsAndSweepsAgain(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	var n atomic.Int32
	release := make(chan struct{})
	cancelled := make(chan struct{})
	a := &testActor{reports: make(chan error, 16)}
	a.loop = Loop[int]{
		Sweep: func(ctx context.Context) (int, error) {
			switch n.Add(1) {
			case 1:
				panic("boom")
			case 2:
				<-release // held until the test asked for Now
				return 2, nil
			case 3:
				return 3, nil
			default:
				<-ctx.Done() // held until the actor stops
				close(cancelled)
				return 0, ctx.Err()
			}
		},
		Report: func(_ int, err error) { a.reports <- err },
		Next:   func() time.Duration { return time.Hour }, // only Started and Now sweep here
	}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }))
	next := func() error {
		t.Helper()
		select {
		case err := <-a.reports:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("no sweep reported within 10 s")
			return nil
		}
	}
	if err := next(); err == nil || !strings.Contains(err.Error(), "sweep panicked: boom") {
		t.Fatalf("first sweep: got %v, want the panic as an error", err)
	}
	// The panicked sweep's delay is an hour: sweep 2 must come from Now.
	now := func() {
		t.Helper()
		if _, err := sys.Root.RequestFuture(pid, &nowMsg{}, 5*time.Second).Result(); err != nil {
			t.Fatal(err)
		}
	}
	now()
	testenv.Eventually(t, 10*time.Second, func() bool { return n.Load() == 2 }, "condition not met")
	now() // while sweep 2 runs: sweep 3 follows it at once
	close(release)
	if err := next(); err != nil {
		t.Fatalf("second sweep: %v", err)
	}
	if err := next(); err != nil {
		t.Fatalf("the sweep asked for by Now: %v", err)
	}
	now()
	testenv.Eventually(t, 10*time.Second, func() bool { return n.Load() == 4 }, "condition not met")
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cancelled:
	default:
		t.Fatal("stopping the actor returned before the sweep in flight ended")
	}
}
