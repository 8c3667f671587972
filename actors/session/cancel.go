package session

import (
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/messages"
)

// Cancel ends the session at once: it records session_cancelled and stops the agent
// actors, the orchestrator's and the sub-agents', with their step and tool runners (a
// sandboxed execution is cancelled with its context). Idempotent by command id; a session that has ended is refused.
func (g *Grain) Cancel(req *messages.CancelRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "Cancel")
	resp, err := g.command(ctx, req, false)
	if err != nil || resp.GetDuplicate() {
		return resp, err
	}
	// What runs for a session that has ended stops: its agent actors, and with them
	// their step and tool runners (stopping one cancels its call), and its timers.
	g.agents.kick(ctx, g.state)
	g.hooks.stop()
	g.timers.stop()
	return resp, nil
}
