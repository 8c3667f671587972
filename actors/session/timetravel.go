package session

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
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

// Timeline returns the session's steps with their place in the event stream. It is
// served from the in-memory state.
func (g *Grain) Timeline(_ *messages.TimelineRequest, ctx cluster.GrainContext) (*messages.TimelineResponse, error) {
	defer g.guard(ctx, "Timeline")
	defer g.updateIdle(ctx)
	if err := g.ready(ctx); err != nil {
		return nil, err
	}
	if g.state.GetSeq() == 0 {
		return nil, messages.ErrNotFound("session %q not found", g.id)
	}
	return TimelineOf(g.state), nil
}

// StateAt returns the state after a step. It reads the journal (bounded by
// JournalTimeout): time travel is an operator's action, rare next to the loop's
// commands, and one snapshot plus at most SnapshotEvery events is a short read.
func (g *Grain) StateAt(req *messages.StateAtRequest, ctx cluster.GrainContext) (*messages.StateAtResponse, error) {
	defer g.guard(ctx, "StateAt")
	defer g.updateIdle(ctx)
	if err := g.ready(ctx); err != nil {
		return nil, err
	}
	if g.state.GetSeq() == 0 {
		return nil, messages.ErrNotFound("session %q not found", g.id)
	}
	seq, err := StepEndSeq(g.state, req.GetStepIndex())
	if err != nil {
		return nil, messages.ErrFailedPrecondition("session %s: %v", g.id, err)
	}
	jctx, cancel := context.WithTimeout(context.Background(), g.deps.Config.JournalTimeout)
	defer cancel()
	s, _, err := Load(jctx, g.deps.Journal, g.id, seq)
	if err != nil {
		return nil, messages.ErrUnavailable("session %s: state at step %d: %v", g.id, req.GetStepIndex(), err)
	}
	return &messages.StateAtResponse{State: s, Seq: s.GetSeq(), StepIndex: req.GetStepIndex()}, nil
}

// TimelineOf builds the timeline of s.
func TimelineOf(s *messages.SessionState) *messages.TimelineResponse {
	out := &messages.TimelineResponse{SessionId: s.GetSessionId(), Seq: s.GetSeq(), PlanSeq: s.GetPlanSeq(), Status: s.GetStatus()}
	for i, st := range s.GetSteps() {
		out.Entries = append(out.Entries, &messages.TimelineEntry{
			StepIndex: uint32(i + 1), StepId: st.GetStep().GetId(), StepType: st.GetStep().GetType(),
			Description: st.GetStep().GetDescription(), Status: st.GetStatus(), Attempt: st.GetAttempt(),
			StartedSeq: st.GetStartedSeq(), EndedSeq: st.GetEndedSeq(),
			StartedAtUnixNano: st.GetStartedAtUnixNano(), EndedAtUnixNano: st.GetEndedAtUnixNano(),
			LlmCalls: st.GetLlmCalls(), ToolCalls: st.GetToolCalls(),
		})
	}
	return out
}

// StepEndSeq returns the seq after which the session had finished its first n steps
// (n = 0: after planning; n counts the steps of s's current list). It fails when that
// point has not been reached yet.
func StepEndSeq(s *messages.SessionState, n uint32) (uint64, error) {
	if n == 0 {
		if s.GetPlanSeq() == 0 {
			return 0, fmt.Errorf("no plan yet: step index 0 is the state after planning")
		}
		return s.GetPlanSeq(), nil
	}
	steps := s.GetSteps()
	if int(n) > len(steps) {
		return 0, fmt.Errorf("step index %d is past the plan's %d steps", n, len(steps))
	}
	st := steps[n-1]
	if st.GetEndedSeq() == 0 {
		return 0, fmt.Errorf("step %d (%s) has not ended yet", n, st.GetStep().GetId())
	}
	return st.GetEndedSeq(), nil
}

// StateAtStep folds the journal of session id into its state after its first n steps
// (the same answer as the grain's StateAt, for tools that read a journal directly).
func StateAtStep(ctx context.Context, j persistence.Journal, id string, n uint32) (*messages.SessionState, error) {
	cur, _, err := Load(ctx, j, id, 0)
	if err != nil {
		return nil, err
	}
	if cur.GetSeq() == 0 {
		return nil, fmt.Errorf("session %q not found", id)
	}
	seq, err := StepEndSeq(cur, n)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	s, _, err := Load(ctx, j, id, seq)
	return s, err
}
