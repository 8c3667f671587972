// Package release makes actor props that let go of what their producer captured once the
// actor they made has stopped for good.
//
// Proto.Actor keeps a stopped actor's context reachable for a while: a parent's set of
// children keeps a removed child's PID in a slot past its length until the slot is
// reused, and that PID caches the child's process, its mailbox and its context, whose
// props hold the producer closure. A closure that captured a session's state or history
// kept them alive after the session passivated. Props made here hold the producer behind
// a Handle that the actor releases when it handles actor.Stopped, so a stale reference
// retains Proto.Actor's own small structures and the stopped actor itself, never what
// its producer captured. The actor's own type is unchanged (Proto.Actor's metrics label
// actors by it).
package release

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Handle is what an actor made by Props calls Release on at its final stop.
type Handle struct {
	produce atomic.Pointer[func() actor.Actor]
}

// Release lets go of the producer and all it captured. The actor calls it when it handles
// actor.Stopped (never on actor.Restarting: a restart makes the actor again). Calling it
// on a nil Handle does nothing, so an actor made without Props may call it too.
func (h *Handle) Release() {
	if h != nil {
		h.produce.Store(nil)
	}
}

// Props returns props whose producer calls produce, with the actor's Handle, for the
// first actor and for every restart, until the actor calls Release.
func Props(produce func(*Handle) actor.Actor, opts ...actor.PropsOption) *actor.Props {
	h := &Handle{}
	fn := func() actor.Actor { return produce(h) }
	h.produce.Store(&fn)
	return actor.PropsFromProducer(h.make, opts...)
}

func (h *Handle) make() actor.Actor {
	fn := h.produce.Load()
	if fn == nil { // made again after its final stop: Proto.Actor never does this
		return stopped{}
	}
	return (*fn)()
}

// stopped is what an actor released before it was made again would be: it ignores
// everything.
type stopped struct{}

// Receive implements actor.Actor.
func (stopped) Receive(actor.Context) {}
