package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestGatewayStartSetsSessionBudgets: start's config carries the session budgets into
// session_started; a call past max_llm_calls fails the session with the reason.
func TestGatewayStartSetsSessionBudgets(t *testing.T) {
	t.Parallel()
	g := startFake(t, gwOpts{})
	c := g.mustDial(token)
	c.send(map[string]any{"op": "start", "id": "b", "session_id": "ws-budget", "goal": "write a haiku",
		"config": map[string]any{"max_llm_calls": 1, "max_cost_usd": 2.5, "max_tokens": 90000}})
	if ack := c.next("ack", 10*time.Second); ack["session_id"] != "ws-budget" {
		t.Fatalf("start ack %v", ack)
	}
	g.completeAsync("ws-budget") // the model answers: its second call is past the budget
	var journal []map[string]any
	testenv.Eventually(t, 30*time.Second, func() bool {
		journal = g.journal("ws-budget")
		return len(journal) > 0 && (journal[len(journal)-1]["type"] == "session_failed" || journal[len(journal)-1]["type"] == "session_completed")
	}, "session ws-budget did not end")
	cfg, _ := journal[0]["config"].(map[string]any)
	if cfg["max_llm_calls"] != float64(1) || cfg["max_cost_usd"] != 2.5 || (cfg["max_tokens"] != "90000" && cfg["max_tokens"] != float64(90000)) {
		t.Fatalf("session_started config %v", cfg)
	}
	last := journal[len(journal)-1]
	if msg, _ := last["error"].(string); last["type"] != "session_failed" || !strings.HasPrefix(msg, "session budget exceeded: 2 LLM calls (max_llm_calls 1)") {
		t.Fatalf("session ended with %v", last)
	}
}
