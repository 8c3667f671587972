package core

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/messages"
)

// replanning returns a session waiting for the answer of re-plan call replan-1: step f
// (a researcher's, index 0) failed for good; a (the orchestrator's own) completed; r is
// running in sub-agent coder-1 (index 2); p and q are pending (p after f and r, q after
// r).
func replanning() *messages.SessionState {
	step := func(id, typ string, status messages.StepStatus, started, ended uint64, deps ...string) *messages.StepState {
		st := &messages.StepState{
			Step:   &messages.PlanStep{Id: id, Type: typ, Description: "do " + id, Dependencies: deps},
			Status: status, StartedSeq: started, EndedSeq: ended,
		}
		if started > 0 {
			st.Attempt = 1
		}
		return st
	}
	s := NewState("s1")
	s.Seq, s.Status, s.Goal, s.PlanId, s.PlanSeq = 20, messages.SessionStatus_SESSION_STATUS_EXECUTING, "g", "plan-1", 2
	s.Config = &messages.SessionConfig{Model: "m", MaxIterations: 20, MaxSteps: 10}
	s.Steps = []*messages.StepState{
		step("f", "research", messages.StepStatus_STEP_STATUS_FAILED, 5, 18),
		step("a", "custom", messages.StepStatus_STEP_STATUS_COMPLETED, 3, 4),
		step("r", "code", messages.StepStatus_STEP_STATUS_IN_PROGRESS, 8, 0),
		step("p", "write", messages.StepStatus_STEP_STATUS_PENDING, 0, 0, "f", "r"),
		step("q", "review", messages.StepStatus_STEP_STATUS_PENDING, 0, 0, "r"),
	}
	s.Steps[0].Error = "sub-agent researcher-1: failed: no sources (attempt 1 of 1)"
	s.Steps[1].Output = "a's output"
	s.CurrentStepIndex = 1
	s.SubAgents = map[string]*messages.SubagentState{
		"researcher-1": {Id: "researcher-1", AgentType: "researcher", StepId: "f", StepIndex: 0, Runs: 1, RunStartedSeq: 6,
			Result: &messages.SubagentResult{Status: "failed", Summary: "no sources", Blockers: []string{"paywall"}}},
		"coder-1": {Id: "coder-1", AgentType: "coder", StepId: "r", StepIndex: 2, Running: true, Runs: 1, RunStartedSeq: 9, LlmCalls: 1, Iterations: 1,
			MaxIterations: 10, Pending: &messages.PendingCall{CallId: "coder-1/llm-1", StepId: "r", Purpose: purposeSubAgent, RequestedSeq: 10}},
	}
	s.Pending = &messages.PendingCall{CallId: "replan-1", StepId: "f", Purpose: PurposeReplan, RequestedSeq: 20}
	s.Iterations, s.Replans, s.ReplanCalls, s.ReplanAttempt = 3, 1, 1, 1
	return s
}

func stepIDs(s *messages.SessionState) string {
	var ids []string
	for _, st := range s.GetSteps() {
		ids = append(ids, st.GetStep().GetId())
	}
	return strings.Join(ids, ",")
}

func revised(seq uint64, failed string, replaced []string, steps ...*messages.PlanStep) *messages.Event {
	return &messages.Event{Seq: seq, SessionId: "s1", Payload: &messages.Event_PlanRevised{PlanRevised: &messages.PlanRevised{
		PlanId: "plan-2", Revision: 1, FailedStepId: failed, ReplacedStepIds: replaced, Steps: steps,
	}}}
}

