package core

import (
	"fmt"

	"github.com/fathom-agents/fathom/messages"
)

// TimelineOf builds the timeline of s.
func TimelineOf(s *messages.SessionState) *messages.TimelineResponse {
	out := &messages.TimelineResponse{SessionId: s.GetSessionId(), Seq: s.GetSeq(), PlanSeq: s.GetPlanSeq(), Status: s.GetStatus(),
		Audit: s.GetAudit()}
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

// StepEndSeq returns the seq of the end of step number n (n = 0: after planning; n
// numbers the steps of s's current list from 1). It is not "after n steps": with
// parallel steps, step 3 may end before step 2, and its seq is then the smaller. It
// fails when step n has not ended yet.
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

// StateAtSeq returns the seq StateAt(req) folds the state through: req.seq when set (any
// event of the session, in any turn), else the end of step req.step_index of the current
// turn's plan (StepEndSeq).
func StateAtSeq(s *messages.SessionState, req *messages.StateAtRequest) (uint64, error) {
	return pointSeq(s, req.GetSeq(), req.GetStepIndex())
}

// ForkSeq returns the source seq a fork req copies through: req.seq when set, else the end
// of step req.step_index (StepEndSeq). Whether req.seq is a boundary a fork can go on
// from is checked once the fork's state is folded (DecideFork).
func ForkSeq(src *messages.SessionState, req *messages.ForkRequest) (uint64, error) {
	return pointSeq(src, req.GetSeq(), req.GetStepIndex())
}

func pointSeq(s *messages.SessionState, seq uint64, step uint32) (uint64, error) {
	if seq == 0 {
		return StepEndSeq(s, step)
	}
	if seq > s.GetSeq() {
		return 0, fmt.Errorf("seq %d is past the session's last event (seq %d)", seq, s.GetSeq())
	}
	return seq, nil
}
