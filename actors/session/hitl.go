package session

import (
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/messages"
)

// ProvideInput answers an open human-input request (a human_input step or an
// ask_human call). A bad answer is refused with INVALID_ARGUMENT and the request keeps
// waiting. Idempotent by command id.
func (g *Grain) ProvideInput(req *messages.ProvideInputRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "ProvideInput")
	return g.command(ctx, req, true)
}
