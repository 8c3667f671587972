package session

import (
	"context"
	"slices"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/agent"
	"github.com/fathom-agents/fathom/messages"
)

// The drain. A member that is about to leave (fathom node drain, a graceful stop) first
// lets the calls its sessions run finish, so that none is cut and run again by the
// member that continues the session: every session grain activated on it stops starting
// calls (its agent actors get Work with Drain), the calls running report their results,
// which are committed as usual, and the grain reports itself at a boundary once none
// runs and no append is in flight. The member then hands its sessions over (its grains
// stop, releasing their leases) and another member continues each from its journal.

// drainMsg tells a grain that its member is draining. It never leaves the process.
type drainMsg struct{}

// Drain is the drain of the session grains of one member (Deps.Drain): it knows the
// grains activated on the member and which of them still run calls once the drain
// began. Its methods are safe for concurrent use.
type Drain struct {
	mu sync.Mutex
	// active are the grains activated on the member, by session id.
	active map[string]*actor.PID
	// draining is set by Begin, for good.
	draining bool
	// leaving is set by Leave, for good.
	leaving bool
	// busy are the sessions whose grain still runs a call (or appends) since Begin.
	busy map[string]bool
	// changed is closed (and replaced) when busy shrinks.
	changed chan struct{}
}

// NewDrain returns the drain of a member's session grains.
func NewDrain() *Drain {
	return &Drain{active: map[string]*actor.PID{}, busy: map[string]bool{}, changed: make(chan struct{})}
}

// register notes the activation pid of session id and reports whether the member is
// draining (the grain then starts no call). Until the grain reports, it counts as busy.
func (d *Drain) register(id string, pid *actor.PID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.active[id] = pid
	if d.draining {
		d.busy[id] = true
	}
	return d.draining
}

// unregister forgets the activation pid of session id (it stopped).
func (d *Drain) unregister(id string, pid *actor.PID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.active[id]; ok && p.Equal(pid) {
		delete(d.active, id)
		d.setBusyLocked(id, false)
	}
}

// report records whether the draining grain of session id still runs a call.
func (d *Drain) report(id string, busy bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.setBusyLocked(id, busy)
}

func (d *Drain) setBusyLocked(id string, busy bool) {
	switch {
	case busy:
		d.busy[id] = true
	case d.busy[id]:
		delete(d.busy, id)
		close(d.changed)
		d.changed = make(chan struct{})
	}
}

// Leave marks the member as leaving (its hand-over or stop begins): a grain stopped from
// now on stops at once instead of moving at a boundary (move.go), since the member's own
// drain, if any, already let its calls finish.
func (d *Drain) Leave() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.leaving = true
}

// Leaving reports whether Leave was called.
func (d *Drain) Leaving() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.leaving
}

// Draining reports whether Begin was called.
func (d *Drain) Draining() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.draining
}

// Begin starts the drain: every grain activated on the member stops starting calls and
// reports once its running calls finished; a grain activated later starts none. It
// returns how many grains were active. Calling it again only returns that count again.
func (d *Drain) Begin(root *actor.RootContext) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining {
		return len(d.active)
	}
	d.draining = true
	for id, pid := range d.active {
		d.busy[id] = true
		root.Send(pid, &drainMsg{})
	}
	return len(d.active)
}

// Wait waits until no grain of the member runs a call (nil) or ctx ends (its error).
func (d *Drain) Wait(ctx context.Context) error {
	for {
		d.mu.Lock()
		n, changed := len(d.busy), d.changed
		d.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Busy lists the sessions whose grain still runs a call, sorted.
func (d *Drain) Busy() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.busy))
	for id := range d.busy {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// drain stops the agent actors from starting calls: each answers Drained once its
// running calls finished. st is the committed state.
func (a *agents) drain(ctx cluster.GrainContext, st *messages.SessionState) {
	if a.draining {
		return
	}
	a.draining = true
	for id, pid := range a.pids {
		a.send(ctx, id, pid, a.work(st, id))
	}
}

// drained notes that agent id runs no call.
func (a *agents) drained(m *agent.Drained) {
	delete(a.drainWait, m.AgentID)
}

// send sends w to agent id's actor pid; Work with Drain is awaited (drained).
func (a *agents) send(ctx cluster.GrainContext, id string, pid *actor.PID, w *agent.Work) {
	if w.Drain {
		if a.drainWait == nil {
			a.drainWait = map[string]bool{}
		}
		a.drainWait[id] = true
	}
	ctx.Send(pid, w)
}

// running reports whether a drained actor still runs a call.
func (a *agents) running() bool { return len(a.drainWait) > 0 }
