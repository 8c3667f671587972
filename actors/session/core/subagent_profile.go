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

// Profile is what a sub-agent of one agent gets: the tools it may call (those the node
// has), the bound on its LLM calls per run, and its model.
type Profile struct {
	// AgentType is the agent's name (researcher | coder | writer | reviewer for the
	// built-ins); it is the agent_type of its sub-agents.
	AgentType string
	// Tools are the names of the tools the agent may call, when the node has them.
	Tools []string
	// MaxIterations bounds the LLM calls of one run (0: the node's bound).
	MaxIterations uint32
	// Model is the agent's model ("" : the session's).
	Model string
	// Func marks a Go-function agent: its run calls no model.
	Func bool
}

// DefaultMaxIterations bounds a sub-agent run's LLM calls when the node sets no bound.
const DefaultMaxIterations = 10

// ProfileFor returns the profile of the built-in sub-agent that runs plan steps of
// stepType, and false when such steps are not delegated to a built-in agent (custom and
// human_input steps are the orchestrator's own). It is BuiltinAgents' registry's
// [Agents.ProfileFor]; a node with agents of its own resolves through its registry
// (Config.Registry).
func ProfileFor(stepType string) (Profile, bool) { return builtinRegistry.ProfileFor(stepType) }

// Delegated reports whether plan steps of stepType run in a sub-agent: every step type
// but custom and human_input (plan parsing lets only registered agents' types through).
func Delegated(stepType string) bool {
	switch strings.ToLower(strings.TrimSpace(stepType)) {
	case "", "custom", StepTypeHumanInput:
		return false
	}
	return true
}

// ProfileFor returns the profile of the agent that runs plan steps of stepType (its
// tools, its model, its iteration bound; DefaultMaxIterations when it sets none), and
// false when no agent of the registry does. The built-ins' tools are their prompt
// templates' (prompts.DefaultTools): what an agent is told it may call is what it may call.
func (a *Agents) ProfileFor(stepType string) (Profile, bool) {
	s, ok := a.ForStep(stepType)
	if !ok {
		return Profile{}, false
	}
	iters := s.MaxIterations
	if iters == 0 {
		iters = DefaultMaxIterations
	}
	return Profile{AgentType: s.Name, Tools: append(slices.Clone(s.Tools), MemoryTools(s.Memory)...), MaxIterations: iters, Model: s.Model, Func: s.Run != nil}, true
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
