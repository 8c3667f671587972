package core

import (
	"slices"
	"strings"

	"github.com/fathom-agents/fathom/prompts"
)

// Agent types (also the names of their prompt templates).
const (
	Researcher = prompts.Researcher
	Coder      = prompts.Coder
	Writer     = prompts.Writer
	Reviewer   = prompts.Reviewer
)

// Profile is what a sub-agent of one type gets: the tools it may call (those the node
// has) and the bound on its LLM calls per run.
type Profile struct {
	// AgentType is researcher | coder | writer | reviewer; it is also the name of the
	// agent's prompt template.
	AgentType string
	// Tools are the names of the tools the agent may call, when the node has them.
	Tools []string
	// MaxIterations bounds the LLM calls of one run.
	MaxIterations uint32
}

// DefaultMaxIterations bounds a sub-agent run's LLM calls when the node sets no bound.
const DefaultMaxIterations = 10

// ProfileFor returns the profile of the sub-agent that runs plan steps of stepType, and
// false when such steps are not delegated (custom and human_input steps are the
// orchestrator's own). The agent types and their default tools are the prompt
// templates' (prompts.SubAgentTypes, prompts.DefaultTools): what an agent is told it
// may call is what it may call.
func ProfileFor(stepType string) (Profile, bool) {
	agent, ok := prompts.SubAgentTypes[strings.ToLower(stepType)]
	if !ok {
		return Profile{}, false
	}
	return Profile{AgentType: agent, Tools: slices.Clone(prompts.DefaultTools[agent]), MaxIterations: DefaultMaxIterations}, true
}

// Delegated reports whether plan steps of stepType run in a sub-agent.
func Delegated(stepType string) bool {
	_, ok := prompts.SubAgentTypes[strings.ToLower(stepType)]
	return ok
}

// AvailableTools keeps the profile's tools for which has reports true, in profile order.
func (p Profile) AvailableTools(has func(name string) bool) []string {
	out := make([]string, 0, len(p.Tools))
	for _, t := range p.Tools {
		if has(t) {
			out = append(out, t)
		}
	}
	return out
}