// TestApplyPlanRevised: the failed step and the pending ones leave the plan, the
// completed and running ones stay in their order, the new ones are appended, and every
// index naming a kept step moves with it. Revisions that would drop finished or
// running work, or reuse a taken id, are refused and change nothing.
func TestApplyPlanRevised(t *testing.T) {
	s := replanning()
	s.Pending = nil // its llm_responded came first
	s.Interrupt = &messages.InterruptTriggered{BreakpointId: "bp", Position: positionAfter, StepId: "a", StepIndex: 1}
	it := s.Interrupt
	n1 := &messages.PlanStep{Id: "n1", Type: "research", Description: "try the archive", Dependencies: []string{"a"}}
	n2 := &messages.PlanStep{Id: "p", Type: "write", Description: "write it", Dependencies: []string{"n1", "r"}}
	if err := Apply(s, revised(21, "f", []string{"f", "p", "q"}, n1, n2)); err != nil {
		t.Fatal(err)
	}
	if got := stepIDs(s); got != "a,r,n1,p" {
		t.Fatalf("steps %s, want a,r,n1,p", got)
	}
	if st := s.GetSteps()[3]; st.GetStatus() != messages.StepStatus_STEP_STATUS_PENDING || st.GetStep().GetDescription() != "write it" {
		t.Fatalf("new step p (a dropped pending id reused) is %v", st)
	}
	if s.GetCurrentStepIndex() != 0 || s.GetSubAgents()["coder-1"].GetStepIndex() != 1 || s.GetInterrupt().GetStepIndex() != 0 || it.GetStepIndex() != 1 {
		t.Fatalf("indexes: current %d, coder-1 %d, interrupt %d (the event's own payload: %d)", s.GetCurrentStepIndex(),
			s.GetSubAgents()["coder-1"].GetStepIndex(), s.GetInterrupt().GetStepIndex(), it.GetStepIndex())
	}
	if s.GetPlanId() != "plan-2" || s.GetPlanRevision() != 1 || s.GetReplanAttempt() != 0 || strings.Join(s.GetRetiredStepIds(), ",") != "f" {
		t.Fatalf("plan %s revision %d, re-plan attempt %d, retired %v", s.GetPlanId(), s.GetPlanRevision(), s.GetReplanAttempt(), s.GetRetiredStepIds())
	}
	// The running sub-agent's step keeps working at its new index.
	done := &messages.Event{Seq: 22, SessionId: "s1", Payload: &messages.Event_StepCompleted{StepCompleted: &messages.StepCompleted{StepId: "r", StepIndex: 1, Output: "ok"}}}
	if err := Apply(s, done); err != nil {
		t.Fatal(err)
	}

	for name, ev := range map[string]*messages.Event{
		"drops a completed step": revised(21, "f", []string{"f", "a"}, n1),
		"drops a running step":   revised(21, "f", []string{"f", "r"}, n1),
		"keeps its failed step":  revised(21, "f", []string{"p"}, n1),
		"reuses a kept id":       revised(21, "f", []string{"f"}, &messages.PlanStep{Id: "a", Description: "again"}),
		"reuses the failed id":   revised(21, "f", []string{"f"}, &messages.PlanStep{Id: "f", Description: "again"}),
		"an unknown step":        revised(21, "f", []string{"f", "zz"}, n1),
	} {
		s := replanning()
		s.Pending = nil
		before := proto.Clone(s)
		if err := Apply(s, ev); !errors.Is(err, ErrBadEvent) {
			t.Fatalf("%s: err = %v, want ErrBadEvent", name, err)
		}
		if !proto.Equal(s, before) {
			t.Fatalf("%s: a refused event changed the state", name)
		}
	}
}

