package core

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// The step loop, as decisions. A step is a conversation: llm_requested → the model
// answers (llm_responded); when the answer asks for tools, each call is recorded
// (tool_called), run, and its outcome recorded (tool_result); when the turn's last
// result is in, the next llm_requested follows. An answer without tool calls completes
// the step. Every function here is pure: state and inputs in, events out.

// Purposes of LLM calls.
const (
	PurposePlan = "plan"
	PurposeStep = "step"
	// purposeSynthesize is the orchestrator's closing call after a delegated plan.
	purposeSynthesize = "synthesize"
	// PurposeReplan is the orchestrator's call for a new plan of the remaining work
	// after a step failed for good (replan.go).
	PurposeReplan = "replan"
)

func planCallID(n uint32) string { return fmt.Sprintf("plan-%d", n) }

func stepCallID(stepID string, n uint32) string { return fmt.Sprintf("%s/llm-%d", stepID, n) }

// IdempotencyKey is the key of a session's tool call: session, step and the step's call
// index. A call recorded with a result under its key is never executed again.
func IdempotencyKey(sessionID, stepID string, index uint32) string {
	return fmt.Sprintf("%s/%s/tool-%d", sessionID, stepID, index)
}

// LLMResult is what a step runner reports back to the grain.
type LLMResult struct {
	// CallID is the pending call answered (PendingCall.call_id).
	CallID string
	// Content, ToolCalls and FinishReason are the model's answer.
	Content      string
	ToolCalls    []*messages.ToolCallRequest
	FinishReason string
	// Model is the model that answered; Usage its token usage; Duration the call's.
	Model    string
	Usage    *messages.Usage
	Duration time.Duration
	// Thinking are the answer's reasoning blocks (llm.Response.Thinking), recorded to be
	// sent back with it.
	Thinking []*messages.ThinkingBlock
	// Tokens is the answer's stored token count; CtxInfo describes its context.
	Tokens  uint32
	CtxInfo *messages.ContextInfo
	// Err is the call's failure (nil: answered).
	Err error
	// Retryable classifies Err: a later attempt may succeed (rate limit, outage).
	Retryable bool
	// Config classifies Err as the node's configuration's (IsConfigError): no attempt
	// can succeed.
	Config bool
}

// ToolResult is what a tool runner reports back to the grain.
type ToolResult struct {
	// Key is the call's idempotency key (PendingTool.key).
	Key string
	// Res is what the tool returned.
	Res tools.Result
	// Tokens is the tool message's stored token count.
	Tokens uint32
}

// DecideLLMResult turns the result of the pending call into events. It returns nil when
// the result is stale (not the pending call).
func DecideLLMResult(s *messages.SessionState, r *LLMResult, cfg Config, now time.Time) []*messages.Event {
	evs, _ := DecideLLMResultState(s, r, cfg, now)
	return evs
}

// DecideLLMResultState is decideLLMResult that also returns the state its events lead
// to, when the decision built it on the way (eventBuilder.final; nil otherwise): the
// pipelined commit then spares itself a second copy of the state.
func DecideLLMResultState(s *messages.SessionState, r *LLMResult, cfg Config, now time.Time) ([]*messages.Event, *messages.SessionState) {
	r = r.withinAnswerLimit()
	if sa := SubAgentByCall(s, r.CallID); sa != nil {
		if Terminal(s) {
			return nil, nil
		}
		return decideSubAgentLLMResult(s, sa, r, cfg, now), nil
	}
	p := s.GetPending()
	if p == nil || p.GetCallId() != r.CallID || Terminal(s) {
		return nil, nil
	}
	b := newEvents(s, "", now, cfg)
	decideCallResult(b, s, p, r, cfg, now)
	return b.Evs, b.final()
}

// decideCallResult records the answer (or failure) r of the orchestrator's pending call p.
func decideCallResult(b *EventBuilder, s *messages.SessionState, p *messages.PendingCall, r *LLMResult, cfg Config, now time.Time) {
	if r.Err != nil {
		llmFailed(b, s, p, r, cfg, now)
		return
	}
	calls := respond(b, s, &agentTurn{stepID: p.GetStepId()}, r, cfg)
	if p.GetPurpose() == purposeSynthesize {
		completeWith(b, b.state(), r.Content)
		return
	}
	if p.GetPurpose() == PurposeReplan {
		revisePlan(b, cfg, p, r.Content)
		return
	}
	if p.GetPurpose() == PurposeMessage {
		decideFollowUpAnswer(b, s, p, r.Content, cfg)
		return
	}
	if p.GetPurpose() == PurposePlan {
		steps, err := parsePlanFor(cfg.Registry(), r.Content, s.GetConfig().GetMaxSteps())
		if err != nil {
			unusablePlan(b, s, p, r.Content, "planner", err)
			return
		}
		b.Add(func(e *messages.Event) {
			e.Payload = &messages.Event_PlanCreated{PlanCreated: &messages.PlanCreated{PlanId: "plan-1", Steps: steps}}
		})
		advance(b, cfg)
		return
	}
	turn := orchestratorTurn(s, p)
	if len(calls) == 0 {
		completeStep(b, s, cfg, turn.stepIndex, r.Content)
		return
	}
	decideToolCalls(b, s, turn, calls, cfg)
}

