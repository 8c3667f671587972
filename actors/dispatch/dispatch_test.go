package dispatch

import (
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

// Run never blocks its caller, even when every call it started blocks, and runs each
// call once.
func TestRunNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	ran := make(chan int, 8)
	for i := range 8 {
		Run(func() {
			<-release
			ran <- i
		})
	}
	close(release)
	seen := map[int]bool{}
	for range 8 {
		select {
		case i := <-ran:
			if seen[i] {
				t.Fatalf("call %d ran twice", i)
			}
			seen[i] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("ran %v of 8 calls", seen)
		}
	}
}

// Run's calls never take a worker of Shared, whose stack a mailbox grew: a call waits on
// the network with the stack of the worker it runs on (see the package comment).
func TestRunKeepsOffTheMailboxWorkers(t *testing.T) {
	// A worker of Shared, idle once its mailbox turn is done.
	done := make(chan struct{})
	Shared.Schedule(func() { close(done) })
	<-done
	waitFor(t, func() bool { return Shared.waiting.Load() > 0 }, "a worker of Shared to wait for work")
	idle := Shared.waiting.Load()

	// While the call runs, Shared's idle workers are all still idle (a worker uncounts
	// itself before it runs what it took).
	during := make(chan int32, 1)
	Run(func() { during <- Shared.waiting.Load() })
	if got := <-during; got != idle {
		t.Fatalf("Shared's idle workers went from %d to %d while a call ran: the call took one", idle, got)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
