package core

import (
	"fmt"
	"strings"

	"github.com/fathom-agents/fathom/messages"
)

// Re-planning, as decisions. When a sub-agent's step fails after its attempts are used
// up and re-plans are left (Config.MaxReplans, counted in SessionState.replans), the
// orchestrator asks the model for a new plan of the remaining work:
// subagent_completed{action: replan}, step_failed (not retryable), then
// llm_requested{purpose: replan, call_id: replan-N, step_id: the failed step}, counted
// against max_iterations. The answer is parsed like the first plan (parsePlan's rules,
// plus: new ids only, dependencies may name kept steps) and recorded as plan_revised:
// the failed step and the pending ones leave the plan, the completed and running steps
// stay (running sub-agents go on), the new steps are appended, and advance starts what
// they allow.
//
// While a re-plan is due or its call in flight, no step starts (advance, endInterrupt).
// The call is the orchestrator's own: it waits until no orchestrator step is running and
// no interrupt holds the session. A retryable failure of the call is retried like the
// planner's (plan_failed with retry_at, up to StepAttempts); an unusable answer is
// asked again once (reprompt.go); any other failure, a second unusable answer or a call
// that does not fit max_iterations fails the session. A step
// failing while another's re-plan is in flight keeps its place (failed) until that
// revision is recorded, then gets its own re-plan.

func replanCallID(n uint32) string { return fmt.Sprintf("replan-%d", n) }

// replanDue returns the step a re-plan is due for: the first sub-agent step that failed
// for good while the session goes on. A failed step is otherwise followed at once by
// its next attempt or by the session's failure, so a failed sub-agent step in a running
// session always waits for a re-plan.
func replanDue(s *messages.SessionState) (*messages.StepState, bool) {
	if Terminal(s) {
		return nil, false
	}
	for _, st := range s.GetSteps() {
		if st.GetStatus() == messages.StepStatus_STEP_STATUS_FAILED && delegated(st.GetStep()) {
			return st, true
		}
	}
	return nil, false
}

// requestReplan makes the re-plan call for step failed once the orchestrator is free:
// no call of its own in flight (the re-plan call itself included) or due, none of its
// own steps running. Whatever keeps it busy ends in a decision that calls advance again.
func requestReplan(b *EventBuilder, failed *messages.StepState) {
	if orchestratorBusy(b.state()) {
		return
	}
	replanCall(b, failed.GetStep().GetId())
}

// replanCall records the re-plan call for step failedID, or fails the session when no
// revision could follow: no LLM call left under max_iterations, or no room for a new
// step under max_steps.
func replanCall(b *EventBuilder, failedID string) {
	replanCallWith(b, failedID, &messages.LlmRequested{})
}

// replanCallWith is replanCall with the fields of call set (a re-prompt's); the call's
// id, step, purpose, model and iteration are filled in here.
func replanCallWith(b *EventBuilder, failedID string, call *messages.LlmRequested) {
	s := b.state()
	idx, ok := StepIndexByID(s, failedID)
	if !ok {
		fail(b, fmt.Sprintf("re-plan: step %s is not in the plan", failedID))
		return
	}
	why := fmt.Sprintf("step %s failed (%s) and cannot be re-planned", failedID, s.GetSteps()[idx].GetError())
	_, replaced := revisionSplit(s, failedID)
	kept := uint32(len(s.GetSteps()) - len(replaced))
	if limit := s.GetConfig().GetMaxSteps(); limit > 0 && kept >= limit {
		fail(b, fmt.Sprintf("%s: the %d steps kept fill max_steps %d", why, kept, limit))
		return
	}
	iteration := s.GetIterations() + 1
	if limit := s.GetConfig().GetMaxIterations(); limit > 0 && iteration > limit {
		fail(b, fmt.Sprintf("%s: no LLM call is left for the re-planner (max_iterations %d)", why, limit))
		return
	}
	if !callAllowed(b) {
		return
	}
	call.CallId, call.StepId, call.Purpose = replanCallID(s.GetReplanCalls()+1), failedID, PurposeReplan
	call.Model, call.Iteration = s.GetConfig().GetModel(), iteration
	b.Add(func(e *messages.Event) { e.Payload = &messages.Event_LlmRequested{LlmRequested: call} })
}

