package session

import (
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// Cancel ends the session at once: it records session_cancelled and stops the step
// runner, the tool runners (a sandboxed execution is cancelled with its context) and the
// sub-agents. Idempotent by command id; a session that has ended is refused.
func (g *Grain) Cancel(req *messages.CancelRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "Cancel")
	resp, err := g.command(ctx, req.GetCommandId(), func() ([]*messages.Event, error) { return core.DecideCancel(g.state, req, g.deps.Now()) })
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
