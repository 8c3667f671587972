package session

import (
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// kickQueued runs the oldest follow-up message queued while a turn ran (double
// texting, core/onbusy.go) once the session is completed: its turn opens as a send's
// would. It reports whether it committed (the caller's kick is then done: this one
// kicked the new turn).
func (g *Grain) kickQueued(ctx cluster.GrainContext) bool {
	if g.state.GetStatus() != messages.SessionStatus_SESSION_STATUS_COMPLETED || len(g.state.GetQueuedMessages()) == 0 || len(g.pipeline) > 0 {
		return false
	}
	evs, err := core.DecideQueued(g.state, g.deps.Config, g.deps.Now())
	if err != nil || len(evs) == 0 {
		if err != nil {
			g.log.Warn("queued message cannot run", "error", err)
		}
		return false
	}
	if err := g.commit(ctx, evs); err != nil {
		g.log.Warn("commit failed", "input", "queued message", "error", err)
		return false
	}
	g.kick(ctx)
	return true
}
