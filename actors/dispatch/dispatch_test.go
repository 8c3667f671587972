package dispatch

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// A mailbox never waits for a worker: with every worker blocked, new work still runs.
func TestScheduleNeverWaitsForABusyWorker(t *testing.T) {
	p := New(time.Minute, 0, 0)
	release := make(chan struct{})
	defer close(release)
	var blocked atomic.Int32
	for range 8 {
		p.Schedule(func() { blocked.Add(1); <-release })
	}
	testenv.Eventually(t, 5*time.Second, func() bool { return blocked.Load() == 8 }, "8 blocked workers")
	ran := make(chan struct{})
	p.Schedule(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("work scheduled while every worker was blocked did not run")
	}
}

// A worker that finished its work takes the next one instead of a new goroutine.
func TestIdleWorkerTakesNextWork(t *testing.T) {
	p := New(time.Minute, 0, 0)
	done := make(chan struct{})
	p.Schedule(func() { close(done) })
	<-done
	// The worker is now idle on p.work: a non-blocking hand-over succeeds.
	got := make(chan struct{})
	testenv.Eventually(t, 5*time.Second, func() bool {
		select {
		case p.work <- func() { close(got) }:
			return true
		default:
			return false
		}
	}, "an idle worker")
	<-got
}

// Idle workers exit after the idle time: the pool leaves no goroutines behind.
func TestIdleWorkersExit(t *testing.T) {
	before := runtime.NumGoroutine()
	p := New(10*time.Millisecond, 0, 0)
	release := make(chan struct{})
	for range 16 {
		p.Schedule(func() { <-release })
	}
	close(release)
	testenv.Eventually(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= before }, "idle workers to exit")
}

// At most maxIdle workers wait for work: after a burst of blocked work (model calls of
// many sessions) the others exit at once instead of keeping their stacks for the idle
// time.
func TestIdleWorkersAreBounded(t *testing.T) {
	before := runtime.NumGoroutine()
	p := New(time.Hour, 0, 4)
	release := make(chan struct{})
	var blocked atomic.Int32
	for range 32 {
		p.Schedule(func() { blocked.Add(1); <-release })
	}
	testenv.Eventually(t, 5*time.Second, func() bool { return blocked.Load() == 32 }, "32 blocked workers")
	close(release)
	testenv.Eventually(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= before+4 }, "all but 4 idle workers to exit")
	// The idle ones still take work.
	ran := make(chan struct{})
	p.Schedule(func() { close(ran) })
	<-ran
	if n := runtime.NumGoroutine(); n > before+4 {
		t.Fatalf("%d goroutines after the work, %d before: more than 4 idle workers", n, before)
	}
}

// The pool runs a real actor's mailbox: requests are answered in order.
func TestPoolRunsActorMailboxes(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	var n atomic.Int64
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if v, ok := ctx.Message().(int); ok {
			ctx.Respond(n.Add(int64(v)))
		}
	}, Props()))
	for i := 1; i <= 100; i++ {
		res, err := system.Root.RequestFuture(pid, 1, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		if res.(int64) != int64(i) {
			t.Fatalf("request %d answered %v", i, res)
		}
	}
	if p := Shared.Throughput(); p != DefaultThroughput {
		t.Fatalf("Shared.Throughput() = %d, want %d", p, DefaultThroughput)
	}
}

// deepActor answers after recursing through frames of the size of the generated grain
// dispatcher's, so a fresh goroutine's stack must grow for every message.
type deepActor struct{}

//go:noinline
func deep(n int) int {
	var pad [512]byte
	pad[n%512] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%512])
}

func (deepActor) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(int); ok {
		ctx.Respond(deep(32))
	}
}

// BenchmarkDeepActor compares the default dispatcher (a new goroutine per scheduled
// mailbox) with the pool on an actor whose message path needs ~20 KB of stack.
func BenchmarkDeepActor(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []actor.PropsOption
	}{{"dispatcher=default", nil}, {"dispatcher=pool", []actor.PropsOption{Props()}}} {
		b.Run(bc.name, func(b *testing.B) {
			system := actor.NewActorSystem()
			defer system.Shutdown()
			pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return deepActor{} }, bc.opts...))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := system.Root.RequestFuture(pid, 1, 5*time.Second).Result(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// callChild is a child that makes one call through RunCall.
type callChild struct {
	call   func(context.Context) any
	cancel context.CancelFunc
}

func (c *callChild) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		c.cancel = RunCall(ctx, c.call)
	case *actor.Stopping, *actor.Restarting:
		if c.cancel != nil {
			c.cancel()
		}
	}
}

// callParent spawns a callChild and records what reaches it: the child's result (a
// string) and the child's end. Like actors/agent, it queues the child's Terminated (a
// system message, which overtakes user messages) behind the child's messages.
type callParent struct {
	call   func(context.Context) any
	child  chan *actor.PID
	events chan string
	gone   bool
}

type childGone struct{}

func (p *callParent) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		p.child <- ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return &callChild{call: p.call} }))
	case string:
		p.events <- "result " + msg
	case *actor.Terminated:
		ctx.Send(ctx.Self(), childGone{})
	case childGone:
		if !p.gone {
			p.gone = true
			p.events <- "terminated"
		}
	}
}

func startCall(t *testing.T, call func(context.Context) any) (*actor.ActorSystem, *actor.PID, chan string) {
	t.Helper()
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	p := &callParent{call: call, child: make(chan *actor.PID, 1), events: make(chan string, 4)}
	system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
	return system, <-p.child, p.events
}

func next(t *testing.T, events chan string) string {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("nothing reached the parent")
		return ""
	}
}

// RunCall sends the call's result to the parent and then stops the child.
func TestRunCallReportsToTheParentThenStops(t *testing.T) {
	_, _, events := startCall(t, func(context.Context) any { return "done" })
	if e := next(t, events); e != "result done" {
		t.Fatalf("first the parent saw %q; want the result", e)
	}
	if e := next(t, events); e != "terminated" {
		t.Fatalf("then the parent saw %q; want the child's end", e)
	}
}

// A child stopped during its call cancels the call's context, and what the call returns
// then is not sent.
func TestRunCallStoppedReportsNothing(t *testing.T) {
	started := make(chan struct{})
	system, child, events := startCall(t, func(ctx context.Context) any {
		close(started)
		<-ctx.Done()
		return "made after the stop"
	})
	<-started
	system.Root.Stop(child)
	if e := next(t, events); e != "terminated" {
		t.Fatalf("the parent saw %q; want only the child's end", e)
	}
	select {
	case e := <-events:
		t.Fatalf("after the child's end the parent saw %q", e)
	case <-time.After(200 * time.Millisecond):
	}
}
