package core

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fathom-agents/fathom/messages"
)

// Reasoning is how much a model thinks on a call: OpenAI reasoning_effort, Anthropic
// extended thinking's budget. Zero asks for neither.
type Reasoning struct {
	// Effort is "minimal", "low", "medium" or "high" (llm.Request.ReasoningEffort).
	Effort string
	// ThinkingBudget, when positive, is the extended-thinking budget in tokens
	// (llm.Request.ThinkingBudget; at least 1024).
	ThinkingBudget int
}

// reasoningEfforts are the accepted Reasoning.Effort values.
var reasoningEfforts = map[string]bool{"": true, "minimal": true, "low": true, "medium": true, "high": true}

// MinThinkingBudget is the smallest extended-thinking budget the API accepts.
const MinThinkingBudget = 1024

// Validate reports an effort the APIs do not know or a budget below MinThinkingBudget.
func (r Reasoning) Validate() error {
	if !reasoningEfforts[r.Effort] {
		return fmt.Errorf("reasoning effort %q is not one of minimal, low, medium, high", r.Effort)
	}
	if r.ThinkingBudget != 0 && r.ThinkingBudget < MinThinkingBudget {
		return fmt.Errorf("thinking budget %d is below the API's minimum of %d tokens", r.ThinkingBudget, MinThinkingBudget)
	}
	return nil
}

// ReasoningFor is the reasoning of the calls of agentType (an agent type, or "" for the
// orchestrator's own calls) in session s: the node's AgentReasoning entry for the type
// when it has one, else the session's (SessionConfig.reasoning_effort,
// thinking_budget, defaulted from the node's Reasoning at start).
func (c Config) ReasoningFor(s *messages.SessionState, agentType string) Reasoning {
	if agentType == "" {
		agentType = OrchestratorAgent
	}
	if r, ok := c.AgentReasoning[agentType]; ok {
		return r
	}
	return Reasoning{Effort: s.GetConfig().GetReasoningEffort(), ThinkingBudget: int(s.GetConfig().GetThinkingBudget())}
}

// OrchestratorAgent is the AgentReasoning key of the orchestrator's own calls (plan,
// steps it runs itself, re-plans, the closing summary).
const OrchestratorAgent = "orchestrator"

// ParseAgentReasoning reads per-agent reasoning settings (--agent-reasoning,
// FATHOM_AGENT_REASONING): comma-separated AGENT=SETTING entries, where AGENT is a
// sub-agent type (researcher, coder, writer, reviewer) or "orchestrator" and SETTING is
// an effort ("high"), a thinking budget in tokens ("4096"), or both ("high:4096"). ""
// is no settings.
func ParseAgentReasoning(text string) (map[string]Reasoning, error) {
	out := map[string]Reasoning{}
	for _, entry := range strings.Split(text, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		agent, setting, ok := strings.Cut(entry, "=")
		agent, setting = strings.TrimSpace(agent), strings.TrimSpace(setting)
		if !ok || agent == "" || setting == "" {
			return nil, fmt.Errorf("agent reasoning %q: want AGENT=EFFORT, AGENT=BUDGET or AGENT=EFFORT:BUDGET", entry)
		}
		// Whether the agent exists is Config.Validate's to say: the node's own agents
		// (the config file's) are not known when the flags are parsed.
		var r Reasoning
		effort, budget, both := strings.Cut(setting, ":")
		if n, err := strconv.Atoi(effort); err == nil && !both {
			effort, budget = "", strconv.Itoa(n)
		}
		r.Effort = strings.ToLower(effort)
		if budget != "" {
			n, err := strconv.Atoi(budget)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("agent reasoning %q: thinking budget %q is not a positive number of tokens", entry, budget)
			}
			r.ThinkingBudget = n
		}
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("agent reasoning %q: %w", entry, err)
		}
		out[agent] = r
	}
	return out, nil
}
