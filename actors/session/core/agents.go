package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/prompts"
)

// The agent registry. An agent is what a delegated plan step runs in: a spec with a
// name, a description the planner reads to choose it, a prompt template, the tools it
// may call, a model and a bound on its model calls, or a Go function that receives the
// brief and returns the hand-off. The built-in researcher, coder, writer and reviewer
// are specs like any other (BuiltinAgents); a node adds its own (Config.Agents), and a
// plan step's type names the agent that runs it: research, code, write and review for
// the built-ins (their step types), the agent's name for the others.
//
// Apply never consults the registry: a step is delegated when its type is neither
// custom nor human_input (plan parsing lets only registered types through), so folding
// a journal needs no configuration. Deciding does: a delegated step whose type names no
// agent of the node (the node was restarted without it) fails the session, saying so.

// AgentFunc is a Go-function agent (the seed's custom executor): it receives the brief of
// its step and returns the hand-off, recorded exactly like a model agent's (its status,
// summary, recommendations, blockers and confidence; the facts code knows are added).
// An error fails the run like a failed model call: the step is retried while attempts
// are left. ctx ends when the session stops the run (cancel, node stop) or after the
// node's LLM timeout.
type AgentFunc func(ctx context.Context, b Brief) (*messages.SubagentResult, error)

// Brief is what a Go-function agent receives.
type Brief struct {
	// SessionID is the session's id; Goal its goal.
	SessionID, Goal string
	// Agent is the agent's name.
	Agent string
	// Step is the plan step the agent runs.
	Step *messages.PlanStep
	// Attempt counts the step's runs, from 1.
	Attempt uint32
	// Task is the task brief a model agent would get for the step (goal, step, upstream
	// hand-offs, the workspace's artifacts).
	Task string
	// Upstream are the hand-offs of the steps Step depends on, in dependency order.
	Upstream []UpstreamHandoff
	// Workspace is the session's artifact prefix, "{session_id}/".
	Workspace string
}

// UpstreamHandoff is the hand-off of a step the brief's step depends on.
type UpstreamHandoff struct {
	// StepID and StepType name the step.
	StepID, StepType string
	// Output is the step's output as the orchestrator reads it (HandoffText for a
	// delegated step).
	Output string
	// Result is the structured hand-off of the step's last sub-agent run (nil for a step
	// the orchestrator ran itself).
	Result *messages.SubagentResult
}

// AgentSpec is one agent of the registry.
type AgentSpec struct {
	// Name names the agent ("analyst"); it is the step type that delegates to it and the
	// agent_type of its sub-agents ("analyst-1"). Letters, digits, '_' and '-', starting
	// with a letter, at most 32.
	Name string
	// Description says what the agent is for: the planner reads it to choose the agent.
	Description string
	// Prompt is the agent's system prompt, a text/template with the data of
	// prompts.AgentData and the shared partials ({{template "_shared/handoff" .}}).
	// Required for a model agent of the node's own; empty for a built-in (its embedded
	// template) and a Go-function agent.
	Prompt string
	// PromptFile is where Prompt was read from, for errors ("" : given inline).
	PromptFile string
	// Tools are the tools the agent may call (built-in names or {server}__{tool}).
	Tools []string
	// Model is the agent's model; empty means the session's.
	Model string
	// MaxIterations bounds the model calls of one run; 0 means the node's
	// SubAgentMaxIterations.
	MaxIterations uint32
	// Memory is what the agent may do with the user's long-term memory (on a node with
	// long-term memory): MemoryNone ("" means it), MemoryRead (the user's most relevant
	// memories in its context, and recall) or MemoryReadWrite (also remember and forget).
	Memory string
	// Run, when set, makes the agent a Go-function agent: Run produces the hand-off and
	// no model is called (Prompt, Tools and Model must be empty).
	Run AgentFunc
	// WebhookURL, when set, is the webhook_url of the sessions started for the agent (its
	// tool on the node's MCP server) whose start names none: where the node POSTs their
	// signed notifications (package webhooks; the node needs a webhook secret).
	WebhookURL string

	// stepType is the step type that delegates to the agent (the name, but for the
	// built-ins); template is its prompt template's name.
	stepType, template string
}

// StepType is the plan step type that delegates to the agent.
func (a AgentSpec) StepType() string {
	if a.stepType != "" {
		return a.stepType
	}
	return a.Name
}

