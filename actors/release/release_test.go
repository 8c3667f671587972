package release_test

import (
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/release"
)

// payload stands for a session's state or history captured by a producer.
type payload struct{ buf [1 << 16]byte }

// child counts its messages into the payload it was made with, and releases its
// handle when it stops, as Fathom's actors do.
type child struct {
	p   *payload
	rel *release.Handle
}

func (c *child) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case string:
		c.p.buf[0]++
		ctx.Respond(int(c.p.buf[0]))
	case *actor.Stopped:
		c.p = nil // what the actor itself held: Fathom's actors drop it too
		c.rel.Release()
	}
}

// parent spawns one child from the props it is given, and stays alive afterwards.
type parent struct {
	props *actor.Props
	gone  chan struct{}
}

func (p *parent) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case string:
		ctx.Respond(ctx.Spawn(p.props))
	case *actor.Terminated:
		close(p.gone)
	}
}

// captured returns a producer that captured a new payload, and a weak pointer to it.
func captured() (weak.Pointer[payload], func(*release.Handle) actor.Actor) {
	p := &payload{}
	return weak.Make(p), func(h *release.Handle) actor.Actor { return &child{p: p, rel: h} }
}

// stoppedChildKeeps spawns a child whose producer captured a payload, talks to it, stops
// it, and reports whether the payload is still reachable after the child is gone while
// its parent lives on.
func stoppedChildKeeps(t *testing.T, props func(func(*release.Handle) actor.Actor) *actor.Props) bool {
	t.Helper()
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	w, made := captured()
	par := &parent{props: props(made), gone: make(chan struct{})}
	ppid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return par }))
	res, err := sys.Root.RequestFuture(ppid, "spawn", 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	cpid := res.(*actor.PID)
	if n, err := sys.Root.RequestFuture(cpid, "count", 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("child answered %v, %v; want 1", n, err)
	}
	if err := sys.Root.StopFuture(cpid).Wait(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-par.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the parent never saw its child terminate")
	}
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		runtime.GC()
		if w.Value() == nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(par)
	return true
}

// TestStoppedActorReleasesWhatItsProducerCaptured: once the actor has stopped, nothing it
// was made from stays reachable through Proto.Actor's stale references to it (the
// parent's set of children keeps the removed PID, which caches the child's context and
// props, until its slot is reused). The control case shows that plain props keep it.
func TestStoppedActorReleasesWhatItsProducerCaptured(t *testing.T) {
	if stoppedChildKeeps(t, func(f func(*release.Handle) actor.Actor) *actor.Props { return release.Props(f) }) {
		t.Fatal("a stopped actor made by release.Props still holds what its producer captured")
	}
	plain := func(f func(*release.Handle) actor.Actor) *actor.Props {
		return actor.PropsFromProducer(func() actor.Actor { return f(nil) })
	}
	if !stoppedChildKeeps(t, plain) {
		t.Skip("control: Proto.Actor no longer keeps stopped children reachable; release.Props is no longer needed")
	}
}

// restarter panics on "boom", counts its starts into the payload, and releases its
// handle at its final stop only.
type restarter struct {
	p   *payload
	rel *release.Handle
}

func (r *restarter) Receive(ctx actor.Context) {
	switch ctx.Message() {
	case "boom":
		panic("boom")
	case "count":
		ctx.Respond(int(r.p.buf[1]))
	}
	switch ctx.Message().(type) {
	case *actor.Started:
		r.p.buf[1]++
	case *actor.Stopped:
		r.rel.Release()
	}
}

// TestRestartProducesAgain: a crashed actor is made again from the same producer, which
// still has what it captured (only the final stop lets go of it).
func TestRestartProducesAgain(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	p := &payload{}
	pid := sys.Root.Spawn(release.Props(func(h *release.Handle) actor.Actor { return &restarter{p: p, rel: h} }))
	sys.Root.Send(pid, "boom")
	for deadline := time.Now().Add(5 * time.Second); ; {
		n, err := sys.Root.RequestFuture(pid, "count", 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("started %v times; want 2 (the first start and the restart)", n)
		}
	}
}