// llmFailed decides what a failed call means: a retryable failure with attempts left
// schedules another run of the plan or step; anything else fails the session.
func llmFailed(b *EventBuilder, s *messages.SessionState, p *messages.PendingCall, r *LLMResult, cfg Config, now time.Time) {
	if p.GetPurpose() == purposeSynthesize {
		// The work is done and recorded; only its summary failed: the session completes
		// with the summary code can write.
		completeWith(b, s, fallbackResult(s, fmt.Sprintf("the closing summary (llm call %s) failed: %v", r.CallID, r.Err)))
		return
	}
	var retryAt int64
	if p.GetPurpose() == PurposeReplan {
		attempt := s.GetReplanAttempt()
		if retryAt = planFailed(b, r, attempt, cfg, now); retryAt == 0 {
			reason := fmt.Sprintf("re-plan after step %s failed: llm call %s failed: %v", p.GetStepId(), r.CallID, r.Err)
			if r.Retryable {
				reason += fmt.Sprintf(" (attempt %d of %d)", attempt, cfg.StepAttempts)
			}
			fail(b, reason)
		}
		return
	}
	if planningPurpose(p.GetPurpose()) {
		if retryAt = planFailed(b, r, s.GetPlanAttempt(), cfg, now); retryAt == 0 {
			fail(b, fmt.Sprintf("plan: llm call %s failed: %v", r.CallID, r.Err))
		}
		return
	}
	idx := s.GetCurrentStepIndex()
	attempt := max(s.GetSteps()[idx].GetAttempt(), 1)
	if r.Retryable && attempt < cfg.StepAttempts {
		retryAt = now.Add(cfg.StepRetryDelay).UnixNano()
	}
	msg := fmt.Sprintf("llm call %s failed: %v", r.CallID, r.Err)
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_StepFailed{StepFailed: &messages.StepFailed{
			StepId: p.GetStepId(), StepIndex: idx, Error: msg, Retryable: r.Retryable, RetryAtUnixNano: retryAt, Attempt: attempt,
		}}
	})
	if retryAt == 0 {
		reason := msg
		if r.Retryable {
			reason = fmt.Sprintf("%s (attempt %d of %d)", msg, attempt, cfg.StepAttempts)
		}
		fail(b, fmt.Sprintf("step %s: %s", p.GetStepId(), reason))
	}
}

// planFailed records plan_failed for the failed plan or re-plan call r (attempt of its
// kind) and returns when it runs again: StepRetryDelay from now for a retryable failure
// with attempts left, else 0 (the caller fails the session).
func planFailed(b *EventBuilder, r *LLMResult, attempt uint32, cfg Config, now time.Time) (retryAt int64) {
	if r.Retryable && attempt < cfg.StepAttempts {
		retryAt = now.Add(cfg.StepRetryDelay).UnixNano()
	}
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_PlanFailed{PlanFailed: &messages.PlanFailed{
			CallId: r.CallID, Error: r.Err.Error(), Retryable: r.Retryable, RetryAtUnixNano: retryAt, Attempt: attempt,
		}}
	})
	return retryAt
}

// DecideToolResult records a tool call's outcome. When it was the turn's last pending
// call, the next LLM call of the step follows. It returns nil for a stale result.
func DecideToolResult(s *messages.SessionState, r *ToolResult, cfg Config, now time.Time) []*messages.Event {
	if Terminal(s) {
		return nil
	}
	if sa, pt := SubAgentByTool(s, r.Key); sa != nil {
		return decideSubAgentToolResult(s, sa, pt, r, cfg, now)
	}
	var pt *messages.PendingTool
	for _, c := range s.GetPendingTools() {
		if c.GetIdempotencyKey() == r.Key {
			pt = c
			break
		}
	}
	if pt == nil {
		return nil
	}
	b := newEvents(s, "", now, cfg)
	recordArtifacts(b, s, pt.GetStepId(), "", pt.GetCallId(), pt.GetIdempotencyKey(), r.Res.Artifacts)
	recordMemories(b, pt.GetStepId(), "", pt.GetCallId(), pt.GetIdempotencyKey(), r.Res.Memories)
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_ToolResult{ToolResult: toolResultEvent(pt.GetStepId(), pt.GetCallId(), pt.GetTool(), pt.GetIdempotencyKey(), r.Res, r.Tokens)}
	})
	if len(s.GetPendingTools()) == 1 {
		nextTurn(b, s)
	}
	return b.Evs
}

