package session_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/tools"
)

// embedEveryMessage makes a node embed every committed message, as it did before
// embedding became lazy: with no recent share every history may stop fitting the
// context whole, so the embedding observer's threshold (half the recent share of the
// budget) is 0. For the tests of what happens to a session's vectors, not of when they
// are made.
func embedEveryMessage(c *session.Config) {
	c.ContextRatios = memory.Ratios{Recent: 0, Summary: 0.5, Semantic: 0.5}
}

// lateObserver forwards commits to an observer set once the node it observes has started
// (nil until then: nothing is forwarded).
type lateObserver struct {
	mu sync.Mutex
	o  session.Observer
}

func (l *lateObserver) set(o session.Observer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.o = o
}

// Committed implements session.Observer.
func (l *lateObserver) Committed(c session.Commit) {
	l.mu.Lock()
	o := l.o
	l.mu.Unlock()
	if o != nil {
		o.Committed(c)
	}
}

// The long session of the embedding tests: vaultProbes probe calls whose results
// (probeRegistry with vaultPad) take the history past the embedding threshold of a
// vaultBudget-token context (750 tokens) and out of the context, the vault code among
// the first, then a step that asks for it.
const (
	vaultProbes = 40
	vaultBudget = 3000
)

// vaultPad pads the probes' results to about 100 tokens each.
var vaultPad = ";" + strings.Repeat(" reading nominal;", 30)

