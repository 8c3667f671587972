package session

import (
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/messages"
)

// ProvideInput answers an open human-input request. (Being built: refused until then.)
func (g *Grain) ProvideInput(req *messages.ProvideInputRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "ProvideInput")
	return nil, messages.ErrFailedPrecondition("session %s: human input is not available yet", g.id)
}

// Fork forks a session into this one. (Being built: refused until then.)
func (g *Grain) Fork(req *messages.ForkRequest, ctx cluster.GrainContext) (*messages.StartResponse, error) {
	defer g.guard(ctx, "Fork")
	return nil, messages.ErrFailedPrecondition("session %s: fork is not available yet", g.id)
}
