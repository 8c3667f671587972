package core

import (
	"context"
	"fmt"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

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