// vaultScript is the long session's model. No summary (the summarizer is down):
// summary_updated events would land at times that differ from node to node, and the
// sessions of one test must record the same events under the same seqs.
func vaultScript(t *testing.T) *mock.Script {
	t.Helper()
	s, err := mock.ParseScript([]byte(`{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","match":"greet","response":"{\"steps\":[{\"id\":\"s1\",\"type\":\"custom\",\"description\":\"Say hello\"}]}"},
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s1\",\"type\":\"custom\",\"description\":\"Probe the sensors one by one\"},{\"id\":\"s2\",\"type\":\"custom\",\"description\":\"What is the vault code?\",\"dependencies\":[\"s1\"]}]}"},
		{"system_match":"FATHOM-ROLE: summarizer","status":500,"error_message":"summarizer down"},
		{"system_match":"Current step: Say hello","response":"Hello."},
		{"system_match":"Current step: What is the vault code","context_match":"ZEBRA-42","response":"The vault code is ZEBRA-42."},
		{"system_match":"Current step: What is the vault code","response":"I do not know the vault code."},
		{"system_match":"Current step: Probe the sensors","times":` + fmt.Sprint(vaultProbes) + `,"tool_calls":[{"name":"probe","arguments":"{\"n\":{{.N}}}"}]},
		{"system_match":"Current step: Probe the sensors","response":"All sensors probed."}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	return &s
}

// vaultConfig is the long session's configuration: room for its probes, a
// vaultBudget-token context.
func vaultConfig(c *session.Config) {
	c.MaxIterations = vaultProbes + 10
	c.ContextBudget = vaultBudget
}

// TestLazyEmbedding: a session's messages are embedded only once its history may stop
// fitting the context (a quarter of the budget, here 750 of 3,000 tokens).
//
//   - A short session whose history fits every call's context whole stores no vector,
//     neither while it runs nor when a node activates it again.
//   - A long session whose history outgrows the budget gets its early fact back through
//     the semantic tier, and its vectors are those an eager observer (every message
//     embedded as it is committed: the behaviour before lazy embedding) stores for the
//     same session on another node: the same messages, so every search ranks the same
//     hits with the same scores.
//   - A node that activates the long session again (fresh in-process store) re-embeds
//     that same set; the short one stays without vectors.
func TestLazyEmbedding(t *testing.T) {
	const budget = vaultBudget
	reg := probeRegistry(t, vaultPad)
	ctx := context.Background()
	all := func(n *node.Node, id, query string) []persistence.VectorHit {
		t.Helper()
		hits, err := n.Vectors().Search(ctx, "default", id, hashembed.Vector(query, hashembed.DefaultDimensions), 10000)
		if err != nil {
			t.Fatal(err)
		}
		return hits
	}
	queries := []string{"What is the vault code?", "Probe the sensors one by one", "reading nominal"}

	// Node A, lazy (the default): the short session first, then the long one.
	j := openJournal(t)
	defer j.Close()
	a := startHarness(t, harnessOpts{journal: j, cfg: vaultConfig, tools: &tools.Executor{Registry: reg}, script: vaultScript(t)})
	if _, err := a.start("short", "c1", "greet the user"); err != nil {
		t.Fatal(err)
	}
	short := waitTerminal(t, j, "short", 30*time.Second)
	mustComplete(t, short)
	for _, ev := range ofType(short, "llm_responded") {
		if c := ev.GetLlmResponded().GetContext(); c != nil && (c.GetRecentCount() != c.GetHistoryCount() || 4*c.GetTotalTokens() >= budget) {
			t.Fatalf("the short session's history does not fit its context whole, far below the threshold: %v", c)
		}
	}
	if _, err := a.start("long", "c1", "find the vault code"); err != nil {
		t.Fatal(err)
	}
	long := waitTerminal(t, j, "long", time.Minute)
	mustComplete(t, long)
	if got := long[len(long)-1].GetSessionCompleted().GetResult(); got != "The vault code is ZEBRA-42." {
		t.Fatalf("result %q: the fact did not come back", got)
	}
	answers := ofType(long, "llm_responded")
	if c := answers[len(answers)-1].GetLlmResponded().GetContext(); c.GetSemanticCount() == 0 || c.GetRecentCount() >= c.GetHistoryCount() {
		t.Fatalf("the question's call had no semantic hits from before its recent window: %v", c)
	}
	// The history messages with text an eager observer embeds.
	st, err := a.state("long")
	if err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for _, m := range core.History(st.GetState()) {
		if m.Content != "" {
			want = append(want, m.Seq)
		}
	}
	seqs := func(hits []persistence.VectorHit) []uint64 {
		out := make([]uint64, len(hits))
		for i, h := range hits {
			out[i] = h.Seq
		}
		slices.Sort(out)
		return out
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return slices.Equal(seqs(all(a.node, "long", queries[0])), want) },
		"the long session's vectors are not its %d history messages", len(want))
	// The embed worker works in order: what it had of the short session is stored by now.
	if hits := all(a.node, "short", queries[0]); len(hits) != 0 {
		t.Fatalf("the short session stored %d vectors", len(hits))
	}
	lazy := map[string][]persistence.VectorHit{}
	for _, q := range queries {
		lazy[q] = all(a.node, "long", q)
	}
	stopNode(t, a)

	// Node B, with an eager observer besides: the same long session's vectors.
	eager := &lateObserver{}
	b := startHarness(t, harnessOpts{cfg: vaultConfig, tools: &tools.Executor{Registry: reg}, script: vaultScript(t), observers: []session.Observer{eager}})
	w, err := memory.NewEmbedWorker(memory.EmbedWorkerConfig{Embedder: hashembed.New(hashembed.DefaultDimensions), Store: b.node.Vectors()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close(ctx) }()
	eager.set(session.Embedding(w, false, memory.ContextConfig{})) // no budget: every message
	if _, err := b.start("long", "c1", "find the vault code"); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, waitTerminal(t, b.j, "long", time.Minute))
	testenv.Eventually(t, 10*time.Second, func() bool { return slices.Equal(seqs(all(b.node, "long", queries[0])), want) },
		"the eager observer's vectors are not the %d history messages", len(want))
	for _, q := range queries {
		if got := all(b.node, "long", q); !sameHits(got, lazy[q]) {
			t.Fatalf("search %q: eager %v, lazy %v", q, got, lazy[q])
		}
	}

	stopNode(t, b) // one node at a time: two in one process trip the race detector in Proto.Actor's remoting

	// Node C, on node A's journal: activating the sessions re-embeds only the long one.
	c := startHarness(t, harnessOpts{journal: j, cfg: vaultConfig, tools: &tools.Executor{Registry: reg}, script: vaultScript(t)})
	for _, id := range []string{"short", "long"} {
		if _, err := c.state(id); err != nil { // activates the session
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return sameHits(all(c.node, "long", queries[0]), lazy[queries[0]]) },
		"the activation did not re-embed the long session's history")
	if hits := all(c.node, "short", queries[0]); len(hits) != 0 {
		t.Fatalf("the activation embedded the short session: %d vectors", len(hits))
	}
}

// sameHits reports whether a and b rank the same messages with the same scores.
func sameHits(a, b []persistence.VectorHit) bool {
	return slices.EqualFunc(a, b, func(x, y persistence.VectorHit) bool { return x.Seq == y.Seq && x.Score == y.Score })
}
