package core

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/prompts"
)

func agentConfig(agents ...AgentSpec) Config {
	cfg := DefaultConfig()
	cfg.Agents = agents
	return cfg.WithNode(nil, []string{"write_artifact", "read_artifact", "web_search"})
}

var analyst = AgentSpec{Name: "analyst", Description: "Explains anomalies in order data", Prompt: "FATHOM-ROLE: analyst\n{{template \"_shared/handoff\" .}}",
	Tools: []string{"write_artifact", "code_execute"}, Model: "analyst-model", MaxIterations: 3}

// plannedWith starts a session and answers its plan call with plan.
func plannedWith(t *testing.T, cfg Config, plan string) (*messages.SessionState, []*messages.Event) {
	t.Helper()
	s := NewState("s1")
	evs, err := DecideStart(s, &messages.StartRequest{CommandId: "c1", Goal: "explain order A-1"}, cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	fold(t, s, evs)
	evs = DecideLLMResult(s, &LLMResult{CallID: s.GetPending().GetCallId(), Content: plan}, cfg, t0)
	fold(t, s, evs)
	return s, evs
}

// TestAPlanDelegatesToACustomAgentByName: a step whose type is a custom agent's name runs
// in a sub-agent of that agent, with its tools (those the node has), its iteration bound
// and its model.
func TestAPlanDelegatesToACustomAgentByName(t *testing.T) {
	s, evs := plannedWith(t, agentConfig(analyst), `{"steps":[{"id":"s1","type":"Analyst","description":"explain"}]}`)
	if got := types(evs); got != "llm_responded,plan_created,step_started,subagent_started,llm_requested" {
		t.Fatalf("events %s", got)
	}
	started := evs[3].GetSubagentStarted()
	if started.GetAgentType() != "analyst" || started.GetSubAgentId() != "analyst-1" || started.GetMaxIterations() != 3 ||
		strings.Join(started.GetTools(), ",") != "write_artifact" {
		t.Fatalf("subagent_started %v", started)
	}
	if m := evs[4].GetLlmRequested().GetModel(); m != "analyst-model" {
		t.Fatalf("the analyst's call names model %q", m)
	}
	if s.GetSteps()[0].GetStep().GetType() != "analyst" {
		t.Fatalf("step type %q", s.GetSteps()[0].GetStep().GetType())
	}
}

// TestUnknownStepTypesWithCustomAgents: with agents of the node's own an unknown type is
// refused, naming the agents (the planner is asked again); with the built-ins alone it
// stays custom.
func TestUnknownStepTypesWithCustomAgents(t *testing.T) {
	_, evs := plannedWith(t, agentConfig(analyst), `{"steps":[{"id":"s1","type":"analyzer","description":"explain"}]}`)
	if got := types(evs); got != "llm_responded,plan_failed,llm_requested" {
		t.Fatalf("events %s", got)
	}
	want := `unusable plan: step s1: type "analyzer" names no agent (step types: analyst, code, custom, human_input, research, review, write)`
	if msg := evs[1].GetPlanFailed().GetError(); msg != want {
		t.Fatalf("plan_failed %q\nwant %q", msg, want)
	}
	s, _ := plannedWith(t, agentConfig(), `{"steps":[{"id":"s1","type":"analyzer","description":"explain"}]}`)
	if typ := s.GetSteps()[0].GetStep().GetType(); typ != "custom" {
		t.Fatalf("without custom agents the type became %q", typ)
	}
}

// TestAStepOfAnAgentTheNodeLacksFailsTheSession: a node restarted without the agent a
// step names says so instead of running it as something else.
func TestAStepOfAnAgentTheNodeLacksFailsTheSession(t *testing.T) {
	s, _ := plannedWith(t, agentConfig(analyst, AgentSpec{Name: "first", Description: "d", Prompt: "p"}),
		`{"steps":[{"id":"s0","type":"first","description":"go first"},{"id":"s1","type":"analyst","description":"explain","dependencies":["s0"]}]}`)
	sa := s.GetSubAgents()["first-1"]
	handoff := "```json\n{\"status\":\"completed\",\"summary\":\"done\"}\n```"
	evs := DecideLLMResult(s, &LLMResult{CallID: sa.GetPending().GetCallId(), Content: handoff}, agentConfig(AgentSpec{Name: "first", Description: "d", Prompt: "p"}), t0)
	last := evs[len(evs)-1].GetSessionFailed()
	if last == nil || !strings.Contains(last.GetError(), `step s1 has type "analyst", which names no agent of this node`) {
		t.Fatalf("events %s, last %v", types(evs), evs[len(evs)-1])
	}
}

// TestGoFunctionAgentCallsAreRecordedLikeModelCalls: a Go-function agent's run is one
// call of model go:NAME whose answer is its hand-off.
func TestGoFunctionAgentCallsAreRecordedLikeModelCalls(t *testing.T) {
	auditor := AgentSpec{Name: "auditor", Description: "audits", Run: func(context.Context, Brief) (*messages.SubagentResult, error) { return nil, errors.New("unused") }}
	cfg := agentConfig(auditor)
	s, evs := plannedWith(t, cfg, `{"steps":[{"id":"s1","type":"auditor","description":"audit"}]}`)
	if m := evs[len(evs)-1].GetLlmRequested().GetModel(); m != "go:auditor" {
		t.Fatalf("model %q", m)
	}
	answer := FuncAnswer(&messages.SubagentResult{Summary: "all good", Confidence: 0.7, Blockers: []string{"none really"}})
	sa := s.GetSubAgents()["auditor-1"]
	if b := FuncBrief(s, sa); b.Agent != "auditor" || b.Step.GetId() != "s1" || !strings.Contains(b.Task, "audit") || b.Attempt != 1 {
		t.Fatalf("brief %+v", b)
	}
	evs = DecideLLMResult(s, &LLMResult{CallID: sa.GetPending().GetCallId(), Content: answer, Model: FuncModel("auditor")}, cfg, t0)
	var done *messages.SubagentCompleted
	for _, ev := range evs {
		if c := ev.GetSubagentCompleted(); c != nil {
			done = c
		}
	}
	r := done.GetResult()
	if r.GetStatus() != StatusCompleted || r.GetSummary() != "all good" || r.GetConfidence() != 0.7 || r.GetBlockers()[0] != "none really" || r.GetParseError() != "" {
		t.Fatalf("hand-off %v", r)
	}
}

func TestNewAgentsRefusesBadSpecs(t *testing.T) {
	for _, c := range []struct {
		spec AgentSpec
		want error
	}{
		{AgentSpec{Name: "writer", Description: "d", Prompt: "p"}, ErrAgentName},
		{AgentSpec{Name: "human_input", Description: "d", Prompt: "p"}, ErrAgentName},
		{AgentSpec{Name: "Summarizer", Description: "d", Prompt: "p"}, ErrAgentName},
		{AgentSpec{Name: "9lives", Description: "d", Prompt: "p"}, ErrAgentName},
		{AgentSpec{Name: "a", Prompt: "p"}, ErrAgentSpec},
		{AgentSpec{Name: "a", Description: "d", Prompt: "p", Tools: []string{" "}}, ErrAgentSpec},
	} {
		if _, err := NewAgents(c.spec); !errors.Is(err, c.want) {
			t.Fatalf("NewAgents(%+v) = %v, want %v", c.spec, err, c.want)
		}
	}
	if _, err := NewAgents(analyst, analyst); !errors.Is(err, ErrAgentName) {
		t.Fatalf("twice: %v", err)
	}
	a, err := NewAgents(analyst)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CheckTools(func(n string) bool { return n == "write_artifact" }); err == nil || !strings.Contains(err.Error(), `agent analyst: tool "code_execute"`) {
		t.Fatalf("CheckTools: %v", err)
	}
}

// TestPromptSetListsTheAgentsAndRendersTheirTemplates: the orchestrator's team table and
// step types name the custom agents; their templates render with the shared partials;
// without custom agents the orchestrator's prompt is what it always was.
func TestPromptSetListsTheAgentsAndRendersTheirTemplates(t *testing.T) {
	base, err := prompts.Default()
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAgents(analyst)
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.PromptSet(base)
	if err != nil {
		t.Fatal(err)
	}
	data := prompts.AgentData{AgentType: prompts.Orchestrator, Phase: prompts.PhasePlan, Goal: "g", MaxSteps: 5}
	orch, err := p.Render(prompts.Orchestrator, data)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := base.Render(prompts.Orchestrator, data)
	if err != nil {
		t.Fatal(err)
	}
	row := "| custom | you, with the node's tools | small glue work that needs no specialist |\n| analyst | the analyst sub-agent | Explains anomalies in order data |\n\n"
	if !strings.Contains(orch, row) || !strings.Contains(orch, `"type": one of research, code, write, review, human_input, custom, analyst.`) {
		t.Fatalf("the orchestrator's prompt does not list the analyst:\n%s", orch)
	}
	if strings.Contains(plain, "analyst") || strings.Replace(orch, "| analyst | the analyst sub-agent | Explains anomalies in order data |\n", "", 1) !=
		strings.Replace(plain, "custom.", "custom, analyst.", 1) {
		t.Fatalf("listing the agent changed more than its row and type")
	}
	spec, _ := a.ByName("analyst")
	text, err := p.Render(spec.Template(), prompts.AgentData{AgentType: "analyst", Tools: []string{"write_artifact"}})
	if err != nil || !strings.HasPrefix(text, "FATHOM-ROLE: analyst\n## Hand-off") {
		t.Fatalf("analyst prompt %q, %v", text, err)
	}
	if again, err := a.PromptSet(p); err != nil || again != p {
		t.Fatalf("PromptSet of a set that has the agents made another: %v", err)
	}
}

// TestReasoningForCustomAgents: per-agent reasoning may name the node's own agents (the
// flag is parsed before the config file's agents are known; Validate checks the names).
func TestReasoningForCustomAgents(t *testing.T) {
	r, err := ParseAgentReasoning("analyst=high,orchestrator=1024")
	if err != nil {
		t.Fatal(err)
	}
	cfg := agentConfig(analyst)
	cfg.AgentReasoning = r
	if err := cfg.Validate(); err != nil {
		t.Fatalf("reasoning for a custom agent: %v", err)
	}
	if got := cfg.ReasoningFor(nil, "analyst"); got.Effort != "high" {
		t.Fatalf("analyst's reasoning %+v, want effort high", got)
	}
	cfg.AgentReasoning = map[string]Reasoning{"nobody": {Effort: "low"}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `unknown agent "nobody"`) {
		t.Fatalf("reasoning for an unknown agent: %v", err)
	}
}
