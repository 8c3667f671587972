package core

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/messages"
)

// Delegation, as decisions. A plan step of type research, code, write or review is run
// by a sub-agent (an agent actor, actors/agent): step_started, then subagent_started (the sub-agent's
// task brief opens, or continues, its own context) and its first llm_requested. The
// sub-agent's loop is the step loop's, with every event tagged with its sub_agent_id
// and folded into SessionState.sub_agents[id] instead of the orchestrator's step: its
// conversation never enters the orchestrator's context. An answer without tool calls
// ends the run: the hand-off is parsed (ParseHandoff), merged with the facts
// code knows (HandoffFacts) and recorded as subagent_completed with the orchestrator's
// next action (DecideHandoff): continue (step_completed with the hand-off as output),
// retry (the step runs again, resuming the same context), ask_human (a blocked hand-off),
// replan (a new plan of the remaining work, replan.go) or fail. Steps whose dependencies
// are complete run at the same time (advance); the orchestrator's own steps (custom,
// human_input) still run one at a time.

// purposeSubAgent is the purpose of a sub-agent's LLM calls.
const purposeSubAgent = "subagent"

// DefaultMaxParallelSubAgents is the default Config.MaxParallelSubAgents.
const DefaultMaxParallelSubAgents = 4

func subAgentCallID(id string, n uint32) string { return fmt.Sprintf("%s/llm-%d", id, n) }

// SubAgentByCall returns the sub-agent whose pending LLM call is callID.
func SubAgentByCall(s *messages.SessionState, callID string) *messages.SubagentState {
	for _, sa := range s.GetSubAgents() {
		if sa.GetPending().GetCallId() == callID {
			return sa
		}
	}
	return nil
}

// SubAgentByTool returns the sub-agent with the pending tool call key.
func SubAgentByTool(s *messages.SessionState, key string) (*messages.SubagentState, *messages.PendingTool) {
	for _, sa := range s.GetSubAgents() {
		for _, c := range sa.GetPendingTools() {
			if c.GetIdempotencyKey() == key {
				return sa, c
			}
		}
	}
	return nil, nil
}

// delegated reports whether step runs in a sub-agent.
func delegated(step *messages.PlanStep) bool { return Delegated(step.GetType()) }

// advance starts what the plan allows now: every pending step whose dependencies are
// complete, in plan order: sub-agent steps up to MaxParallelSubAgents running at once,
// the orchestrator's own steps one at a time; a step matching a before-breakpoint
// interrupts instead (and nothing after it starts). While a re-plan is due or in
// flight nothing starts but the re-plan call (requestReplan). When every step is
// complete the session completes (completeSession).
func advance(b *EventBuilder, cfg Config) {
	st := b.state()
	if Terminal(st) || st.GetInterrupt() != nil || len(st.GetSteps()) == 0 {
		return
	}
	if failed, due := replanDue(st); due {
		requestReplan(b, failed)
		return
	}
	if allStepsCompleted(st) {
		completeSession(b, st)
		return
	}
	running := runningSubAgents(st)
	busy := orchestratorBusy(st)
	if interruptQueued(st) { // a new message interrupts the turn (onbusy.go): no new step
		if running == 0 && !busy {
			completeWith(b, st, interruptedResult(st))
		}
		return
	}
	for i, step := range st.GetSteps() {
		if step.GetStatus() != messages.StepStatus_STEP_STATUS_PENDING || !dependenciesDone(st, step.GetStep()) {
			continue
		}
		isSub := delegated(step.GetStep())
		if (isSub && running >= cfg.maxParallelSubAgents()) || (!isSub && busy) {
			continue
		}
		if bp := matchBreakpoint(st, positionBefore, step.GetStep()); bp != nil {
			interrupt(b, bp, uint32(i), step.GetStep().GetId())
			return
		}
		startAnyStep(b, cfg, step.GetStep(), uint32(i), 1, "")
		if Terminal(b.state()) {
			return // a budget ended the session: nothing else starts
		}
		if isSub {
			running++
		} else {
			busy = true
		}
	}
}