// revisePlan records the re-planner's answer (content) to call p for step p.step_id as
// plan_revised and starts what the revised plan allows; an answer that is not a usable
// plan of the remaining work is asked again once, then fails the session
// (unusablePlan). b holds the answer's llm_responded.
func revisePlan(b *EventBuilder, cfg Config, p *messages.PendingCall, content string) {
	failedID := p.GetStepId()
	s := b.state()
	idx, ok := StepIndexByID(s, failedID)
	if !ok || s.GetSteps()[idx].GetStatus() != messages.StepStatus_STEP_STATUS_FAILED {
		fail(b, fmt.Sprintf("re-plan: step %s is no longer a failed step of the plan", failedID))
		return
	}
	steps, replaced, err := parseRevision(s, failedID, content, cfg.Registry())
	if err != nil {
		unusablePlan(b, s, p, content, "re-planner", err)
		return
	}
	rev := s.GetPlanRevision() + 1
	reason := s.GetSteps()[idx].GetError()
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_PlanRevised{PlanRevised: &messages.PlanRevised{
			PlanId: fmt.Sprintf("plan-%d", rev+1), Revision: rev, Reason: reason, FailedStepId: failedID,
			Steps: steps, ReplacedStepIds: replaced,
		}}
	})
	advance(b, cfg)
}

// revisionSplit sorts s's steps for a re-plan of step failedID: the rules a new step is
// checked against, and the ids the revision replaces (failedID, then the pending steps
// in plan order). Every other step is kept.
func revisionSplit(s *messages.SessionState, failedID string) (*planRules, []string) {
	rules := &planRules{taken: map[string]string{}, dependable: map[string]bool{}}
	replaced := []string{failedID}
	for _, st := range s.GetSteps() {
		id := st.GetStep().GetId()
		switch {
		case id == failedID:
			rules.taken[id] = "the failed step"
		case st.GetStatus() == messages.StepStatus_STEP_STATUS_PENDING:
			replaced = append(replaced, id)
		case st.GetStatus() == messages.StepStatus_STEP_STATUS_FAILED:
			rules.taken[id] = "a step that failed too (it is re-planned on its own)"
		default:
			rules.taken[id] = "a kept step (" + strings.ToLower(strings.TrimPrefix(st.GetStatus().String(), "STEP_STATUS_")) + ")"
			rules.dependable[id] = true
		}
	}
	for _, id := range s.GetRetiredStepIds() {
		rules.taken[id] = "a step that failed earlier"
	}
	rules.kept = len(s.GetSteps()) - len(replaced)
	return rules, replaced
}

// parseRevision reads the re-planner's answer for step failedID: the steps of the
// remaining work (parsePlan's rules; new ids; dependencies on kept steps allowed;
// max_steps counts the kept steps too) and the ids they replace.
func parseRevision(s *messages.SessionState, failedID, content string, agents *Agents) ([]*messages.PlanStep, []string, error) {
	rules, replaced := revisionSplit(s, failedID)
	steps, err := parseSteps(content, s.GetConfig().GetMaxSteps(), rules, agents)
	if err != nil {
		return nil, nil, err
	}
	return steps, replaced, nil
}

