package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/node"
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
	return runProbeSession(t, probeSession{
		fact: "probe 3: the shipment record says ORD-2024-00042 leaves the Lyon warehouse on Thursday with Geodis, packed in two boxes and signed for by the night shift",
		filler: func(n int) string {
			return fmt.Sprintf("probe %d: which carrier ships order ORD-2024-%05d? not known yet", n, 10000+n)
		},
		question:  "Which carrier ships order ORD-2024-00042?",
		mentions:  []string{"ORD-2024-00042", "Geodis"},
		retrieval: persistence.Retrieval{Mode: mode},
	})
}

// probeSession is a long session of probes: the first step calls the probe tool 150
// times, probe 3's result is fact and every other one filler(n); the second step is
// question.
type probeSession struct {
	fact      string
	filler    func(n int) string
	question  string
	mentions  []string // what fact says that nothing else does
	retrieval persistence.Retrieval
	memory    node.MemoryConfig
}

// runProbeSession runs p and reports whether the question's model call had the early
// fact among its semantic messages.
func runProbeSession(t *testing.T, p probeSession) bool {
	found, _ := runProbeSessionSemantic(t, p)
	return found
}

// runProbeSessionSemantic is runProbeSession that also returns the semantic messages of
// the question's model call.
func runProbeSessionSemantic(t *testing.T, p probeSession) (bool, []string) {
	const probes = 150
	type probeArgs struct {
		N int `json:"n"`
	}
	reg, err := tools.NewRegistry(tools.MustNew("probe", "Probes record n.", tools.SandboxNone, func(_ context.Context, a probeArgs) (any, error) {
		if a.N == 3 {
			return p.fact, nil
		}
		return p.filler(a.N), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := json.Marshal(map[string]any{"steps": []map[string]any{
		{"id": "s1", "type": "custom", "description": "Probe the records one by one"},
		{"id": "s2", "type": "custom", "description": p.question, "dependencies": []string{"s1"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rule := func(match string, fields map[string]any) map[string]any {
		fields["system_match"] = match
		return fields
	}
	script, err := json.Marshal(map[string]any{"rules": []map[string]any{
		rule("FATHOM-ROLE: orchestrator", map[string]any{"response": string(plan)}),
		rule("FATHOM-ROLE: summarizer", map[string]any{"response": "Summary: the agent probed many records."}),
		rule("Current step: "+regexp.QuoteMeta(p.question), map[string]any{"response": "Answered."}),
		rule("Current step: Probe the records", map[string]any{"times": probes, "tool_calls": []map[string]any{{"name": "probe", "arguments": `{"n":{{.N}}}`}}}),
		rule("Current step: Probe the records", map[string]any{"response": "All records probed."}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := mock.ParseScript(script)
	if err != nil {
		t.Fatal(err)
	}
	h := startHarness(t, harnessOpts{script: &s, tools: &tools.Executor{Registry: reg}, memory: p.memory, cfg: func(c *session.Config) {
		c.MaxIterations = probes + 10
		c.MaxLLMCalls = 0
		c.ContextBudget = 3000
		c.Summary = memory.SummaryConfig{Threshold: 1500, TargetTokens: 200, InputBudget: 48000}
		c.Retrieval = p.retrieval
	}})
	if _, err := h.start("probes", "c1", "go through the records"); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, waitTerminal(t, h.j, "probes", 5*time.Minute))
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
				if c, _ := m.Content.(string); m.Role == "system" && strings.Contains(c, "Current step: "+p.question) {
					question = body.Messages
				}
			}
		}
	}
	if question == nil {
		t.Fatal("no model request for the question's step")
	}
	mentions := func(c string) bool {
		for _, w := range p.mentions {
			if !strings.Contains(c, w) {
				return false
			}
		}
		return true
	}
	found, semantic := false, []string(nil)
	for _, m := range question {
		c, _ := m.Content.(string)
		if strings.HasPrefix(c, memory.SemanticPrefix) {
			semantic = append(semantic, c)
			found = found || mentions(c)
		} else if mentions(c) {
			t.Fatalf("the early fact reached the call outside the semantic slice (%s): the history is too short to test retrieval", m.Role)
		}
	}
	if len(semantic) == 0 {
		t.Fatalf("the question's call had no semantic messages")
	}
	return found, semantic
}

// TestSemanticSliceHoldsNoCopies: a session whose probes mostly answer the same words
// (a boilerplate reply repeated a hundred times) asks about them; the semantic slice of
// the question's call holds that reply once, and the rest of the slice goes to other
// messages (here the early fact), not to copies.
func TestSemanticSliceHoldsNoCopies(t *testing.T) {
	const boilerplate = "probe result: the records service answered that no carrier is assigned to this order yet"
	found, semantic := runProbeSessionSemantic(t, probeSession{
		fact:      "probe 3: the records service answered that carrier Geodis is assigned to order ORD-2024-00042",
		filler:    func(int) string { return boilerplate },
		question:  "Which carrier is assigned to order ORD-2024-00042 according to the records service?",
		mentions:  []string{"ORD-2024-00042", "Geodis"},
		retrieval: persistence.Retrieval{Mode: persistence.RetrievalVector},
	})
	seen := map[string]int{}
	for _, c := range semantic {
		seen[c]++
		if seen[c] > 1 {
			t.Fatalf("the semantic slice holds %q %d times: %q", c, seen[c], semantic)
		}
	}
	if !found {
		t.Fatalf("the early fact is not in the semantic slice %q", semantic)
	}
}