// DecideRetry runs a retryably failed plan, re-plan or step again once its time has
// come.
func DecideRetry(s *messages.SessionState, cfg Config, now time.Time) []*messages.Event {
	at := s.GetRetryAtUnixNano()
	if at == 0 || Terminal(s) || now.UnixNano() < at {
		return nil
	}
	b := newEvents(s, "", now, cfg)
	if s.GetReplanAttempt() > 0 {
		// A re-plan call failed (nothing else ran meanwhile: nothing starts while a
		// re-plan is in progress).
		failed, due := replanDue(s)
		if !due {
			fail(b, "re-plan retry: no failed step waits for its re-plan") // a decision bug; never loop on it
			return b.Evs
		}
		replanCall(b, failed.GetStep().GetId())
		return b.Evs
	}
	iteration := s.GetIterations()
	if s.GetStatus() == messages.SessionStatus_SESSION_STATUS_PLANNING {
		if !withinBudget(b, s, iteration+1, nil) {
			return b.Evs
		}
		callID, purpose := planningCall(s, s.GetPlanAttempt()+1)
		b.Add(func(e *messages.Event) {
			e.Payload = &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{
				CallId: callID, Purpose: purpose, Model: s.GetConfig().GetModel(), Iteration: iteration + 1,
			}}
		})
		return b.Evs
	}
	idx := s.GetCurrentStepIndex()
	st := s.GetSteps()[idx]
	startStep(b, s, cfg, planSteps(s), idx, max(st.GetAttempt(), 1)+1, iteration)
	return b.Evs
}

// startStep appends step_started and the step's first llm_requested, or the failure of
// the step when the iteration budget is spent. The step's opening user message (a history
// message recorded at step_started's seq) is counted here, once.
func startStep(b *EventBuilder, s *messages.SessionState, cfg Config, steps []*messages.PlanStep, idx, attempt, iterations uint32) {
	st := steps[idx]
	opening := cfg.CountMessage(s.GetConfig().GetModel(), llm.Message{Role: "user", Content: OpeningMessage(s.GetGoal(), st.GetDescription())})
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_StepStarted{StepStarted: &messages.StepStarted{
			StepId: st.GetId(), StepIndex: idx, StepType: st.GetType(), Description: st.GetDescription(), Attempt: attempt,
			OpeningTokens: opening,
		}}
	})
	var llmCalls uint32
	if int(idx) < len(s.GetSteps()) {
		llmCalls = s.GetSteps()[idx].GetLlmCalls()
	}
	if st.GetType() == StepTypeHumanInput {
		requestStepInput(b, st)
		return
	}
	requestStepCall(b, s, idx, st.GetId(), attempt, llmCalls+1, iterations+1)
}

// nextTurn asks the model again after a turn's tool results are all recorded.
func nextTurn(b *EventBuilder, s *messages.SessionState) {
	idx := s.GetCurrentStepIndex()
	st := s.GetSteps()[idx]
	requestStepCall(b, s, idx, st.GetStep().GetId(), max(st.GetAttempt(), 1), st.GetLlmCalls()+1, s.GetIterations()+1)
}

func requestStepCall(b *EventBuilder, s *messages.SessionState, idx uint32, stepID string, attempt, n, iteration uint32) {
	if !withinBudget(b, s, iteration, &messages.StepFailed{StepId: stepID, StepIndex: idx, Attempt: attempt}) {
		return
	}
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{
			CallId: stepCallID(stepID, n), StepId: stepID, Purpose: PurposeStep,
			Model: s.GetConfig().GetModel(), Iteration: iteration,
		}}
	})
}

// withinBudget reports whether LLM call number iteration fits max_iterations and the
// session budgets (budget.go); when it does not, it appends step (the failure of the
// step, nil while planning) and the failure of the session.
func withinBudget(b *EventBuilder, s *messages.SessionState, iteration uint32, step *messages.StepFailed) bool {
	msg := budgetReason(b)
	if limit := s.GetConfig().GetMaxIterations(); msg == "" && limit > 0 && iteration > limit {
		msg = fmt.Sprintf("max iterations reached: the session has made %d LLM calls (max_iterations %d)", iteration-1, limit)
	}
	if msg == "" {
		return true
	}
	if step != nil {
		msg += fmt.Sprintf(" and step %s has no final answer yet", step.GetStepId())
		step.Error = msg
		b.Add(func(e *messages.Event) { e.Payload = &messages.Event_StepFailed{StepFailed: step} })
	}
	fail(b, msg)
	return false
}