// Template is the name of the agent's prompt template in the node's prompts.Set.
func (a AgentSpec) Template() string {
	if a.template != "" {
		return a.template
	}
	return prompts.AgentTemplatePrefix + a.Name
}

// Builtin reports whether a is one of the built-in agents.
func (a AgentSpec) Builtin() bool { return a.stepType != "" }

// BuiltinAgents returns the built-in agents: researcher, coder, writer and reviewer,
// with their embedded prompts and default tools (prompts.SubAgentTypes,
// prompts.DefaultTools).
func BuiltinAgents() []AgentSpec {
	desc := map[string]string{
		Researcher: "finds, checks and summarises information (web search, notes under research/)",
		Coder:      "writes and runs programs, analyses and tests in a sandbox (code under code/)",
		Writer:     "produces documents, reports and answers in prose (drafts under drafts/)",
		Reviewer:   "checks earlier work against the goal and answers approve, revise or reject",
	}
	types := make([]string, 0, len(prompts.SubAgentTypes))
	for typ := range prompts.SubAgentTypes {
		types = append(types, typ)
	}
	slices.Sort(types)
	out := make([]AgentSpec, 0, len(types))
	for _, typ := range types {
		name := prompts.SubAgentTypes[typ]
		out = append(out, AgentSpec{Name: name, Description: desc[name], Tools: slices.Clone(prompts.DefaultTools[name]),
			stepType: typ, template: name})
	}
	return out
}

// Agents is a registry of agents: the built-ins and a node's own. It is immutable and
// safe for concurrent use.
type Agents struct {
	specs  []AgentSpec
	byType map[string]int
	byName map[string]int
}

// Typed errors of NewAgents.
var (
	// ErrAgentName is an agent name that is not valid or is taken (by another agent, a
	// built-in agent or step type, or a prompt template).
	ErrAgentName = errors.New("agent name")
	// ErrAgentSpec is a spec that is incomplete or contradictory.
	ErrAgentSpec = errors.New("agent spec")
)