// startAnyStep starts step idx (attempt) in a sub-agent or in the orchestrator's loop.
func startAnyStep(b *EventBuilder, cfg Config, step *messages.PlanStep, idx, attempt uint32, note string) {
	st := b.state()
	if delegated(step) {
		startDelegated(b, cfg, step, idx, attempt, note)
		return
	}
	steps := planSteps(st)
	steps[idx] = step
	startStep(b, st, cfg, steps, idx, attempt, st.GetIterations())
}

// completeSession ends a session whose steps are all complete. After a plan that
// delegated work, the orchestrator writes the closing summary from the hand-offs (a
// synthesize call, counted against max_iterations; without budget left, code writes
// it); otherwise the result is the last step's output.
func completeSession(b *EventBuilder, st *messages.SessionState) {
	steps := st.GetSteps()
	if !slices.ContainsFunc(steps, func(s *messages.StepState) bool { return delegated(s.GetStep()) }) {
		completeWith(b, st, steps[len(steps)-1].GetOutput())
		return
	}
	iteration := st.GetIterations() + 1
	if limit := st.GetConfig().GetMaxIterations(); limit > 0 && iteration > limit {
		completeWith(b, st, fallbackResult(st, fmt.Sprintf("no LLM call left for the closing summary (max_iterations %d)", limit)))
		return
	}
	if reason := budgetReason(b); reason != "" {
		// The work is done: the budget only forbids the summary's call.
		completeWith(b, st, fallbackResult(st, "no LLM call left for the closing summary: "+reason))
		return
	}
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{
			CallId: turnCallID(st, "final-1"), Purpose: purposeSynthesize, Model: st.GetConfig().GetModel(), Iteration: iteration,
		}}
	})
}

// completeWith records session_completed with result and the session's totals as of st.
func completeWith(b *EventBuilder, st *messages.SessionState, result string) {
	usage, cost := st.GetUsage(), st.GetCostUsd()
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_SessionCompleted{SessionCompleted: &messages.SessionCompleted{Result: result, Usage: usage, CostUsd: cost}}
	})
}

// synthesisBrief is the user message of the closing call: the goal, every step's
// hand-off and the workspace's artifact paths.
func synthesisBrief(s *messages.SessionState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Goal: %s\n", s.GetGoal())
	if msg, _ := LastMessage(s); msg != "" {
		fmt.Fprintf(&b, "Follow-up message (turn %d), which this plan answers: %s\n", Turn(s), msg)
	}
	b.WriteString("\nHand-offs, in plan order:\n")
	for _, st := range s.GetSteps() {
		fmt.Fprintf(&b, "- %s (%s): %s\n", st.GetStep().GetId(), st.GetStep().GetType(), st.GetOutput())
	}
	if n := s.GetPlanRevision(); n > 0 {
		fmt.Fprintf(&b, "\nThe plan was revised %d time(s) after steps failed; the failed steps (%s) were replaced by the steps above.\n",
			n, strings.Join(s.GetRetiredStepIds(), ", "))
	}
	if arts := s.GetArtifacts(); len(arts) > 0 {
		b.WriteString("\nArtifacts in the workspace:\n")
		for _, a := range arts {
			fmt.Fprintf(&b, "- %s (%s, %d bytes)\n", a.GetPath(), a.GetContentType(), a.GetSize())
		}
	}
	b.WriteString("\nWrite the closing summary for the user.\n")
	return b.String()
}

// fallbackResult is the closing summary code writes when the model cannot: why, the
// last step's output and the artifact paths.
func fallbackResult(s *messages.SessionState, why string) string {
	steps := s.GetSteps()
	var b strings.Builder
	fmt.Fprintf(&b, "All %d steps completed (%s).\n\n%s\n", len(steps), why, steps[len(steps)-1].GetOutput())
	if arts := s.GetArtifacts(); len(arts) > 0 {
		b.WriteString("\nArtifacts:\n")
		for _, a := range arts {
			fmt.Fprintf(&b, "- %s\n", a.GetPath())
		}
	}
	return b.String()
}

func allStepsCompleted(s *messages.SessionState) bool {
	for _, st := range s.GetSteps() {
		if st.GetStatus() != messages.StepStatus_STEP_STATUS_COMPLETED {
			return false
		}
	}
	return true
}