// completeStep records the step's final answer and starts the next step or completes
// the session.
func completeStep(b *EventBuilder, s *messages.SessionState, cfg Config, idx uint32, output string) {
	st := s.GetSteps()[idx]
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_StepCompleted{StepCompleted: &messages.StepCompleted{
			StepId: st.GetStep().GetId(), StepIndex: idx, Output: output,
		}}
	})
	afterStep(b, cfg, idx)
}

func fail(b *EventBuilder, msg string) {
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_SessionFailed{SessionFailed: &messages.SessionFailed{Error: msg}}
	})
}

func toolResultEvent(stepID, callID, tool, key string, r tools.Result, tokens uint32) *messages.ToolResult {
	ev := &messages.ToolResult{StepId: stepID, CallId: callID, Tool: tool, IdempotencyKey: key, DurationMs: r.Duration.Milliseconds(), Tokens: tokens}
	if r.Err != nil {
		ev.Error = &messages.ToolFailure{
			ErrorType: string(r.Err.Type), Retryable: r.Err.Retryable, Message: r.Err.Message, LlmText: r.Err.FormatForLLM(),
			Config: r.Err.Config,
		}
		return ev
	}
	ev.Result = r.Output
	return ev
}

// ToolMessage is the tool message the model reads for r: its output, or the error as
// ToolError.FormatForLLM renders it (what Apply records in the transcript).
func ToolMessage(callID string, r tools.Result) llm.Message {
	content := r.Output
	if r.Err != nil {
		content = r.Err.FormatForLLM()
	}
	return llm.Message{Role: "tool", Content: content, ToolCallID: callID}
}

// NormaliseToolCalls gives every call a non-empty id unique within the turn (the tool
// message answering it must name it unambiguously).
func NormaliseToolCalls(in []*messages.ToolCallRequest) []*messages.ToolCallRequest {
	if len(in) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(in))
	out := make([]*messages.ToolCallRequest, len(in))
	for i, c := range in {
		id := strings.TrimSpace(c.GetId())
		if id == "" || seen[id] {
			id = fmt.Sprintf("call_%d", i+1)
			for seen[id] {
				id += "_"
			}
		}
		seen[id] = true
		out[i] = &messages.ToolCallRequest{Id: id, Name: c.GetName(), Arguments: c.GetArguments()}
	}
	return out
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// recordArtifacts appends an artifact_written event for each artifact a tool call
// stored, before the call's tool_result.
func recordArtifacts(b *EventBuilder, s *messages.SessionState, stepID, subAgentID, callID, key string, arts []tools.Artifact) {
	for _, a := range arts {
		b.Add(func(e *messages.Event) {
			e.Payload = &messages.Event_ArtifactWritten{ArtifactWritten: &messages.ArtifactWritten{
				Path: a.Path, ArtifactType: a.Type, Filename: a.Filename, ContentType: a.ContentType, Size: uint64(max(a.Size, 0)),
				StepId: stepID, SubAgentId: subAgentID, CallId: callID, IdempotencyKey: key, Sha256: a.SHA256, Overwrote: a.Overwrote,
			}}
		})
	}
}

// MaxAnswerBytes bounds a model answer (its text, thinking and tool-call arguments
// together): 768 KiB, so that the llm_responded event recording it stays under the
// journal's limit of 1 MiB per event (persistence.MaxEventBytes) with room for its other
// fields. A larger answer is decided as a failed call (not retryable: no retry could be
// recorded either), whichever runner made it, instead of an event the journal refuses on
// every retry of the append.
const MaxAnswerBytes = 768 << 10

// ErrAnswerTooLarge is the error of a model answer over MaxAnswerBytes.
var ErrAnswerTooLarge = errors.New("model answer too large")

// withinAnswerLimit returns r, or a failed copy of it when its answer is over
// MaxAnswerBytes.
func (r *LLMResult) withinAnswerLimit() *LLMResult {
	if r.Err != nil {
		return r
	}
	n := len(r.Content)
	for _, t := range r.Thinking {
		n += len(t.GetThinking()) + len(t.GetSignature()) + len(t.GetRedactedData())
	}
	for _, c := range r.ToolCalls {
		n += len(c.GetId()) + len(c.GetName()) + len(c.GetArguments())
	}
	if n <= MaxAnswerBytes {
		return r
	}
	return &LLMResult{CallID: r.CallID, Model: r.Model, Duration: r.Duration, Usage: r.Usage,
		Err: fmt.Errorf("%w: %d bytes of text, thinking and tool-call arguments; one answer is recorded as one journal event, which holds at most %d bytes: lower the model's max output tokens", ErrAnswerTooLarge, n, MaxAnswerBytes)}
}
