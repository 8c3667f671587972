package subagent

import (
	"slices"
	"strings"
)

// Agent types.
const (
	Researcher = "researcher"
	Coder      = "coder"
	Writer     = "writer"
	Reviewer   = "reviewer"
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

var profiles = map[string]Profile{
	"research": {AgentType: Researcher, Tools: []string{"web_search", "write_todos", "write_artifact", "read_artifact", "list_artifacts", "ask_human"}},
	"code":     {AgentType: Coder, Tools: []string{"code_execute", "write_artifact", "read_artifact", "list_artifacts", "write_todos", "ask_human"}},
	"write":    {AgentType: Writer, Tools: []string{"write_artifact", "read_artifact", "list_artifacts", "ask_human"}},
	"review":   {AgentType: Reviewer, Tools: []string{"read_artifact", "list_artifacts", "code_execute", "ask_human"}},
}

// ProfileFor returns the profile of the sub-agent that runs plan steps of stepType, and
// false when such steps are not delegated (custom and human_input steps are the
// orchestrator's own).
func ProfileFor(stepType string) (Profile, bool) {
	p, ok := profiles[strings.ToLower(stepType)]
	if !ok {
		return Profile{}, false
	}
	p.Tools = slices.Clone(p.Tools)
	p.MaxIterations = DefaultMaxIterations
	return p, true
}

// Delegated reports whether plan steps of stepType run in a sub-agent.
func Delegated(stepType string) bool {
	_, ok := profiles[strings.ToLower(stepType)]
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