// TestDecideReplanAnswer: the re-planner's answer becomes plan_revised (the failed step
// and the pending ones replaced; a dependency on a kept step accepted) and what the new
// plan allows starts; an unusable answer fails the session, naming why.
func TestDecideReplanAnswer(t *testing.T) {
	s := replanning()
	cfg := DefaultConfig()
	answer := `{"steps":[{"id":"n1","type":"research","description":"try the archive","dependencies":["a"]},` +
		`{"id":"n2","type":"write","description":"write it","dependencies":["n1","r"]}]}`
	evs := DecideLLMResult(s, &LLMResult{CallID: "replan-1", Content: answer}, cfg, t0)
	if got := types(evs); got != "llm_responded,plan_revised,step_started,subagent_started,llm_requested" {
		t.Fatalf("events %s", got)
	}
	r := evs[1].GetPlanRevised()
	if r.GetPlanId() != "plan-2" || r.GetRevision() != 1 || r.GetFailedStepId() != "f" || strings.Join(r.GetReplacedStepIds(), ",") != "f,p,q" ||
		!strings.Contains(r.GetReason(), "no sources") || len(r.GetSteps()) != 2 {
		t.Fatalf("plan_revised %v", r)
	}
	if st := evs[2].GetStepStarted(); st.GetStepId() != "n1" || st.GetStepIndex() != 2 {
		t.Fatalf("started %v, want n1 at index 2", st)
	}
	if sa := evs[3].GetSubagentStarted(); sa.GetSubAgentId() != "researcher-2" || sa.GetResumed() {
		t.Fatalf("sub-agent %v: the new step runs in a new sub-agent", sa)
	}
	fold(t, s, evs)
	if got := stepIDs(s); got != "a,r,n1,n2" {
		t.Fatalf("steps %s", got)
	}
	// The running sub-agent hands off at its new index; n2 still waits for n1.
	evs = DecideLLMResult(s, &LLMResult{CallID: "coder-1/llm-1", Content: `{"status":"completed","summary":"coded"}`}, cfg, t0)
	if got := types(evs); got != "llm_responded,subagent_completed,step_completed" || evs[2].GetStepCompleted().GetStepIndex() != 1 {
		t.Fatalf("events %s: %v", got, evs)
	}
	fold(t, s, evs)

	for answer, want := range map[string]string{
		"I cannot plan this.": "re-planner returned an unusable plan: no JSON object",
		`{"steps":[]}`:        "re-planner returned an unusable plan: plan has no steps",
		`{"steps":[{"id":"a","type":"research","description":"x"}]}`:                        `step id "a" is taken: it names a kept step (completed)`,
		`{"steps":[{"id":"r","type":"research","description":"x"}]}`:                        `step id "r" is taken: it names a kept step (in_progress)`,
		`{"steps":[{"id":"f","type":"research","description":"x"}]}`:                        `step id "f" is taken: it names the failed step`,
		`{"steps":[{"id":"n","type":"research","description":"x","dependencies":["f"]}]}`:   `step n depends on "f", the failed step`,
		`{"steps":[{"id":"n","type":"research","description":"x","dependencies":["p"]}]}`:   `step n depends on unknown step "p"`,
		`{"steps":[{"id":"n","type":"research","description":"x","dependencies":["zzz"]}]}`: `unknown step "zzz"`,
	} {
		s := replanning()
		// Asked again once with the error, then the session fails.
		evs := DecideLLMResult(s, &LLMResult{CallID: "replan-1", Content: answer}, cfg, t0)
		if got := types(evs); got != "llm_responded,plan_failed,llm_requested" || !strings.Contains(evs[2].GetLlmRequested().GetRepromptError(), strings.TrimPrefix(want, "re-planner returned an unusable plan: ")) ||
			evs[2].GetLlmRequested().GetCallId() != "replan-2" || evs[2].GetLlmRequested().GetStepId() != "f" {
			t.Fatalf("answer %s: %s %v, want a re-prompt with %q", answer, got, evs, want)
		}
		fold(t, s, evs)
		evs = DecideLLMResult(s, &LLMResult{CallID: "replan-2", Content: answer}, cfg, t0)
		if got := types(evs); got != "llm_responded,session_failed" || !strings.Contains(evs[1].GetSessionFailed().GetError(), want) {
			t.Fatalf("answer %s again: %s %v, want session_failed with %q", answer, got, evs, want)
		}
		fold(t, s, evs)
	}

	// max_steps counts the kept steps: two are kept, so one new step fits in 3.
	s = replanning()
	s.Config.MaxSteps = 3
	evs = DecideLLMResult(s, &LLMResult{CallID: "replan-1", Content: answer}, cfg, t0)
	if r := evs[len(evs)-1].GetLlmRequested(); !strings.Contains(r.GetRepromptError(), "plan has 2 new steps and 2 kept ones, more than max_steps 3") {
		t.Fatalf("too many steps: %s %v", types(evs), r)
	}
	// Ids the model left out are filled with ones no step uses.
	s = replanning()
	s.Steps[1].Step.Id = "step-1"
	evs = DecideLLMResult(s, &LLMResult{CallID: "replan-1", Content: `{"steps":[{"type":"research","description":"x"}]}`}, cfg, t0)
	if r := evs[1].GetPlanRevised(); r.GetSteps()[0].GetId() != "step-2" {
		t.Fatalf("filled id: %s %v", types(evs), r)
	}
}

