package core

import (
	"fmt"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/messages"
)

// An answer to a plan or re-plan call that is not a usable plan (no JSON object, no
// steps, a cycle, a taken id, ...) is asked again once: plan_failed records the error
// (not retryable, no retry_at) and the next call of the same purpose follows at once,
// carrying the answer and the error (llm_requested.reprompt_answer/reprompt_error), so
// the model sees what it answered and why it could not be used. An unusable answer to
// that call fails the session. The re-prompt counts against max_iterations like any call.

// MaxRepromptAnswerBytes bounds the unusable answer a re-prompt call carries (and shows
// the model); a longer one is cut.
const MaxRepromptAnswerBytes = 8 << 10

// unusablePlan follows an answer (content) to the plan or re-plan call p that parse
// refused with err: the one re-prompt, or the session's failure after it. who names the
// answering role in the failure ("planner", "re-planner"). b holds the answer's
// llm_responded.
func unusablePlan(b *EventBuilder, s *messages.SessionState, p *messages.PendingCall, content, who string, err error) {
	if p.GetRepromptError() != "" {
		fail(b, fmt.Sprintf("%s returned an unusable plan: %v (it was asked again once, with the error of its first answer: %s)", who, err, p.GetRepromptError()))
		return
	}
	attempt := s.GetPlanAttempt()
	if p.GetPurpose() == PurposeReplan {
		attempt = s.GetReplanAttempt()
	}
	msg := fmt.Sprintf("unusable plan: %v", err)
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_PlanFailed{PlanFailed: &messages.PlanFailed{CallId: p.GetCallId(), Error: msg, Attempt: attempt}}
	})
	again := &messages.LlmRequested{RepromptError: err.Error(), RepromptAnswer: truncateText(content, MaxRepromptAnswerBytes)}
	if p.GetPurpose() == PurposeReplan {
		replanCallWith(b, p.GetStepId(), again)
		return
	}
	iteration := s.GetIterations() + 1
	if !withinBudget(b, s, iteration, nil) {
		return
	}
	again.CallId, again.Purpose = planningCall(s, s.GetPlanAttempt()+1)
	again.Model, again.Iteration = s.GetConfig().GetModel(), iteration
	b.Add(func(e *messages.Event) { e.Payload = &messages.Event_LlmRequested{LlmRequested: again} })
}

// repromptMessages are the messages a re-prompt call adds after its brief: the unusable
// answer and what was wrong with it (none for a first call).
func repromptMessages(p *messages.PendingCall) []llm.Message {
	if p.GetRepromptError() == "" {
		return nil
	}
	return []llm.Message{
		{Role: "assistant", Content: p.GetRepromptAnswer()},
		{Role: "user", Content: fmt.Sprintf("That answer cannot be used as a plan: %s.\n"+
			"Answer again with ONE JSON object of the form {\"steps\":[...]} as described, fixing this; nothing else.", p.GetRepromptError())},
	}
}
