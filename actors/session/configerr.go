package session

import (
	"errors"
	"fmt"

	"github.com/fathom-agents/fathom/actors/subagent"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/prompts"
)

// Configuration errors. Some failures come from the node's configuration, not from the
// model or the network: a prompt template that does not exist (an agent type without a
// prompt) or does not render with the call's data. Every attempt of the call fails the
// same way, so retrying the step or re-planning the remaining work only wastes calls and
// events: the session fails at once, saying what to fix. A failure that may heal (a
// provider outage, a model's bad answer) keeps its retries and re-plans.

// ConfigError is a failure of the node's configuration that no retry can heal.
type ConfigError struct {
	// What names the configuration item ("prompt template reviewer").
	What string
	// Err is the underlying error.
	Err error
}

// Error implements error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("configuration error: %s: %v", e.What, e.Err)
}

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// isConfigError reports whether err is a configuration error: a ConfigError, or a
// prompt template that is missing or does not render.
func isConfigError(err error) bool {
	var ce *ConfigError
	var te *prompts.TemplateError
	return errors.As(err, &ce) || errors.As(err, &te) || errors.Is(err, prompts.ErrUnknownTemplate)
}

// failSubAgentConfig ends sub-agent id's run after its call failed with a configuration
// error (r.err): the run fails (subagent_completed{action: fail}), its step fails, and
// so does the session, without the retries and re-plans a failed hand-off gets.
func failSubAgentConfig(b *eventBuilder, id string, r *llmResult) {
	st := b.state()
	sa := st.GetSubAgents()[id]
	idx := sa.GetStepIndex()
	step := st.GetSteps()[idx]
	why := fmt.Sprintf("configuration error: llm call %s of sub-agent %s (%s) cannot be made: %v", r.callID, id, sa.GetAgentType(), r.err)
	result := subagent.Facts(&messages.SubagentResult{Status: subagent.StatusFailed, Summary: why}, sa,
		(b.at-sa.GetRunStartedAtUnixNano())/1e6)
	b.add(func(e *messages.Event) {
		e.Payload = &messages.Event_SubagentCompleted{SubagentCompleted: &messages.SubagentCompleted{
			SubAgentId: id, AgentType: sa.GetAgentType(), StepId: sa.GetStepId(), StepIndex: idx, Result: result, Action: subagent.ActionFail,
		}}
	})
	stepID := step.GetStep().GetId()
	b.add(func(e *messages.Event) {
		e.Payload = &messages.Event_StepFailed{StepFailed: &messages.StepFailed{StepId: stepID, StepIndex: idx, Error: why, Attempt: max(step.GetAttempt(), 1)}}
	})
	fail(b, fmt.Sprintf("step %s: %s (not retried or re-planned: every attempt would fail the same way; fix the node's configuration)", stepID, why))
}
