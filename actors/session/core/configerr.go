package core

import (
	"errors"
	"fmt"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/prompts"
)

// Configuration errors. Some failures come from the node's configuration, not from the
// model or the network: a prompt template that does not exist (an agent type without a
// prompt) or does not render with the call's data; a tool the node has not configured
// (no sandbox, no search provider: tools.ToolError.Config). Every attempt of the call fails the
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

// IsConfigError reports whether err is a configuration error: a ConfigError, or a
// prompt template that is missing or does not render.
func IsConfigError(err error) bool {
	var ce *ConfigError
	var te *prompts.TemplateError
	return errors.As(err, &ce) || errors.As(err, &te) || errors.Is(err, prompts.ErrUnknownTemplate)
}

// failSubAgentConfig ends sub-agent id's run after its call failed with a configuration
// error (r.err): the run fails (subagent_completed{action: fail}), its step fails, and
// so does the session, without the retries and re-plans a failed hand-off gets.
func failSubAgentConfig(b *EventBuilder, id string, r *LLMResult) {
	sa := b.state().GetSubAgents()[id]
	why := fmt.Sprintf("configuration error: llm call %s of sub-agent %s (%s) cannot be made: %v", r.CallID, id, sa.GetAgentType(), r.Err)
	failRun(b, id, &messages.SubagentResult{Status: StatusFailed, Summary: why}, why)
}

// finishHandoff is finishSubAgent for a sub-agent's final answer, except that a
// "failed" hand-off of a run that met a tool the node has not configured
// (run_config_error) fails the session at once: another attempt or a re-planned step
// would meet the same unconfigured tool.
func finishHandoff(b *EventBuilder, cfg Config, id string, result *messages.SubagentResult) {
	sa := b.state().GetSubAgents()[id]
	if result.GetStatus() != StatusFailed || sa.GetRunConfigError() == "" {
		finishSubAgent(b, cfg, id, result)
		return
	}
	why := fmt.Sprintf("configuration error: sub-agent %s (%s) failed after %s (%s)", id, sa.GetAgentType(), sa.GetRunConfigError(), result.GetSummary())
	failRun(b, id, result, why)
}

// failRun records the end of sub-agent id's run with result and action fail, the
// failure of its step and of the session, all for reason why.
func failRun(b *EventBuilder, id string, result *messages.SubagentResult, why string) {
	st := b.state()
	sa := st.GetSubAgents()[id]
	idx := sa.GetStepIndex()
	step := st.GetSteps()[idx]
	result = HandoffFacts(result, sa, (b.at-sa.GetRunStartedAtUnixNano())/1e6)
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_SubagentCompleted{SubagentCompleted: &messages.SubagentCompleted{
			SubAgentId: id, AgentType: sa.GetAgentType(), StepId: sa.GetStepId(), StepIndex: idx, Result: result, Action: ActionFail,
		}}
	})
	stepID := step.GetStep().GetId()
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_StepFailed{StepFailed: &messages.StepFailed{StepId: stepID, StepIndex: idx, Error: why, Attempt: max(step.GetAttempt(), 1)}}
	})
	fail(b, fmt.Sprintf("step %s: %s (not retried or re-planned: every attempt would fail the same way; fix the node's configuration)", stepID, why))
}
