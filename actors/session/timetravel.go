package session

import (
	"context"
	"fmt"

	"github.com/fathom-agents/fathom/auth"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/actors/session/replay"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
)

// Time travel addresses a session's past by step: StateAt(0) is the state right after
// plan_created, StateAt(n) the state right after the event that ended the n-th step
// (its step_completed, or the step_failed of its last attempt). The state records
// where each step starts and ends in the stream (StepState.started_seq/ended_seq,
// SessionState.plan_seq), so a step index maps to a seq without reading the journal,
// and the past state is folded from the nearest snapshot plus the events through that
// seq by the same Apply the grain uses.
//
// Across a re-plan (plan_revised), step indexes refer to the step list at that point:
// n names the n-th step of the list as it is now (the kept steps, then the new ones),
// and the state returned holds the list as it was at that seq, where a kept step may
// sit at another index. Steps a revision dropped are not addressable by index; their
// events stay in the stream. StateAt(0) stays the state after the first plan.

// StateAt may instead name any event by its seq (StateAtRequest.seq): that is how an
// earlier turn of a session that took follow-up messages is addressed, since step
// indexes name the current turn's plan.

// Timeline returns the session's steps with their place in the event stream. It is
// served from the in-memory state.
func (g *Grain) Timeline(req *messages.TimelineRequest, ctx cluster.GrainContext) (*messages.TimelineResponse, error) {
	defer g.guard(ctx, "Timeline")
	defer g.updateIdle(ctx)
	if err := readable(ctx, g); err != nil {
		return nil, err
	}
	if err := authorize(g.deps, g.state, g.id, req.GetCaller(), auth.Read); err != nil {
		return nil, err
	}
	if g.state.GetSeq() == 0 {
		return nil, sessiongrain.ErrNotFound("session %q not found", g.id)
	}
	return core.TimelineOf(g.state), nil
}

// StateAt returns the state after a step. It reads the journal (bounded by
// JournalTimeout): time travel is an operator's action, rare next to the loop's
// commands, and one snapshot plus the events after it (at most about half a state's worth) is a short read.
func (g *Grain) StateAt(req *messages.StateAtRequest, ctx cluster.GrainContext) (*messages.StateAtResponse, error) {
	defer g.guard(ctx, "StateAt")
	defer g.updateIdle(ctx)
	if err := readable(ctx, g); err != nil {
		return nil, err
	}
	if err := authorize(g.deps, g.state, g.id, req.GetCaller(), auth.Read); err != nil {
		return nil, err
	}
	if g.state.GetSeq() == 0 {
		return nil, sessiongrain.ErrNotFound("session %q not found", g.id)
	}
	seq, err := core.StateAtSeq(g.state, req)
	if err != nil {
		return nil, sessiongrain.ErrFailedPrecondition("session %s: %v", g.id, err)
	}
	jctx, cancel := context.WithTimeout(context.Background(), g.deps.Config.JournalTimeout)
	defer cancel()
	s, _, err := replay.Load(jctx, g.deps.Journal, g.id, seq)
	if err != nil {
		return nil, readError(err, fmt.Sprintf("session %s: state at step %d", g.id, req.GetStepIndex()))
	}
	return &messages.StateAtResponse{State: s, Seq: s.GetSeq(), StepIndex: req.GetStepIndex()}, nil
}
