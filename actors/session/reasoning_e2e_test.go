package session_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/messages"
)

// TestThinkingBlocksGoBackWithToolTurns: a session started with a thinking budget on
// the Anthropic API (the real SDK client against the scripted model, which checks
// signatures and refuses a tool-use turn without its thinking block as the API does)
// records the answer's signed thinking block on llm_responded and sends it back, first
// in its assistant turn, with the tool result: the step completes.
func TestThinkingBlocksGoBackWithToolTurns(t *testing.T) {
	h := startHarness(t, harnessOpts{
		script: script(t,
			`{"tool_match":"value of","response":"the answer is: {{.Tool}}"}`,
			`{"match":"Step: find it","tool_calls":[{"name":"lookup","arguments":"{\"key\":\"k1\"}"}]}`,
		),
		llm: func(c *node.LLMConfig) {
			c.API, c.BaseURL = node.APIAnthropic, strings.TrimSuffix(c.BaseURL, "/v1")
		},
	})
	_, err := h.node.Session("s1").Start(&messages.StartRequest{CommandId: "c1", Goal: "goal",
		Config: &messages.SessionConfig{ThinkingBudget: 2048}}, cluster.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "s1", 20*time.Second)
	mustComplete(t, evs)
	if got := ofType(evs, "session_started")[0].GetSessionStarted().GetConfig().GetThinkingBudget(); got != 2048 {
		t.Fatalf("session_started thinking_budget %d", got)
	}
	var turn *messages.LlmResponded
	for _, ev := range ofType(evs, "llm_responded") {
		if r := ev.GetLlmResponded(); len(r.GetToolCalls()) > 0 {
			turn = r
		}
	}
	if turn == nil || len(turn.GetThinking()) != 1 || turn.GetThinking()[0].GetSignature() == "" || turn.GetThinking()[0].GetThinking() == "" {
		t.Fatalf("tool-use turn %v: want one signed thinking block recorded", turn)
	}

	// The request after the tool ran carries the block unchanged, first in the turn.
	var found bool
	for _, r := range h.model.Recorded() {
		var body struct {
			Thinking struct {
				Type   string `json:"type"`
				Budget int    `json:"budget_tokens"`
			} `json:"thinking"`
			Messages []struct {
				Role    string            `json:"role"`
				Content []json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if r.Path != "/v1/messages" || json.Unmarshal(r.Body, &body) != nil {
			continue
		}
		if body.Thinking.Type != "enabled" || body.Thinking.Budget != 2048 {
			t.Fatalf("request without the session's thinking budget: %s", r.Body)
		}
		for _, m := range body.Messages {
			if m.Role != "assistant" || len(m.Content) == 0 {
				continue
			}
			var first struct{ Type, Thinking, Signature string }
			_ = json.Unmarshal(m.Content[0], &first)
			if first.Type == "thinking" && first.Thinking == turn.GetThinking()[0].GetThinking() && first.Signature == turn.GetThinking()[0].GetSignature() {
				found = true
			}
		}
	}
	if !found {
		t.Fatal("no request carried the recorded thinking block back")
	}
}

// TestReasoningPerSessionAndAgentType: the start request's reasoning_effort replaces the
// node's default on the orchestrator's calls; a sub-agent type with its own setting
// (core.Config.AgentReasoning) uses that; an unknown effort is refused at start.
func TestReasoningPerSessionAndAgentType(t *testing.T) {
	sc := rules(t,
		planRule(`[{"id":"r","type":"research","description":"find the facts in the archive"}]`),
		`{"system_match":"FATHOM-ROLE: researcher","response":`+quote(`{"status":"completed","summary":"found in the archive"}`)+`}`,
		`{"system_match":"FATHOM-PHASE: synthesize","response":"Closing."}`,
	)
	h := startHarness(t, harnessOpts{script: sc, cfg: func(c *session.Config) {
		c.Reasoning = core.Reasoning{Effort: "low"}
		c.AgentReasoning = map[string]core.Reasoning{core.Researcher: {Effort: "high"}}
	}})
	_, err := h.node.Session("s1").Start(&messages.StartRequest{CommandId: "c1", Goal: "goal",
		Config: &messages.SessionConfig{ReasoningEffort: "medium"}}, cluster.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	mustComplete(t, waitTerminal(t, h.j, "s1", 20*time.Second))
	for marker, want := range map[string]string{"FATHOM-PHASE: plan": "medium", "FATHOM-ROLE: researcher": "high", "FATHOM-PHASE: synthesize": "medium"} {
		reqs := sentRequests(t, h, marker)
		if len(reqs) == 0 {
			t.Fatalf("no %s request", marker)
		}
		for _, r := range reqs {
			if r.ReasoningEffort != want {
				t.Fatalf("%s request reasoning_effort %q, want %q", marker, r.ReasoningEffort, want)
			}
		}
	}

	// Without its own setting a session takes the node's default.
	if _, err := h.start("s2", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	st := waitTerminal(t, h.j, "s2", 20*time.Second)
	if got := ofType(st, "session_started")[0].GetSessionStarted().GetConfig().GetReasoningEffort(); got != "low" {
		t.Fatalf("default reasoning_effort %q, want the node's low", got)
	}

	_, err = h.node.Session("s3").Start(&messages.StartRequest{CommandId: "c1", Goal: "goal",
		Config: &messages.SessionConfig{ReasoningEffort: "extreme"}}, cluster.WithTimeout(10*time.Second))
	if err == nil || !strings.Contains(err.Error(), `reasoning effort "extreme" is not one of minimal, low, medium, high`) {
		t.Fatalf("start with an unknown effort: err = %v", err)
	}
	_, err = h.node.Session("s4").Start(&messages.StartRequest{CommandId: "c1", Goal: "goal",
		Config: &messages.SessionConfig{ThinkingBudget: 100}}, cluster.WithTimeout(10*time.Second))
	if err == nil || !strings.Contains(err.Error(), "thinking budget 100 is below the API's minimum of 1024 tokens") {
		t.Fatalf("start with a thinking budget of 100: err = %v", err)
	}
}
