package fathom_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
)

func TestValidateAgents(t *testing.T) {
	run := func(context.Context, fathom.Brief) (*fathom.Handoff, error) { return &fathom.Handoff{}, nil }
	for _, c := range []struct {
		name   string
		agents []fathom.Agent
		want   string
	}{
		{"a spec", []fathom.Agent{{Name: "analyst", Description: "d", Prompt: "p {{.Goal}}"}}, ""},
		{"a function", []fathom.Agent{{Name: "auditor", Description: "d", Run: run}}, ""},
		{"a built-in's name", []fathom.Agent{{Name: "coder", Description: "d", Prompt: "p"}}, `"coder" is taken: it names a built-in agent`},
		{"twice", []fathom.Agent{{Name: "a", Description: "d", Run: run}, {Name: "a", Description: "d", Run: run}}, `agents[1]: agent name: "a" is given twice`},
		{"no description", []fathom.Agent{{Name: "a", Prompt: "p"}}, "the description is empty"},
		{"no prompt", []fathom.Agent{{Name: "a", Description: "d"}}, "the prompt is empty"},
		{"a function with a prompt", []fathom.Agent{{Name: "a", Description: "d", Prompt: "p", Run: run}}, "a Go-function agent (Run) has no prompt, tools or model"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := fathom.DefaultConfig()
			cfg.Agents = c.agents
			err := cfg.Validate()
			if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("Validate() = %v, want %q", err, c.want)
			}
		})
	}
}

// TestStartRefusesAnAgentWithAToolTheNodeLacks: an agent's tools are checked against the
// node's when it starts, naming the agent and the tool.
func TestStartRefusesAnAgentWithAToolTheNodeLacks(t *testing.T) {
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Agents = []fathom.Agent{{Name: "analyst", Description: "d", Prompt: "p", Tools: []string{"write_artifact", "orders__lookup_order"}}}
	n, err := fathom.Start(context.Background(), cfg)
	if err == nil {
		_ = n.Close(context.Background())
		t.Fatal("the node started")
	}
	if !strings.Contains(err.Error(), `agent analyst: tool "orders__lookup_order": the node has no such tool`) {
		t.Fatalf("error %v", err)
	}
}

// TestGoFunctionAgentGetsTheBriefAndHandsOff: a Go-function agent planned after a
// researcher gets the goal, its step, the task brief and the researcher's hand-off; a
// run that returns an error is retried like a failed model call, and the hand-off of the
// run that succeeds is recorded like a model agent's (subagent_completed, the step's
// output, the synthesis's input).
func TestGoFunctionAgentGetsTheBriefAndHandsOff(t *testing.T) {
	script, err := mock.ParseScript([]byte(`{"rules":[
 {"system_match":"FATHOM-PHASE: synthesize","response":"{{if find \"totals match\" .Input}}audited{{else}}not audited{{end}}"},
 {"system_match":"(?s)FATHOM-ROLE: orchestrator.*\\| auditor \\| the auditor sub-agent \\| Audits totals","response":"{\"steps\":[{\"id\":\"r\",\"type\":\"research\",\"description\":\"Find the totals\"},{\"id\":\"a\",\"type\":\"auditor\",\"description\":\"Audit the totals\",\"dependencies\":[\"r\"]}]}"},
 {"system_match":"FATHOM-ROLE: researcher","response":"` + "```" + `json\n{\"status\":\"completed\",\"summary\":\"totals are 42\",\"confidence\":0.9}\n` + "```" + `"}
]}`))
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	defer model.Close()
	var mu sync.Mutex
	var briefs []fathom.Brief
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.LLM = fathom.LLM{BaseURL: model.URL + "/v1", APIKey: "k", Model: "mock-model"}
	cfg.Session.StepRetryDelay = 10 * time.Millisecond
	cfg.Agents = []fathom.Agent{{Name: "auditor", Description: "Audits totals", Run: func(_ context.Context, b fathom.Brief) (*fathom.Handoff, error) {
		mu.Lock()
		defer mu.Unlock()
		briefs = append(briefs, b)
		if len(briefs) == 1 {
			return nil, errors.New("ledger unavailable")
		}
		return &fathom.Handoff{Summary: "totals match the ledger", Recommendations: []string{"none"}, Confidence: 0.95}, nil
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := fathom.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	id, err := n.StartSession(ctx, fathom.SessionRequest{ID: "audit-1", Goal: "Audit the totals"})
	if err != nil {
		t.Fatal(err)
	}
	sub := n.Follow(id, 0)
	defer sub.Close()
	var completed []*messages.SubagentCompleted
	var result string
	for result == "" {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			t.Fatalf("follow: %v (sub-agents completed: %v)", err, completed)
		}
		if c := u.Event.GetSubagentCompleted(); c != nil && c.GetAgentType() == "auditor" {
			completed = append(completed, c)
		}
		if f := u.Event.GetSessionFailed(); f != nil {
			t.Fatalf("session failed: %s", f.GetError())
		}
		if c := u.Event.GetSessionCompleted(); c != nil {
			result = c.GetResult()
		}
	}
	if result != "audited" {
		t.Fatalf("result %q", result)
	}
	if len(completed) != 2 || completed[0].GetResult().GetStatus() != "failed" || !strings.Contains(completed[0].GetResult().GetSummary(), "ledger unavailable") ||
		completed[0].GetAction() != "retry" {
		t.Fatalf("first auditor run %v", completed)
	}
	last := completed[1].GetResult()
	if last.GetStatus() != "completed" || last.GetSummary() != "totals match the ledger" || last.GetConfidence() != 0.95 || completed[1].GetAction() != "continue" {
		t.Fatalf("second auditor run %v", completed[1])
	}
	mu.Lock()
	defer mu.Unlock()
	b := briefs[1]
	if b.SessionID != id || b.Goal != "Audit the totals" || b.Agent != "auditor" || b.Step.GetId() != "a" || b.Attempt != 2 ||
		!strings.Contains(b.Task, "Audit the totals") || len(b.Upstream) != 1 || b.Upstream[0].StepID != "r" ||
		b.Upstream[0].Result.GetSummary() != "totals are 42" || !strings.Contains(b.Upstream[0].Output, "totals are 42") {
		t.Fatalf("brief %+v", b)
	}
}
