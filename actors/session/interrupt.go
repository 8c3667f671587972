package session

import (
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/fathom-agents/fathom/auth"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// SetBreakpoint adds a breakpoint. Idempotent by command id.
func (g *Grain) SetBreakpoint(req *messages.SetBreakpointRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "SetBreakpoint")
	return g.command(ctx, req, false)
}

// ClearBreakpoints removes every breakpoint. Idempotent by command id.
func (g *Grain) ClearBreakpoints(req *messages.ClearBreakpointsRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "ClearBreakpoints")
	return g.command(ctx, req, false)
}

// Pause stops the session at its next step boundary. Idempotent by command id.
func (g *Grain) Pause(req *messages.PauseRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "Pause")
	return g.command(ctx, req, false)
}

// Resume ends the current interrupt. Idempotent by command id.
func (g *Grain) Resume(req *messages.ResumeRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "Resume")
	return g.command(ctx, req, true)
}

// command runs a session command req through the commit path: readiness, the caller's
// right to act, the duplicate check by command id, the decision on req (core.Decide),
// commit, then whatever became due. A command that continues the session (its next LLM calls follow: continues) is
// first refused on a node configured for another endpoint or lacking an agent or tool
// the session's running sub-agents need (core.MissingOnNode).
func (g *Grain) command(ctx cluster.GrainContext, req commandRequest, continues bool) (*messages.CommandResponse, error) {
	defer g.updateIdle(ctx)
	if err := g.ready(ctx); err != nil {
		return nil, err
	}
	if err := authorize(g.deps, g.state, g.id, req.GetCaller(), auth.Act); err != nil {
		return nil, err
	}
	if continues {
		err := endpointRefusal(g.deps, g.id, g.state)
		if err == nil {
			err = core.MissingOnNode(g.state, g.deps.Config.Core)
		}
		if err != nil {
			return nil, grainError(err)
		}
	}
	cmdID := req.GetCommandId()
	if seq, ok := g.state.GetCommands()[cmdID]; ok && cmdID != "" {
		return &messages.CommandResponse{Seq: seq, Duplicate: true}, nil
	}
	evs, next, err := core.Decide(g.state, req, g.deps.Config.Core, g.deps.Now())
	if err != nil {
		return nil, grainError(err)
	}
	if len(evs) > 0 {
		if err := g.commit(ctx, evs, next); err != nil {
			return nil, err
		}
	}
	g.kick(ctx)
	return &messages.CommandResponse{Seq: g.state.GetSeq()}, nil
}