func runningSubAgents(s *messages.SessionState) int {
	n := 0
	for _, sa := range s.GetSubAgents() {
		if sa.GetRunning() {
			n++
		}
	}
	return n
}

// orchestratorBusy reports whether one of the orchestrator's own steps is running (or
// due to run again after a retryable failure).
func orchestratorBusy(s *messages.SessionState) bool {
	if s.GetPending() != nil || len(s.GetPendingTools()) > 0 || s.GetRetryAtUnixNano() != 0 {
		return true
	}
	for _, st := range s.GetSteps() {
		if st.GetStatus() == messages.StepStatus_STEP_STATUS_IN_PROGRESS && !delegated(st.GetStep()) {
			return true
		}
	}
	return false
}

func dependenciesDone(s *messages.SessionState, step *messages.PlanStep) bool {
	for _, dep := range step.GetDependencies() {
		i, ok := StepIndexByID(s, dep)
		if !ok || s.GetSteps()[i].GetStatus() != messages.StepStatus_STEP_STATUS_COMPLETED {
			return false
		}
	}
	return true
}

// StepIndexByID returns the index of plan step id, and false when the plan has none.
func StepIndexByID(s *messages.SessionState, id string) (uint32, bool) {
	for i, st := range s.GetSteps() {
		if st.GetStep().GetId() == id {
			return uint32(i), true
		}
	}
	return 0, false
}

// startDelegated records step_started, subagent_started and the sub-agent's first call.
// The sub-agent is the step's earlier one (a retry), the one the step names in
// sub_agent_id (same agent type), or a new one ("{agent_type}-{n}").
func startDelegated(b *EventBuilder, cfg Config, step *messages.PlanStep, idx, attempt uint32, note string) {
	st := b.state()
	spec, ok := cfg.Registry().ForStep(step.GetType())
	if !ok {
		fail(b, fmt.Sprintf("configuration error: step %s has type %q, which names no agent of this node (agents: %s): "+
			"start the node with the agent that planned it", step.GetId(), step.GetType(), strings.Join(cfg.Registry().StepTypes(), ", ")))
		return
	}
	prof, _ := cfg.Registry().ProfileFor(step.GetType())
	prof.MaxIterations = cfg.subAgentMaxIterations()
	if spec.MaxIterations > 0 {
		prof.MaxIterations = spec.MaxIterations
	}
	if list, ok := cfg.SubAgentTools[prof.AgentType]; ok {
		prof.Tools = list
	}
	id, resumed := pickSubAgent(st, step, prof.AgentType)
	task := taskBrief(st, step, attempt, note)
	opening := cfg.CountMessage(st.GetConfig().GetModel(), llm.Message{Role: "user", Content: OpeningMessage(st.GetGoal(), step.GetDescription())})
	taskTokens := cfg.CountMessage(st.GetConfig().GetModel(), llm.Message{Role: "user", Content: task})
	toolNames := prof.AvailableTools(cfg.hasTool)
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_StepStarted{StepStarted: &messages.StepStarted{
			StepId: step.GetId(), StepIndex: idx, StepType: step.GetType(), Description: step.GetDescription(), Attempt: attempt,
			OpeningTokens: opening,
		}}
	})
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_SubagentStarted{SubagentStarted: &messages.SubagentStarted{
			SubAgentId: id, AgentType: prof.AgentType, StepId: step.GetId(), StepIndex: idx, Task: task, TaskTokens: taskTokens,
			MaxIterations: prof.MaxIterations, Tools: toolNames, Resumed: resumed,
		}}
	})
	requestSubAgentCall(b, cfg, id)
}

// pickSubAgent chooses the sub-agent that runs step.
func pickSubAgent(s *messages.SessionState, step *messages.PlanStep, agentType string) (id string, resumed bool) {
	if want := step.GetSubAgentId(); want != "" {
		if sa := s.GetSubAgents()[want]; sa != nil && sa.GetAgentType() == agentType && !sa.GetRunning() {
			return want, true
		}
	}
	n := 0
	var last *messages.SubagentState
	for _, sa := range s.GetSubAgents() {
		if sa.GetAgentType() == agentType {
			n++
		}
		if sa.GetStepId() == step.GetId() && (last == nil || sa.GetRunStartedSeq() > last.GetRunStartedSeq()) {
			last = sa
		}
	}
	if last != nil && !last.GetRunning() && last.GetAgentType() == agentType {
		return last.GetId(), true
	}
	for {
		n++
		id = fmt.Sprintf("%s-%d", agentType, n)
		if s.GetSubAgents()[id] == nil {
			return id, false
		}
	}
}

