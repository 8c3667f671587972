package main

import (
	"flag"
	"os"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/session/core"
)

// reasoningFlags configure how much models think: --reasoning-effort and
// --thinking-budget (the default of new sessions; a start request's config may set its
// own) and --agent-reasoning (by agent type; envs FATHOM_REASONING_EFFORT,
// FATHOM_THINKING_BUDGET, FATHOM_AGENT_REASONING).
type reasoningFlags struct {
	effort string
	budget uint
	agents string
}

func (f *reasoningFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.effort, "reasoning-effort", os.Getenv("FATHOM_REASONING_EFFORT"),
		"reasoning_effort of new sessions' calls for reasoning models: minimal, low, medium or high; empty sends none (env FATHOM_REASONING_EFFORT)")
	fs.UintVar(&f.budget, "thinking-budget", uint(envUint("FATHOM_THINKING_BUDGET", 0)),
		"extended thinking budget in tokens (Anthropic, at least 1024) of new sessions' calls; 0 = off (env FATHOM_THINKING_BUDGET)")
	fs.StringVar(&f.agents, "agent-reasoning", os.Getenv("FATHOM_AGENT_REASONING"),
		"reasoning by agent type, replacing the session's for that agent's calls: AGENT=EFFORT, AGENT=BUDGET or AGENT=EFFORT:BUDGET, comma-separated; AGENT is orchestrator or an agent's name (researcher, coder, writer, reviewer, or one of the config file's agents), e.g. researcher=high,coder=low:4096 (env FATHOM_AGENT_REASONING)")
}

// apply sets the session configuration's reasoning.
func (f *reasoningFlags) apply(scfg *session.Config) error {
	scfg.Reasoning = core.Reasoning{Effort: f.effort, ThinkingBudget: int(min(f.budget, 1<<30))}
	if err := scfg.Reasoning.Validate(); err != nil {
		return usageError("--reasoning-effort/--thinking-budget: %v", err)
	}
	agents, err := core.ParseAgentReasoning(f.agents)
	if err != nil {
		return usageError("--agent-reasoning: %v", err)
	}
	if len(agents) > 0 {
		scfg.AgentReasoning = agents
	}
	return nil
}
