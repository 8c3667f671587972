package prompts

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"text/template"
)

// AgentTemplatePrefix prefixes the names of the templates of agents of the node's own
// ("agents/analyst"), so that an agent's name never clashes with a template's.
const AgentTemplatePrefix = "agents/"

// AgentInfo is an agent of the node's own as the orchestrator lists it: templates call
// {{range agents}} to list them (the embedded orchestrator does, in its team table and
// among the step types).
type AgentInfo struct {
	// Name is the agent's name.
	Name string
	// StepType is the plan step type that delegates to it.
	StepType string
	// Description says what the agent is for.
	Description string
}

// AgentTemplate is the prompt template of an agent of the node's own.
type AgentTemplate struct {
	// Name is the agent's name: the template is AgentTemplatePrefix + Name.
	Name string
	// File is where Text was read from ("" : given inline; errors then name
	// "agent <name>").
	File string
	// Text is the template, with AgentData as its data and the shared partials available.
	Text string
	// Tools are the agent's tools, the sample data the template is checked with.
	Tools []string
}

// Agents returns the agents of the node's own the set lists (nil for a set without).
func (s *Set) Agents() []AgentInfo { return slices.Clone(s.agents) }

// HasAgents reports whether the set lists exactly infos.
func (s *Set) HasAgents(infos []AgentInfo) bool { return slices.Equal(s.agents, infos) }

// WithAgents returns a copy of s that lists infos (the agents template function) and
// holds tmpls, each parsed as AgentTemplatePrefix + its name beside the shared partials.
// Every new template is rendered once with sample data of its agent, and the
// orchestrator with the agents listed: a failure is a [*TemplateError] naming the file.
// s itself is unchanged.
func (s *Set) WithAgents(infos []AgentInfo, tmpls []AgentTemplate) (*Set, error) {
	t, err := s.t.Clone()
	if err != nil {
		return nil, fmt.Errorf("clone prompt templates: %w", err)
	}
	ns := &Set{t: t, files: maps.Clone(s.files), overrides: slices.Clone(s.overrides), agents: slices.Clone(infos)}
	t.Funcs(template.FuncMap{"agents": ns.agentList})
	for _, at := range tmpls {
		name := AgentTemplatePrefix + at.Name
		if _, taken := ns.files[name]; taken {
			return nil, fmt.Errorf("prompt template %s is given twice", name)
		}
		ns.files[name] = at.File
		if at.File == "" {
			ns.files[name] = "agent " + at.Name
		}
		if _, err := t.New(name).Parse(at.Text); err != nil {
			return nil, ns.templateError(name, err)
		}
	}
	for _, at := range tmpls {
		name := AgentTemplatePrefix + at.Name
		d := AgentData{AgentType: at.Name, Goal: "Sample goal", Tools: at.Tools, Workspace: "s-sample/", MaxIterations: 8,
			Step: Step{ID: "s1", Type: at.Name, Description: "Sample step description"}}
		var buf bytes.Buffer
		if err := t.ExecuteTemplate(&buf, name, d); err != nil {
			return nil, ns.templateError(name, err)
		}
	}
	agents := sampleAgents()
	for _, d := range agents[:3] { // the orchestrator in each phase
		var buf bytes.Buffer
		if err := t.ExecuteTemplate(&buf, Orchestrator, d); err != nil {
			return nil, ns.templateError(Orchestrator, err)
		}
	}
	return ns, nil
}

// agentList is the agents template function.
func (s *Set) agentList() []AgentInfo { return s.agents }
