package session

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
)

// The move. When a member joins, Proto.Actor's identity hashing (disthash) stops, on
// their old owners, the activations whose identities now hash to the newcomer: its
// placement actor sends each a PoisonPill. Stopped at once, a session grain would cut its
// running calls, and the newcomer would run them again (a tool's side effect twice). So
// the Session kind turns a PoisonPill into moveMsg (stopAtBoundary), and the grain moves
// the way a draining member does, for itself alone: it starts no call, lets the running
// ones finish and commits their results, then stops, releasing its lease, at most the
// drain timeout later. Its identity now hashes to the new owner, so the grain then asks
// its session's state once through the cluster (hand-off): that activates the session
// there at once, without waiting for a reactivator sweep.
//
// A grain stops at once, as before, when nothing of it runs, when its member leaves (the
// member's own drain already let the calls finish, or the stop is not graceful; the other
// members' reactivators continue its sessions), when it was fenced, or when drains are
// off (drain timeout 0). Passivation poisons an idle grain
// (nothing runs): it stops at once. Evicting a deleted session stops its grain with a
// Stop, which no middleware sees.

// Messages of the move. They never leave the process.
type (
	// moveMsg is a PoisonPill to a session grain (stopAtBoundary).
	moveMsg struct{}
	// moveOverdue ends a move whose calls outlast the drain timeout: the grain stops and
	// its calls run again on the new owner.
	moveOverdue struct{}
)

// stopAtBoundary is the Session kind's receiver middleware: it hands the grain a
// PoisonPill as moveMsg, so that the grain decides when it stops (see the move above).
// Every other message passes unchanged.
func stopAtBoundary(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		if _, ok := env.Message.(*actor.PoisonPill); ok {
			next(c, &actor.MessageEnvelope{Header: env.Header, Message: &moveMsg{}, Sender: env.Sender})
			return
		}
		next(c, env)
	}
}

// workDue reports whether a session in state st has work due that nothing but its
// activation would start: a call its agent actors run, a retry, a deadline, a webhook.
func workDue(a *agents, h *webhookState, st *messages.SessionState) bool {
	return a.due || h.busy() || core.DueOf(st).Waiting()
}

// move is an activation's side of its move to another member.
type move struct {
	// moving is set once the grain was told to stop while its agents ran: it drains.
	moving bool
	timer  *time.Timer
	// handOff is set when the stopping grain had work due: Terminate asks the new owner
	// to activate the session.
	handOff bool
}

// begin handles moveMsg: it reports whether the grain must stop now; otherwise it drained
// the grain's agents (the grain stops once they answered and its appends are durable,
// done) and armed the drain timeout. busy is whether the session has work due (a call,
// a retry, a deadline, a webhook).
func (m *move) begin(ctx cluster.GrainContext, g *Grain, busy bool) (stopNow bool) {
	if m.moving {
		return false
	}
	d := g.deps
	if d == nil || g.fenced || d.Config.DrainTimeout <= 0 || d.Drain == nil || d.Drain.Leaving() ||
		(len(g.agents.pids) == 0 && len(g.pipeline) == 0) {
		return true
	}
	m.moving, m.handOff = true, busy
	// Passivation poisons a grain whose agents idle, too: only a move with work due is
	// worth an Info line.
	lvl := slog.LevelDebug
	if busy {
		lvl = slog.LevelInfo
	}
	g.log.Log(context.Background(), lvl, "session activation stops: it finishes its running calls first, starting none", "timeout", d.Config.DrainTimeout)
	g.agents.drain(ctx, g.state)
	self, root := ctx.Self(), ctx.ActorSystem().Root
	m.timer = time.AfterFunc(d.Config.DrainTimeout, func() { root.Send(self, &moveOverdue{}) })
	return false
}

// done reports whether a moving grain may stop: none of its agents runs a call and no
// append is in flight.
func (m *move) done(g *Grain) bool {
	return m.moving && !g.agents.running() && len(g.pipeline) == 0
}

// end stops the drain timeout and, when the session had work due, asks the cluster for
// its state once from a goroutine bounded by the journal timeout: the new owner
// activates it and continues. The poke is a state query (idempotent, it never writes);
// one that fails leaves the session to the reactivator's sweeps.
func (m *move) end(ctx cluster.GrainContext, d *Deps, id string, st *messages.SessionState) {
	if m.timer != nil {
		m.timer.Stop()
	}
	if !m.handOff || d == nil || st.GetSeq() == 0 {
		return
	}
	c, timeout, log := ctx.Cluster(), d.Config.JournalTimeout, d.Logger
	go func() {
		if _, err := sessiongrain.GetSessionGrainClient(c, id).GetState(&messages.GetStateRequest{}, cluster.WithTimeout(timeout)); err != nil {
			log.Debug("hand the moved session to its new owner; the reactivator will", "session_id", id, "error", err)
		}
	}()
}