// taskBrief is the user message that opens (or continues) a sub-agent's context for a
// step: the task, the goal, the hand-offs of the steps it depends on and the workspace's
// artifact paths (never their contents).
func taskBrief(s *messages.SessionState, step *messages.PlanStep, attempt uint32, note string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Task: %s\nGoal: %s\nStep: %s (%s)", step.GetDescription(), s.GetGoal(), step.GetId(), step.GetType())
	if attempt > 1 {
		fmt.Fprintf(&b, ", attempt %d", attempt)
	}
	b.WriteString("\n")
	if deps := step.GetDependencies(); len(deps) > 0 {
		b.WriteString("\nHand-offs of the steps this one depends on:\n")
		for _, dep := range deps {
			if i, ok := StepIndexByID(s, dep); ok {
				fmt.Fprintf(&b, "- %s: %s\n", dep, s.GetSteps()[i].GetOutput())
			}
		}
	}
	if arts := s.GetArtifacts(); len(arts) > 0 {
		fmt.Fprintf(&b, "\nArtifacts in the workspace (read them with read_artifact when you need their content):\n")
		for _, a := range arts {
			fmt.Fprintf(&b, "- %s (%s, %d bytes)\n", a.GetPath(), a.GetContentType(), a.GetSize())
		}
	}
	if note != "" {
		fmt.Fprintf(&b, "\n%s\n", note)
	}
	b.WriteString("\nWork on the task with your tools. When you are done, answer without tool calls and end the answer with the hand-off JSON object in a ```json fence.\n")
	return b.String()
}

// requestSubAgentCall records the sub-agent's next LLM call, or ends its run when its
// iteration bound is spent.
func requestSubAgentCall(b *EventBuilder, cfg Config, id string) {
	st := b.state()
	sa := st.GetSubAgents()[id]
	iteration := sa.GetIterations() + 1
	if limit := sa.GetMaxIterations(); limit > 0 && iteration > limit {
		finishSubAgent(b, cfg, id, &messages.SubagentResult{
			Status:  StatusFailed,
			Summary: fmt.Sprintf("max iterations reached: sub-agent %s made %d LLM calls in this run (max_iterations %d) without a final hand-off", id, iteration-1, limit),
		})
		return
	}
	if !callAllowed(b) {
		return
	}
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{
			CallId: subAgentCallID(id, sa.GetLlmCalls()+1), StepId: sa.GetStepId(), Purpose: purposeSubAgent,
			Model: cfg.SubAgentModel(st, sa.GetAgentType()), Iteration: iteration, SubAgentId: id,
		}}
	})
}

// decideSubAgentLLMResult turns the result of a sub-agent's pending call into events.
func decideSubAgentLLMResult(s *messages.SessionState, sa *messages.SubagentState, r *LLMResult, cfg Config, now time.Time) []*messages.Event {
	b := newEvents(s, "", now, cfg)
	id := sa.GetId()
	if r.Err != nil && r.Config {
		failSubAgentConfig(b, id, r)
		return b.Evs
	}
	if r.Err != nil {
		finishSubAgent(b, cfg, id, &messages.SubagentResult{Status: StatusFailed, Summary: fmt.Sprintf("llm call %s failed: %v", r.CallID, r.Err)})
		return b.Evs
	}
	turn := subAgentTurn(s, sa, cfg)
	calls := respond(b, s, turn, r, cfg)
	if len(calls) == 0 {
		finishHandoff(b, cfg, id, ParseHandoff(sa.GetAgentType(), r.Content))
		return b.Evs
	}
	decideToolCalls(b, s, turn, calls, cfg)
	return b.Evs
}

// stepOfID is the plan step with id, or an empty one.
func stepOfID(s *messages.SessionState, id string) *messages.PlanStep {
	if i, ok := StepIndexByID(s, id); ok {
		return s.GetSteps()[i].GetStep()
	}
	return &messages.PlanStep{Id: id}
}