// replanBrief is the user message of a re-plan call for step failedID: the goal, the
// hand-offs of the completed steps, the failed step with its hand-off and error, the
// steps still running, the pending steps the new plan replaces, and the ids a new step
// may not use.
func replanBrief(s *messages.SessionState, failedID string) string {
	rules, replaced := revisionSplit(s, failedID)
	var b strings.Builder
	fmt.Fprintf(&b, "Goal: %s\n", s.GetGoal())
	section := func(title string, match func(*messages.StepState) bool, line func(*strings.Builder, *messages.StepState)) {
		first := true
		for _, st := range s.GetSteps() {
			if !match(st) {
				continue
			}
			if first {
				fmt.Fprintf(&b, "\n%s\n", title)
				first = false
			}
			line(&b, st)
		}
	}
	step := func(b *strings.Builder, st *messages.StepState) {
		fmt.Fprintf(b, "- %s (%s): %s", st.GetStep().GetId(), st.GetStep().GetType(), st.GetStep().GetDescription())
		if deps := st.GetStep().GetDependencies(); len(deps) > 0 {
			fmt.Fprintf(b, " [depends on %s]", strings.Join(deps, ", "))
		}
		b.WriteString("\n")
	}
	is := func(status messages.StepStatus) func(*messages.StepState) bool {
		return func(st *messages.StepState) bool { return st.GetStatus() == status && st.GetStep().GetId() != failedID }
	}
	section("Completed steps (kept: their work and artifacts stand):", is(messages.StepStatus_STEP_STATUS_COMPLETED), func(b *strings.Builder, st *messages.StepState) {
		step(b, st)
		fmt.Fprintf(b, "  Hand-off: %s\n", indentLines(st.GetOutput(), "  "))
	})
	if idx, ok := StepIndexByID(s, failedID); ok {
		st := s.GetSteps()[idx]
		fmt.Fprintf(&b, "\nFailed step (dropped; it failed %d attempt(s) and will not run again as it is):\n", max(st.GetAttempt(), 1))
		step(&b, st)
		if sa := lastSubAgentOf(s, failedID); sa != nil && sa.GetResult() != nil {
			fmt.Fprintf(&b, "  Hand-off: %s\n", indentLines(HandoffText(sa.GetId(), sa.GetAgentType(), sa.GetResult()), "  "))
		}
		fmt.Fprintf(&b, "  Error: %s\n", st.GetError())
	}
	section("Steps still running (kept: they go on; do not plan them again; new steps may depend on them):",
		is(messages.StepStatus_STEP_STATUS_IN_PROGRESS), step)
	section("Other failed steps (each is re-planned on its own; do not plan them here):",
		is(messages.StepStatus_STEP_STATUS_FAILED), step)
	section("Pending steps (dropped: plan again those the goal still needs, adjusted to the new route):",
		is(messages.StepStatus_STEP_STATUS_PENDING), step)
	if len(rules.taken) > 0 {
		ids := make([]string, 0, len(rules.taken))
		for _, st := range s.GetSteps() {
			if _, ok := rules.taken[st.GetStep().GetId()]; ok {
				ids = append(ids, st.GetStep().GetId())
			}
		}
		ids = append(ids, s.GetRetiredStepIds()...)
		fmt.Fprintf(&b, "\nIds a new step may not use: %s\n", strings.Join(ids, ", "))
	}
	if arts := s.GetArtifacts(); len(arts) > 0 {
		b.WriteString("\nArtifacts in the workspace:\n")
		for _, a := range arts {
			fmt.Fprintf(&b, "- %s (%s, %d bytes)\n", a.GetPath(), a.GetContentType(), a.GetSize())
		}
	}
	if limit := s.GetConfig().GetMaxSteps(); limit > 0 {
		fmt.Fprintf(&b, "\nAt most %d new steps (max_steps %d, %d kept).\n", int(limit)-rules.kept, limit, rules.kept)
	}
	fmt.Fprintf(&b, "\nAnswer with the JSON plan of the remaining work only (it replaces: %s).\n", strings.Join(replaced, ", "))
	return b.String()
}

// lastSubAgentOf is the sub-agent that ran step id last, or nil.
func lastSubAgentOf(s *messages.SessionState, id string) *messages.SubagentState {
	var last *messages.SubagentState
	for _, sa := range s.GetSubAgents() {
		if sa.GetStepId() == id && (last == nil || sa.GetRunStartedSeq() > last.GetRunStartedSeq()) {
			last = sa
		}
	}
	return last
}

// indentLines indents every line of text after the first with prefix.
func indentLines(text, prefix string) string {
	return strings.ReplaceAll(strings.TrimSpace(text), "\n", "\n"+prefix)
}
