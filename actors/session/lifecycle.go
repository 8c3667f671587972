package session

import (
	"github.com/fathom-agents/fathom/messages"
)

// observe reports a stored event to operators: a log line at info for each change of the
// session's lifecycle (started, completed, failed, awaiting a human), and the event to the
// node's metrics.
func (g *Grain) observe(ev *messages.Event) {
	if g.deps.observeEvent != nil {
		g.deps.observeEvent(g.state.GetTenant(), ev)
	}
	switch {
	case ev.GetSessionStarted() != nil:
		g.log.Info("session started", "seq", ev.GetSeq(), "model", g.state.GetConfig().GetModel())
	case ev.GetSessionCompleted() != nil:
		g.log.Info("session completed", "seq", ev.GetSeq(), "iterations", g.state.GetIterations())
	case ev.GetSessionFailed() != nil:
		g.log.Info("session failed", "seq", ev.GetSeq(), "error", ev.GetSessionFailed().GetError())
	case ev.GetSessionCancelled() != nil:
		c := ev.GetSessionCancelled()
		g.log.Info("session cancelled", "seq", ev.GetSeq(), "reason", c.GetReason(), "by", c.GetBy())
	case ev.GetMessageReceived() != nil:
		g.log.Info("session message received", "seq", ev.GetSeq(), "turn", ev.GetMessageReceived().GetTurn())
	case ev.GetHitlRequested() != nil:
		h := ev.GetHitlRequested()
		g.log.Info("session awaiting human", "seq", ev.GetSeq(), "request_id", h.GetRequestId(), "kind", h.GetKind(), "step_id", h.GetStepId())
	}
}