// TestDecideReplanAfterFailure: a sub-agent's failed hand-off with its attempts used up
// re-plans while re-plans are left (subagent_completed{replan}, step_failed, the
// re-plan call), asking with the failed hand-off; past the limit, or without an LLM call
// left, the session fails and says why. While the re-plan is in flight nothing starts.
func TestDecideReplanAfterFailure(t *testing.T) {
	plan := `{"steps":[{"id":"f","type":"research","description":"find it","dependencies":[]},` +
		`{"id":"r","type":"code","description":"code it","dependencies":[]},` +
		`{"id":"q","type":"review","description":"check it","dependencies":["r"]},` +
		`{"id":"w","type":"write","description":"write it","dependencies":["f","r"]}]}`
	failedAnswer := &LLMResult{CallID: "researcher-1/llm-1", Content: `{"status":"failed","summary":"no sources","blockers":["paywall"],"recommendations":["try an archive"]}`}
	cfg := DefaultConfig()
	cfg.StepAttempts = 1

	s := planned(t, &messages.SessionConfig{MaxIterations: 10}, plan)
	evs := DecideLLMResult(s, failedAnswer, cfg, t0)
	if got := types(evs); got != "llm_responded,subagent_completed,step_failed,llm_requested" {
		t.Fatalf("events %s", got)
	}
	if a := evs[1].GetSubagentCompleted().GetAction(); a != "replan" {
		t.Fatalf("action %s", a)
	}
	if f := evs[2].GetStepFailed(); f.GetRetryable() || f.GetStepId() != "f" {
		t.Fatalf("step_failed %v", f)
	}
	if r := evs[3].GetLlmRequested(); r.GetCallId() != "replan-1" || r.GetPurpose() != "replan" || r.GetStepId() != "f" || r.GetIteration() != 2 {
		t.Fatalf("re-plan call %v", r)
	}
	fold(t, s, evs)
	if s.GetReplans() != 1 || s.GetReplanAttempt() != 1 || s.GetIterations() != 2 {
		t.Fatalf("replans %d, attempt %d, iterations %d", s.GetReplans(), s.GetReplanAttempt(), s.GetIterations())
	}
	req, err := BuildRequest(s, mustPrompts(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	sys, user := req.Messages[0].Content, req.Messages[1].Content
	for _, want := range []string{"FATHOM-ROLE: orchestrator\nFATHOM-PHASE: replan\n", "never plan more than 9 new steps"} {
		if !strings.Contains(strings.ToLower(sys), strings.ToLower(want)) {
			t.Fatalf("system prompt lacks %q:\n%s", want, sys)
		}
	}
	for _, want := range []string{"Goal: g", "Failed step", "- f (research): find it", "no sources", "Blockers: paywall", "Recommendations: try an archive",
		"Steps still running", "- r (code): code it", "Pending steps", "- q (review): check it [depends on r]", "- w (write): write it [depends on f, r]",
		"Ids a new step may not use: f, r", "it replaces: f, q, w"} {
		if !strings.Contains(user, want) {
			t.Fatalf("re-plan brief lacks %q:\n%s", want, user)
		}
	}
	// r completes while the re-plan is in flight: q is ready, but nothing starts.
	evs = DecideLLMResult(s, &LLMResult{CallID: "coder-1/llm-1", Content: `{"status":"completed","summary":"coded"}`}, cfg, t0)
	if got := types(evs); got != "llm_responded,subagent_completed,step_completed" {
		t.Fatalf("events while re-planning %s", got)
	}
	fold(t, s, evs)
	// A retryable failure of the re-plan call is retried like the planner's.
	cfg.StepAttempts = 2
	evs = DecideLLMResult(s, &LLMResult{CallID: "replan-1", Err: errors.New("503"), Retryable: true}, cfg, t0)
	if got := types(evs); got != "plan_failed" || evs[0].GetPlanFailed().GetRetryAtUnixNano() == 0 {
		t.Fatalf("failed re-plan call: %s %v", got, evs)
	}
	fold(t, s, evs)
	evs = DecideRetry(s, cfg, t0.Add(cfg.StepRetryDelay))
	if got := types(evs); got != "llm_requested" || evs[0].GetLlmRequested().GetCallId() != "replan-2" {
		t.Fatalf("retry: %s %v", got, evs)
	}
	fold(t, s, evs)
	evs = DecideLLMResult(s, &LLMResult{CallID: "replan-2", Err: errors.New("503"), Retryable: true}, cfg, t0)
	if got := types(evs); got != "plan_failed,session_failed" ||
		evs[1].GetSessionFailed().GetError() != "re-plan after step f failed: llm call replan-2 failed: 503 (attempt 2 of 2)" {
		t.Fatalf("last failure: %s %v", got, evs)
	}

	// No re-plan left: the session fails and says so.
	cfg = DefaultConfig()
	cfg.StepAttempts, cfg.MaxReplans = 1, 0
	s = planned(t, &messages.SessionConfig{MaxIterations: 10}, plan)
	evs = DecideLLMResult(s, failedAnswer, cfg, t0)
	if got := types(evs); got != "llm_responded,subagent_completed,step_failed,session_failed" || evs[1].GetSubagentCompleted().GetAction() != "fail" {
		t.Fatalf("re-planning disabled: %s", got)
	}
	cfg.MaxReplans = 1
	s = planned(t, &messages.SessionConfig{MaxIterations: 10}, plan)
	s.Replans = 1
	evs = DecideLLMResult(s, failedAnswer, cfg, t0)
	if f := evs[len(evs)-1].GetSessionFailed(); !strings.Contains(f.GetError(), "step f: sub-agent researcher-1: failed: no sources (attempt 1 of 1); no re-plan is left (max_replans 1, 1 made)") {
		t.Fatalf("limit reached: %s %v", types(evs), f)
	}
	// No LLM call left for the re-planner.
	s = planned(t, &messages.SessionConfig{MaxIterations: 1}, plan)
	evs = DecideLLMResult(s, failedAnswer, cfg, t0)
	if f := evs[len(evs)-1].GetSessionFailed(); types(evs) != "llm_responded,subagent_completed,step_failed,session_failed" ||
		!strings.Contains(f.GetError(), "step f failed (sub-agent researcher-1: failed: no sources (attempt 1 of 1)) and cannot be re-planned: no LLM call is left for the re-planner (max_iterations 1)") {
		t.Fatalf("no iteration left: %s %v", types(evs), f)
	}
}

// TestForkContinuesTheStepThatEndedAtTheForkPoint: a fork's step index names the
// source's current list, where a revision may have moved the step; the fork goes on
// after the step that ended at the fork point, wherever it sits in the fork's list.
func TestForkContinuesTheStepThatEndedAtTheForkPoint(t *testing.T) {
	s := replanning()
	s.Pending, s.ReplanAttempt, s.ReplanCalls = nil, 0, 0
	s.ForkedFrom = &messages.SessionForked{SourceSessionId: "src", SourceSeq: 4, StepIndex: 1} // a ended at seq 4, at index 1 here
	evs := decideForkContinue(s, 1, DefaultConfig(), t0)
	if got := types(evs); got != "llm_requested" || evs[0].GetLlmRequested().GetPurpose() != PurposeReplan {
		t.Fatalf("events %s %v: after a, the failed step f waits for its re-plan (it must not run again)", got, evs)
	}
}