// validAgentName is what an agent name looks like.
var validAgentName = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_-]{0,31}$`)

// reservedNames are names an agent of the node's own may not take: the built-in agents
// and step types, and the other top-level prompt templates.
func reservedNames() map[string]string {
	out := map[string]string{
		StepTypeHumanInput: "a built-in step type", "custom": "a built-in step type",
		prompts.Orchestrator: "the orchestrator", prompts.Executor: "a prompt template", prompts.Summarizer: "a prompt template",
	}
	for typ, name := range prompts.SubAgentTypes {
		out[typ] = "a built-in step type"
		out[name] = "a built-in agent"
	}
	return out
}

// NewAgents returns the registry of the built-in agents and custom (the node's own, in
// order). A custom agent needs a valid name no other agent, built-in agent or step type
// takes, a description, and a prompt or a Run function (not both).
func NewAgents(custom ...AgentSpec) (*Agents, error) {
	a := &Agents{byType: map[string]int{}, byName: map[string]int{}}
	for _, s := range BuiltinAgents() {
		a.add(s)
	}
	reserved := reservedNames()
	for i, s := range custom {
		if err := checkSpec(s, reserved, a); err != nil {
			return nil, fmt.Errorf("agents[%d]: %w", i, err)
		}
		s.Tools, s.stepType, s.template = slices.Clone(s.Tools), "", ""
		a.add(s)
	}
	return a, nil
}

func checkSpec(s AgentSpec, reserved map[string]string, a *Agents) error {
	switch {
	case !validAgentName.MatchString(s.Name):
		return fmt.Errorf("%w: %q is not valid: 1 to 32 letters, digits, '_' or '-', starting with a letter", ErrAgentName, s.Name)
	case reserved[strings.ToLower(s.Name)] != "":
		return fmt.Errorf("%w: %q is taken: it names %s", ErrAgentName, s.Name, reserved[strings.ToLower(s.Name)])
	case a.has(s.Name):
		return fmt.Errorf("%w: %q is given twice", ErrAgentName, s.Name)
	case strings.TrimSpace(s.Description) == "":
		return fmt.Errorf("%w: agent %s: the description is empty (the planner reads it to choose the agent)", ErrAgentSpec, s.Name)
	case s.Run != nil && (s.Prompt != "" || len(s.Tools) > 0 || s.Model != ""):
		return fmt.Errorf("%w: agent %s: a Go-function agent (Run) has no prompt, tools or model", ErrAgentSpec, s.Name)
	case s.Run == nil && strings.TrimSpace(s.Prompt) == "":
		return fmt.Errorf("%w: agent %s: the prompt is empty (give a prompt template or a Run function)", ErrAgentSpec, s.Name)
	}
	for _, t := range s.Tools {
		if strings.TrimSpace(t) == "" {
			return fmt.Errorf("%w: agent %s: a tool name is empty", ErrAgentSpec, s.Name)
		}
		if slices.Contains(MemoryTools(MemoryReadWrite), t) {
			return fmt.Errorf("%w: agent %s: %s is given by the agent's memory setting (memory: read or readwrite), not by its tools", ErrAgentSpec, s.Name, t)
		}
	}
	switch s.Memory {
	case "", MemoryNone, MemoryRead, MemoryReadWrite:
	default:
		return fmt.Errorf("%w: agent %s: memory %q: want read, readwrite or none", ErrAgentSpec, s.Name, s.Memory)
	}
	if s.Run != nil && s.Memory != "" && s.Memory != MemoryNone {
		return fmt.Errorf("%w: agent %s: a Go-function agent (Run) has no memory", ErrAgentSpec, s.Name)
	}
	return nil
}

func (a *Agents) has(name string) bool {
	_, ok := a.byName[strings.ToLower(name)]
	return ok
}

func (a *Agents) add(s AgentSpec) {
	a.specs = append(a.specs, s)
	a.byType[strings.ToLower(s.StepType())] = len(a.specs) - 1
	a.byName[strings.ToLower(s.Name)] = len(a.specs) - 1
}

// builtinRegistry is the registry of the built-in agents alone.
var builtinRegistry = func() *Agents {
	a, err := NewAgents()
	if err != nil {
		panic(err) // the built-ins are fixed: this cannot happen
	}
	return a
}()

// ForStep returns the agent that runs plan steps of stepType, and false when no agent
// does (custom and human_input steps are the orchestrator's own).
func (a *Agents) ForStep(stepType string) (AgentSpec, bool) {
	i, ok := a.byType[strings.ToLower(strings.TrimSpace(stepType))]
	if !ok {
		return AgentSpec{}, false
	}
	return a.specs[i], true
}

// ByName returns the agent named name (the agent_type of its sub-agents).
func (a *Agents) ByName(name string) (AgentSpec, bool) {
	i, ok := a.byName[strings.ToLower(name)]
	if !ok {
		return AgentSpec{}, false
	}
	return a.specs[i], true
}

// All returns every agent: the built-ins, then the node's own in order.
func (a *Agents) All() []AgentSpec { return slices.Clone(a.specs) }

// Custom returns the node's own agents, in order.
func (a *Agents) Custom() []AgentSpec {
	var out []AgentSpec
	for _, s := range a.specs {
		if !s.Builtin() {
			out = append(out, s)
		}
	}
	return out
}

// StepTypes returns the step types a plan may use: the built-in ones and each custom
// agent's name, sorted.
func (a *Agents) StepTypes() []string {
	out := make([]string, 0, len(stepTypes)+len(a.specs))
	for t := range stepTypes {
		out = append(out, t)
	}
	for _, s := range a.Custom() {
		out = append(out, s.StepType())
	}
	sort.Strings(out)
	return out
}

// stepType returns typ's canonical form when a plan may use it.
func (a *Agents) stepType(typ string) (string, bool) {
	typ = strings.ToLower(strings.TrimSpace(typ))
	if stepTypes[typ] {
		return typ, true
	}
	if s, ok := a.ForStep(typ); ok {
		return s.StepType(), true
	}
	return typ, false
}

// strictTypes reports whether a plan's unknown step types are refused: with agents of the
// node's own, a type that names none of them is most likely a misspelt agent. With the
// built-ins alone an unknown type becomes custom, as it always did.
func (a *Agents) strictTypes() bool { return len(a.specs) > len(builtinRegistry.specs) }

// UnknownAgentToolError is an agent's tool the node does not have (CheckTools: an MCP
// server did not list it, or no program tool has the name). It wraps ErrAgentSpec.
type UnknownAgentToolError struct {
	// Agent is the agent's name; Tool the tool it names.
	Agent, Tool string
}

func (e *UnknownAgentToolError) Error() string {
	return fmt.Sprintf("%v: agent %s: tool %q: the node has no such tool (a built-in tool, one of the program's, or {server}__{tool} of a configured MCP server)", ErrAgentSpec, e.Agent, e.Tool)
}

// Unwrap returns ErrAgentSpec.
func (e *UnknownAgentToolError) Unwrap() error { return ErrAgentSpec }

// CheckTools reports the first tool of a custom agent that has does not know, naming the
// agent and the tool (the built-ins get the tools of their profile the node has).
func (a *Agents) CheckTools(has func(name string) bool) error {
	for _, s := range a.Custom() {
		for _, t := range s.Tools {
			if !has(t) {
				return &UnknownAgentToolError{Agent: s.Name, Tool: t}
			}
		}
	}
	return nil
}

// PromptSet returns p with the custom agents' prompt templates and the agents the
// orchestrator lists; p itself when it already has them (or there are none).
func (a *Agents) PromptSet(p *prompts.Set) (*prompts.Set, error) {
	var infos []prompts.AgentInfo
	var tmpls []prompts.AgentTemplate
	for _, s := range a.Custom() {
		infos = append(infos, prompts.AgentInfo{Name: s.Name, StepType: s.StepType(), Description: s.Description})
		if s.Run == nil {
			tmpls = append(tmpls, prompts.AgentTemplate{Name: s.Name, File: s.PromptFile, Text: s.Prompt, Tools: s.Tools})
		}
	}
	if len(infos) == 0 || p.HasAgents(infos) {
		return p, nil
	}
	return p.WithAgents(infos, tmpls)
}

// FuncModel is the model recorded for the runs of Go-function agent name: no model is
// called, the function answers.
func FuncModel(name string) string { return "go:" + name }

// SubAgentModel is the model of agentType's sub-agents in session s: the agent's own
// Model, else the session's; FuncModel for a Go-function agent.
func (c Config) SubAgentModel(s *messages.SessionState, agentType string) string {
	spec, ok := c.Registry().ByName(agentType)
	switch {
	case ok && spec.Run != nil:
		return FuncModel(spec.Name)
	case ok && spec.Model != "":
		return spec.Model
	}
	return s.GetConfig().GetModel()
}

// FuncBrief is the brief of sub-agent sa's current run, for its agent's Go function.
func FuncBrief(s *messages.SessionState, sa *messages.SubagentState) Brief {
	step := &messages.PlanStep{}
	var attempt uint32
	if i := int(sa.GetStepIndex()); i < len(s.GetSteps()) {
		step, attempt = s.GetSteps()[i].GetStep(), max(s.GetSteps()[i].GetAttempt(), 1)
	}
	b := Brief{SessionID: s.GetSessionId(), Goal: s.GetGoal(), Agent: sa.GetAgentType(), Step: step, Attempt: attempt,
		Workspace: s.GetSessionId() + "/"}
	for _, m := range sa.GetTranscript() {
		if m.GetRole() == "user" {
			b.Task = m.GetContent()
		}
	}
	for _, dep := range step.GetDependencies() {
		i, ok := StepIndexByID(s, dep)
		if !ok {
			continue
		}
		st := s.GetSteps()[i]
		up := UpstreamHandoff{StepID: dep, StepType: st.GetStep().GetType(), Output: st.GetOutput()}
		var last *messages.SubagentState
		for _, other := range s.GetSubAgents() {
			if other.GetStepId() == dep && other.GetResult() != nil && (last == nil || other.GetRunStartedSeq() > last.GetRunStartedSeq()) {
				last = other
			}
		}
		if last != nil {
			up.Result = last.GetResult()
		}
		b.Upstream = append(b.Upstream, up)
	}
	return b
}

// FuncAnswer renders the hand-off a Go-function agent returned as the answer a model
// agent ends its run with (a ```json fence), so that it is recorded (llm_responded) and
// read (ParseHandoff) exactly like one. An empty status is "completed".
func FuncAnswer(r *messages.SubagentResult) string {
	status := r.GetStatus()
	if status == "" {
		status = StatusCompleted
	}
	obj := map[string]any{
		"status": status, "summary": r.GetSummary(), "confidence": r.GetConfidence(),
		"recommendations": nonNil(r.GetRecommendations()), "blockers": nonNil(r.GetBlockers()),
	}
	data, err := json.Marshal(obj)
	if err != nil {
		// Strings, lists of strings and a float: only a NaN confidence can fail.
		obj["confidence"] = 0
		data, _ = json.Marshal(obj)
	}
	return "```json\n" + string(data) + "\n```"
}

func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

// HasTool reports whether the node has tool name (known once WithNode ran).
func (c Config) HasTool(name string) bool { return c.hasTool(name) }
