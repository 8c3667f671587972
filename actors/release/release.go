// Package release makes actor props that let go of what their producer captured once the
// actor they made has stopped for good.
//
// Proto.Actor keeps a stopped actor's context reachable for a while: a parent's set of
// children keeps a removed child's PID in a slot past its length until the slot is
// reused, and that PID caches the child's process, its mailbox and its context, whose
// props hold the producer closure. A closure that captured a session's state or history
// kept them alive after the session passivated. Props made here hold the producer behind
// a pointer that is cleared when the actor stops, so a stale reference retains only
// Proto.Actor's own small structures, never the actor's data.
package release

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Props returns props whose producer calls produce for the first actor and for every
// restart, and forgets produce (and all it captured) once the actor it made has handled
// actor.Stopped. The actor made by produce receives every message as it would without
// the wrapper.
func Props(produce func() actor.Actor, opts ...actor.PropsOption) *actor.Props {
	p := &producer{}
	p.fn.Store(&produce)
	return actor.PropsFromProducer(p.produce, opts...)
}

type producer struct {
	fn atomic.Pointer[func() actor.Actor]
}

func (p *producer) produce() actor.Actor {
	fn := p.fn.Load()
	if fn == nil { // a restart after the final stop: Proto.Actor never does this
		return &stopped{}
	}
	return &actorOf{inner: (*fn)(), p: p}
}

// actorOf wraps the produced actor, clearing its producer after actor.Stopped.
type actorOf struct {
	inner actor.Actor
	p     *producer
}

// Receive implements actor.Actor.
func (a *actorOf) Receive(ctx actor.Context) {
	a.inner.Receive(ctx)
	if _, ok := ctx.Message().(*actor.Stopped); ok {
		a.p.fn.Store(nil)
		a.inner = &stopped{}
	}
}

// stopped is what is left of an actor after its final stop: it ignores everything.
type stopped struct{}

// Receive implements actor.Actor.
func (*stopped) Receive(actor.Context) {}
