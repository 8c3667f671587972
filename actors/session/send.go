package session

import (
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/messages"
)

// Send adds a follow-up message to a completed session: message_received opens the
// session's next turn and the orchestrator's call answering it starts (core.DecideSend).
// A running, failed or cancelled session is refused with FAILED_PRECONDITION, an empty
// or oversize message with INVALID_ARGUMENT, an unknown session with NOT_FOUND; a
// retried command id answers duplicate. The lease, which a completed session stops
// renewing, is renewed again (lease.Committed).
func (g *Grain) Send(req *messages.SendRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "Send")
	return g.command(ctx, req, false)
}
