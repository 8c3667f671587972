package fathom_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/internal/fathomtest"
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

// auditorScript plans a research step and an "auditor" step after it; the synthesis
// says whether the auditor's hand-off reached it.
const auditorScript = `{"rules":[
 {"system_match":"FATHOM-PHASE: synthesize","response":"{{if find \"totals match\" .Input}}audited{{else}}not audited{{end}}"},
 {"system_match":"(?s)FATHOM-ROLE: orchestrator.*\\| auditor \\| the auditor sub-agent \\| Audits totals","response":"{\"steps\":[{\"id\":\"r\",\"type\":\"research\",\"description\":\"Find the totals\"},{\"id\":\"a\",\"type\":\"auditor\",\"description\":\"Audit the totals\",\"dependencies\":[\"r\"]}]}"},
 {"system_match":"FATHOM-ROLE: researcher","response":"` + "```" + `json\n{\"status\":\"completed\",\"summary\":\"totals are 42\",\"confidence\":0.9}\n` + "```" + `"}
]}`

// runAuditor runs session id with the Go-function agent "auditor" (run) on an embedded
// node (edit changes its configuration) and returns the auditor's subagent_completed
// events and the session's result.
func runAuditor(t *testing.T, id string, run fathom.AgentFunc, edit func(*fathom.Config)) ([]*messages.SubagentCompleted, string) {
	t.Helper()
	script, err := mock.ParseScript([]byte(auditorScript))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fathomtest.Config(t, fathomtest.Model(t, script))
	cfg.Session.StepRetryDelay = 10 * time.Millisecond
	cfg.Agents = []fathom.Agent{{Name: "auditor", Description: "Audits totals", Run: run}}
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := fathomtest.Start(t, cfg)
	if _, err := n.StartSession(ctx, fathom.SessionRequest{ID: id, Goal: "Audit the totals"}); err != nil {
		t.Fatal(err)
	}
	sub := n.Follow(id, 0)
	defer sub.Close()
	var completed []*messages.SubagentCompleted
	for {
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
			return completed, c.GetResult()
		}
	}
}

// TestGoFunctionAgentGetsTheBriefAndHandsOff: a Go-function agent planned after a
// researcher gets the goal, its step, the task brief and the researcher's hand-off; a
// run that returns an error is retried like a failed model call, and the hand-off of the
// run that succeeds is recorded like a model agent's (subagent_completed, the step's
// output, the synthesis's input).
func TestGoFunctionAgentGetsTheBriefAndHandsOff(t *testing.T) {
	var mu sync.Mutex
	var briefs []fathom.Brief
	completed, result := runAuditor(t, "audit-1", func(_ context.Context, b fathom.Brief) (*fathom.Handoff, error) {
		mu.Lock()
		defer mu.Unlock()
		briefs = append(briefs, b)
		if len(briefs) == 1 {
			return nil, errors.New("ledger unavailable")
		}
		return &fathom.Handoff{Summary: "totals match the ledger", Recommendations: []string{"none"}, Confidence: 0.95}, nil
	}, nil)
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
	if b.SessionID != "audit-1" || b.Goal != "Audit the totals" || b.Agent != "auditor" || b.Step.GetId() != "a" || b.Attempt != 2 ||
		!strings.Contains(b.Task, "Audit the totals") || len(b.Upstream) != 1 || b.Upstream[0].StepID != "r" ||
		b.Upstream[0].Result.GetSummary() != "totals are 42" || !strings.Contains(b.Upstream[0].Output, "totals are 42") {
		t.Fatalf("brief %+v", b)
	}
}

// TestGoFunctionAgentTimeoutIsAFailedRun: a Go-function agent's run that outlasts the
// session's LLM timeout is cancelled and recorded as a failed run (retried like a model
// call that timed out), not lost: the step then completes with the retry's hand-off.
func TestGoFunctionAgentTimeoutIsAFailedRun(t *testing.T) {
	var mu sync.Mutex
	runs := 0
	completed, result := runAuditor(t, "audit-timeout", func(ctx context.Context, _ fathom.Brief) (*fathom.Handoff, error) {
		mu.Lock()
		runs++
		first := runs == 1
		mu.Unlock()
		if first {
			<-ctx.Done() // hangs until the timeout cancels it
			return nil, ctx.Err()
		}
		return &fathom.Handoff{Summary: "totals match the ledger", Confidence: 0.9}, nil
	}, func(c *fathom.Config) { c.Session.LLMTimeout = 300 * time.Millisecond })
	if result != "audited" {
		t.Fatalf("result %q", result)
	}
	if len(completed) != 2 || completed[0].GetResult().GetStatus() != "failed" ||
		!strings.Contains(completed[0].GetResult().GetSummary(), "deadline exceeded") || completed[0].GetAction() != "retry" ||
		completed[1].GetResult().GetStatus() != "completed" {
		t.Fatalf("auditor runs %v", completed)
	}
}
