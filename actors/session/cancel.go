package session

import (
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/messages"
)

// maxCancelText bounds the reason and by of a cancel request.
const maxCancelText = 1024

// Cancel ends the session at once: it records session_cancelled and stops the step
// runner, the tool runners (a sandboxed execution is cancelled with its context) and the
// sub-agents. Idempotent by command id; a session that has ended is refused.
func (g *Grain) Cancel(req *messages.CancelRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "Cancel")
	resp, err := g.command(ctx, req.GetCommandId(), func() ([]*messages.Event, error) { return decideCancel(g.state, req, g.deps.Now()) })
	if err != nil || resp.GetDuplicate() {
		return resp, err
	}
	g.stopWork(ctx)
	return resp, nil
}

// stopWork stops the children that make calls for a session that has ended: the step
// runner and the tool runners (stopping one cancels its call). Sub-agent actors are
// stopped by kick once the state is terminal.
func (g *Grain) stopWork(ctx cluster.GrainContext) {
	if g.runner != nil {
		ctx.Stop(g.runner)
		g.runner, g.runnerCall = nil, ""
		if g.watchdog != nil {
			g.watchdog.Stop()
		}
	}
	for key, pid := range g.tools {
		ctx.Stop(pid)
		delete(g.tools, key)
	}
	g.stopTimers()
}

// decideCancel records session_cancelled for a session that has not ended.
func decideCancel(s *messages.SessionState, req *messages.CancelRequest, now time.Time) ([]*messages.Event, error) {
	if err := decideCommand(s, req.GetCommandId()); err != nil {
		return nil, err
	}
	if len(req.GetReason()) > maxCancelText || len(req.GetBy()) > maxCancelText {
		return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "reason and by are at most %d bytes each", maxCancelText)
	}
	b := newEvents(s, req.GetCommandId(), now)
	b.add(func(e *messages.Event) {
		e.Payload = &messages.Event_SessionCancelled{SessionCancelled: &messages.SessionCancelled{Reason: req.GetReason(), By: req.GetBy()}}
	})
	return b.evs, nil
}
