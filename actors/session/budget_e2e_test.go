package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/session/replay"
	"github.com/fathom-agents/fathom/messages"
)

// TestSessionBudgetBoundsSubAgentCalls: max_llm_calls counts the calls of the session's
// sub-agents too (here they loop on a tool and would use 3 × 10 calls per run): the call
// that would cross it is never requested and the session fails with the reason.
func TestSessionBudgetBoundsSubAgentCalls(t *testing.T) {
	sc := rules(t,
		planRule(`[{"id":"a","type":"research","description":"dig a"},{"id":"b","type":"research","description":"dig b","dependencies":[]},`+
			`{"id":"c","type":"research","description":"dig c","dependencies":[]}]`),
		`{"system_match":"FATHOM-ROLE: researcher","tool_calls":[{"name":"lookup","arguments":"{\"key\":\"more\"}"}]}`,
	)
	h := startHarness(t, harnessOpts{script: sc, cfg: subAgentTools(map[string][]string{"researcher": {"lookup"}})})
	_, err := h.node.Session("budget").Start(&messages.StartRequest{CommandId: "c1", Goal: "dig",
		Config: &messages.SessionConfig{MaxLlmCalls: 12}}, cluster.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "budget", 30*time.Second)
	failed := evs[len(evs)-1].GetSessionFailed()
	if want := "session budget exceeded: 13 LLM calls (max_llm_calls 12)"; !strings.HasPrefix(failed.GetError(), want) || !strings.Contains(failed.GetError(), "--max-llm-calls") {
		t.Fatalf("session ended with %v, want the error %q", evs[len(evs)-1], want)
	}
	if n := count(evs, "llm_requested"); n != 12 {
		t.Fatalf("%d llm_requested, want exactly the budget (12)", n)
	}
	subCalls := 0
	for _, ev := range ofType(evs, "llm_requested") {
		if ev.GetLlmRequested().GetSubAgentId() != "" {
			subCalls++
		}
	}
	if subCalls != 11 || evs[0].GetSessionStarted().GetConfig().GetMaxLlmCalls() != 12 {
		t.Fatalf("%d sub-agent calls (want 11 besides the plan); config %v", subCalls, evs[0].GetSessionStarted().GetConfig())
	}
	// The count is folded from the events: the state says the same after a reload.
	st, _, err := replay.Load(t.Context(), h.j, "budget", 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.GetLlmCalls() != 12 {
		t.Fatalf("folded llm_calls %d", st.GetLlmCalls())
	}
}

// TestSessionBudgetTokensAndCost: max_tokens and max_cost_usd stop the session before
// the call after the one that used them up; a bad cost budget is refused at start.
func TestSessionBudgetTokensAndCost(t *testing.T) {
	sc := rules(t,
		planRule(`[{"id":"a","type":"custom","description":"loop"}]`),
		`{"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"lookup","arguments":"{\"key\":\"more\"}"}]}`,
	)
	h := startHarness(t, harnessOpts{script: sc, cfg: func(c *session.Config) { c.MaxIterations = 50; c.MaxTokens = 1 }})
	if _, err := h.start("tok", "c1", "loop"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "tok", 30*time.Second)
	if msg := evs[len(evs)-1].GetSessionFailed().GetError(); !strings.HasPrefix(msg, "session budget exceeded: ") || !strings.Contains(msg, "(max_tokens 1)") {
		t.Fatalf("session ended with %v", evs[len(evs)-1])
	}
	if n := count(evs, "llm_requested"); n != 1 {
		t.Fatalf("%d calls: the plan used the token budget, nothing may follow it", n)
	}
	_, err := h.node.Session("cost").Start(&messages.StartRequest{CommandId: "c1", Goal: "loop",
		Config: &messages.SessionConfig{MaxCostUsd: 1e-9}}, cluster.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	evs = waitTerminal(t, h.j, "cost", 30*time.Second)
	if msg := evs[len(evs)-1].GetSessionFailed().GetError(); !strings.HasPrefix(msg, "session budget exceeded: $") || !strings.Contains(msg, "(max_cost_usd 1e-09)") {
		t.Fatalf("session ended with %v", evs[len(evs)-1])
	}
	if n := count(evs, "llm_requested"); n != 1 {
		t.Fatalf("%d calls: the plan spent the cost budget, nothing may follow it", n)
	}
	_, err = h.node.Session("bad").Start(&messages.StartRequest{CommandId: "c1", Goal: "g",
		Config: &messages.SessionConfig{MaxCostUsd: -1}}, cluster.WithTimeout(10*time.Second))
	if err == nil || !strings.Contains(err.Error(), "max_cost_usd") {
		t.Fatalf("negative cost budget: %v", err)
	}
}