// decideSubAgentToolResult records a sub-agent's tool call outcome; after the turn's last
// one the sub-agent's next call follows.
func decideSubAgentToolResult(s *messages.SessionState, sa *messages.SubagentState, pt *messages.PendingTool, r *ToolResult, cfg Config, now time.Time) []*messages.Event {
	b := newEvents(s, "", now, cfg)
	id := sa.GetId()
	recordArtifacts(b, s, pt.GetStepId(), id, pt.GetCallId(), pt.GetIdempotencyKey(), r.Res.Artifacts)
	recordMemories(b, pt.GetStepId(), id, pt.GetCallId(), pt.GetIdempotencyKey(), r.Res.Memories)
	b.Add(func(e *messages.Event) {
		tr := toolResultEvent(pt.GetStepId(), pt.GetCallId(), pt.GetTool(), pt.GetIdempotencyKey(), r.Res, r.Tokens)
		tr.SubAgentId = id
		e.Payload = &messages.Event_ToolResult{ToolResult: tr}
	})
	if len(sa.GetPendingTools()) == 1 {
		requestSubAgentCall(b, cfg, id)
	}
	return b.Evs
}

// finishSubAgent ends sub-agent id's run with result (the model's interpretation; the
// facts are added here) and takes the orchestrator's next action.
func finishSubAgent(b *EventBuilder, cfg Config, id string, result *messages.SubagentResult) {
	st := b.state()
	sa := st.GetSubAgents()[id]
	idx := sa.GetStepIndex()
	step := st.GetSteps()[idx]
	result = HandoffFacts(result, sa, time.Duration(b.at-sa.GetRunStartedAtUnixNano()).Milliseconds())
	attempt := max(step.GetAttempt(), 1)
	canReplan := int64(st.GetReplans()) < int64(cfg.MaxReplans)
	action := DecideHandoff(result, attempt, cfg.StepAttempts, true, canReplan)
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_SubagentCompleted{SubagentCompleted: &messages.SubagentCompleted{
			SubAgentId: id, AgentType: sa.GetAgentType(), StepId: sa.GetStepId(), StepIndex: idx, Result: result, Action: action,
		}}
	})
	stepID := step.GetStep().GetId()
	switch action {
	case ActionContinue:
		output := HandoffText(id, sa.GetAgentType(), result)
		tokens := cfg.CountMessage(st.GetConfig().GetModel(), llm.Message{Role: "assistant", Content: output})
		b.Add(func(e *messages.Event) {
			e.Payload = &messages.Event_StepCompleted{StepCompleted: &messages.StepCompleted{StepId: stepID, StepIndex: idx, Output: output, OutputTokens: tokens}}
		})
		afterStep(b, cfg, idx)
	case ActionAskHuman:
		askAboutBlockers(b, step.GetStep(), sa, result)
	case ActionRetry:
		msg := fmt.Sprintf("sub-agent %s: %s: %s", id, result.GetStatus(), result.GetSummary())
		b.Add(func(e *messages.Event) {
			e.Payload = &messages.Event_StepFailed{StepFailed: &messages.StepFailed{StepId: stepID, StepIndex: idx, Error: msg, Retryable: true, Attempt: attempt}}
		})
		note := fmt.Sprintf("Your previous attempt at this step ended with status %s: %s\nTry again; change your approach where it failed.", result.GetStatus(), result.GetSummary())
		startDelegated(b, cfg, step.GetStep(), idx, attempt+1, note)
	case ActionReplan:
		// The step is over; the re-planner decides what replaces it (advance makes the
		// call once the orchestrator is free).
		msg := fmt.Sprintf("sub-agent %s: %s: %s (attempt %d of %d)", id, result.GetStatus(), result.GetSummary(), attempt, cfg.StepAttempts)
		b.Add(func(e *messages.Event) {
			e.Payload = &messages.Event_StepFailed{StepFailed: &messages.StepFailed{StepId: stepID, StepIndex: idx, Error: msg, Attempt: attempt}}
		})
		advance(b, cfg)
	default:
		msg := fmt.Sprintf("sub-agent %s: %s: %s", id, result.GetStatus(), result.GetSummary())
		b.Add(func(e *messages.Event) {
			e.Payload = &messages.Event_StepFailed{StepFailed: &messages.StepFailed{StepId: stepID, StepIndex: idx, Error: msg, Attempt: attempt}}
		})
		reason := fmt.Sprintf("step %s: %s (attempt %d of %d)", stepID, msg, attempt, cfg.StepAttempts)
		if cfg.MaxReplans > 0 {
			reason += fmt.Sprintf("; no re-plan is left (max_replans %d, %d made)", cfg.MaxReplans, st.GetReplans())
		}
		fail(b, reason)
	}
}

