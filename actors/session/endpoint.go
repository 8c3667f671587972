package session

import (
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/fathom-agents/fathom/auth"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// endpointRefusal is endpointChanged for the grain's session on this node.
func (g *Grain) endpointRefusal() error {
	if g.state.GetSeq() == 0 || core.Terminal(g.state) {
		return nil
	}
	return core.EndpointChanged(g.id, g.state.GetConfig(), g.deps.Config.Endpoint, g.deps.Config.AllowEndpointChange)
}

// endpointBlocked reports whether this node must not make the session's LLM calls (its
// endpoint differs from the recorded one and no override is set); it logs why once per
// activation. An allowed change is logged once too.
func (g *Grain) endpointBlocked() bool {
	if g.state.GetSeq() == 0 || core.Terminal(g.state) {
		return false
	}
	rec := core.RecordedEndpoint(g.state.GetConfig())
	if err := g.endpointRefusal(); err != nil {
		if !g.endpointLogged {
			g.endpointLogged = true
			g.log.Error("session not continued on this node: its model endpoint differs", "recorded", rec.String(), "node", g.deps.Config.Endpoint.String(), "error", err)
		}
		return true
	}
	if !g.endpointLogged && g.deps.Config.AllowEndpointChange && rec.Provider != "" && g.deps.Config.Endpoint.Provider != "" &&
		rec.Normalised() != g.deps.Config.Endpoint.Normalised() {
		g.endpointLogged = true
		g.log.Warn("continuing the session on another model endpoint (--allow-endpoint-change)", "recorded", rec.String(), "node", g.deps.Config.Endpoint.String())
	}
	return false
}

// continuing runs a command that continues the session (its next LLM calls follow) as
// command does, after refusing it on a node configured for another endpoint or lacking
// an agent or tool the session's running sub-agents need (core.MissingOnNode).
func (g *Grain) continuing(ctx cluster.GrainContext, req commandRequest, decide func() ([]*messages.Event, error)) (*messages.CommandResponse, error) {
	if g.ready(ctx) == nil && g.authorize(req.GetCaller(), auth.Act) == nil {
		err := g.endpointRefusal()
		if err == nil {
			err = core.MissingOnNode(g.state, g.deps.Config)
		}
		if err != nil {
			g.updateIdle(ctx)
			return nil, grainError(err)
		}
	}
	return g.command(ctx, req, decide)
}
