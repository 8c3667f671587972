package dispatch

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A mailbox never waits for a worker: with every worker blocked, new work still runs.
func TestScheduleNeverWaitsForABusyWorker(t *testing.T) {
	p := New(time.Minute, 0)
	release := make(chan struct{})
	defer close(release)
	var blocked atomic.Int32
	for range 8 {
		p.Schedule(func() { blocked.Add(1); <-release })
	}
	waitFor(t, "8 blocked workers", func() bool { return blocked.Load() == 8 })
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
	p := New(time.Minute, 0)
	done := make(chan struct{})
	p.Schedule(func() { close(done) })
	<-done
	// The worker is now idle on p.work: a non-blocking hand-over succeeds.
	got := make(chan struct{})
	waitFor(t, "an idle worker", func() bool {
		select {
		case p.work <- func() { close(got) }:
			return true
		default:
			return false
		}
	})
	<-got
}

// Idle workers exit after the idle time: the pool leaves no goroutines behind.
func TestIdleWorkersExit(t *testing.T) {
	before := runtime.NumGoroutine()
	p := New(10*time.Millisecond, 0)
	release := make(chan struct{})
	for range 16 {
		p.Schedule(func() { <-release })
	}
	close(release)
	waitFor(t, "idle workers to exit", func() bool { return runtime.NumGoroutine() <= before })
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