// afterStep follows a completed step: an after-breakpoint on it interrupts (unless the
// plan is done), else advance.
func afterStep(b *EventBuilder, cfg Config, idx uint32) {
	st := b.state()
	if !allStepsCompleted(st) {
		if bp := matchBreakpoint(st, positionAfter, st.GetSteps()[idx].GetStep()); bp != nil && st.GetInterrupt() == nil {
			interrupt(b, bp, idx, st.GetSteps()[idx].GetStep().GetId())
			return
		}
	}
	advance(b, cfg)
}

// askAboutBlockers opens a human-input request about a blocked hand-off (kind
// "handoff"): the step waits; the answer resumes the sub-agent with it in its brief
// (answerHandoff); without an answer by the deadline the default action continues the
// plan with the hand-off as it is, or fails.
func askAboutBlockers(b *EventBuilder, step *messages.PlanStep, sa *messages.SubagentState, r *messages.SubagentResult) {
	q := fmt.Sprintf("Sub-agent %s (%s) is blocked on step %s (%s): %s", sa.GetId(), sa.GetAgentType(), step.GetId(), step.GetDescription(), r.GetSummary())
	if len(r.GetBlockers()) > 0 {
		q += "\nBlockers: " + strings.Join(r.GetBlockers(), "; ")
	}
	q += "\nHow should it proceed? Your answer is passed to it and it runs again."
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_HitlRequested{HitlRequested: &messages.HitlRequested{
			RequestId: fmt.Sprintf("%s/handoff-%d", sa.GetId(), sa.GetRuns()), Kind: hitlKindHandoff, StepId: step.GetId(),
			SubAgentId: sa.GetId(), Question: q, DeadlineUnixNano: b.at + humanTimeout(step).Nanoseconds(),
			DefaultAction: firstNonEmpty(step.GetDefaultAction(), actionContinue),
		}}
	})
}

// answerHandoff follows a human's answer to a blocked hand-off: the sub-agent runs the
// step again in its own context, the answer in its brief. Without an answer (timeout,
// action continue) the plan continues with the blocked hand-off as the step's output.
func answerHandoff(s *messages.SessionState, cfg Config, r *messages.HitlRequested, input, by string, now time.Time) []*messages.Event {
	idx, ok := StepIndexByID(s, r.GetStepId())
	sa := s.GetSubAgents()[r.GetSubAgentId()]
	if !ok || sa == nil || sa.GetRunning() {
		return nil
	}
	st := s.GetSteps()[idx]
	b := newEvents(s, "", now, cfg)
	if by == byTimeout {
		output := HandoffText(sa.GetId(), sa.GetAgentType(), sa.GetResult())
		tokens := cfg.CountMessage(s.GetConfig().GetModel(), llm.Message{Role: "assistant", Content: output})
		b.Add(func(e *messages.Event) {
			e.Payload = &messages.Event_StepCompleted{StepCompleted: &messages.StepCompleted{StepId: r.GetStepId(), StepIndex: idx, Output: output, OutputTokens: tokens}}
		})
		afterStep(b, cfg, idx)
		return b.Evs
	}
	note := fmt.Sprintf("You reported being blocked: %s\nA human answered: %s\nContinue the task with this answer.", sa.GetResult().GetSummary(), input)
	startDelegated(b, cfg, st.GetStep(), idx, max(st.GetAttempt(), 1)+1, note)
	return b.Evs
}

// SubAgentsBusy reports whether a sub-agent is running (the grain must not passivate).
func SubAgentsBusy(s *messages.SessionState) bool {
	return !Terminal(s) && runningSubAgents(s) > 0
}
