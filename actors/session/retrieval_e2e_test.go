package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/tools"
)

// TestHybridRetrievalFindsEarlyIdentifier runs a long session through the grain against
// mock-llm: the first step probes 150 times, and one early probe's result names order
// ORD-2024-00042 (shipped with Geodis) while every other result asks about another
// order in the words of the later question. The second step asks which carrier ships
// ORD-2024-00042: with hybrid retrieval (the default) the early message comes back in
// the call's semantic slice; with vector retrieval alone (the hash embedder sees the
// look-alike questions as closer) it does not. Asserted on the model requests' messages.
func TestHybridRetrievalFindsEarlyIdentifier(t *testing.T) {
	for _, tc := range []struct {
		mode      string
		wantFound bool
	}{
		{"", true}, // the default: hybrid
		{persistence.RetrievalVector, false},
	} {
		name := tc.mode
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			found := runIdentifierSession(t, tc.mode)
			if found != tc.wantFound {
				t.Fatalf("retrieval %q: the early message with ORD-2024-00042 in the question's semantic slice: %v, want %v", name, found, tc.wantFound)
			}
		})
	}
}

// runIdentifierSession runs the session with retrieval mode and reports whether the
// question's model call had the early fact among its semantic messages.
func runIdentifierSession(t *testing.T, mode string) bool {
	const probes = 150
	type probeArgs struct {
		N int `json:"n"`
	}
	reg, err := tools.NewRegistry(tools.MustNew("probe", "Probes order record n.", tools.SandboxNone, func(_ context.Context, a probeArgs) (any, error) {
		if a.N == 3 {
			return "probe 3: the shipment record says ORD-2024-00042 leaves the Lyon warehouse on Thursday with Geodis, packed in two boxes and signed for by the night shift", nil
		}
		return fmt.Sprintf("probe %d: which carrier ships order ORD-2024-%05d? not known yet", a.N, 10000+a.N), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	s, err := mock.ParseScript([]byte(`{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s1\",\"type\":\"custom\",\"description\":\"Probe the order records one by one\"},{\"id\":\"s2\",\"type\":\"custom\",\"description\":\"Which carrier ships order ORD-2024-00042?\",\"dependencies\":[\"s1\"]}]}"},
		{"system_match":"FATHOM-ROLE: summarizer","response":"Summary: the agent probed many order records."},
		{"system_match":"Current step: Which carrier","response":"Answered."},
		{"system_match":"Current step: Probe the order records","times":` + fmt.Sprint(probes) + `,"tool_calls":[{"name":"probe","arguments":"{\"n\":{{.N}}}"}]},
		{"system_match":"Current step: Probe the order records","response":"All records probed."}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	h := startHarness(t, harnessOpts{script: &s, tools: &tools.Executor{Registry: reg}, cfg: func(c *core.Config) {
		c.MaxIterations = probes + 10
		c.MaxLLMCalls = 0
		c.ContextBudget = 3000
		c.Summary = memory.SummaryConfig{Threshold: 1500, TargetTokens: 200, InputBudget: 48000}
		c.Retrieval = persistence.Retrieval{Mode: mode}
	}})
	if _, err := h.start("ids", "c1", "find the carrier of an order"); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, waitTerminal(t, h.j, "ids", 5*time.Minute))
	var question []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	}
	for _, r := range h.model.Recorded() {
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(r.Body, &body) == nil {
			for _, m := range body.Messages {
				if c, _ := m.Content.(string); m.Role == "system" && strings.Contains(c, "Current step: Which carrier") {
					question = body.Messages
				}
			}
		}
	}
	if question == nil {
		t.Fatal("no model request for the question's step")
	}
	found, semantic := false, 0
	for _, m := range question {
		c, _ := m.Content.(string)
		if strings.HasPrefix(c, memory.SemanticPrefix) {
			semantic++
			found = found || strings.Contains(c, "ORD-2024-00042") && strings.Contains(c, "Geodis")
		} else if strings.Contains(c, "Geodis") {
			t.Fatalf("the early fact reached the call outside the semantic slice (%s): the history is too short to test retrieval", m.Role)
		}
	}
	if semantic == 0 {
		t.Fatalf("the question's call had no semantic messages")
	}
	return found
}
