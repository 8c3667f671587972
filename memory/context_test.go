package memory_test

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
)

var t0 = time.Date(2026, 5, 9, 12, 0, 0, 0, time.UTC)

func msgs(tokens ...int) []memory.Message {
	out := make([]memory.Message, len(tokens))
	for i, n := range tokens {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		out[i] = memory.Message{Seq: uint64(10 + 2*i), Role: role, Content: fmt.Sprintf("message %d", i), Tokens: n}
	}
	return out
}

func cfgBudget(b int) memory.ContextConfig {
	c := memory.DefaultContextConfig()
	c.Budget = b
	return c
}

func seqs(ms []memory.ContextMessage) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.Seq
	}
	return out
}

func TestBuildContextTiers(t *testing.T) {
	// Budget 1003: system 0, reply 3 → A = 1000: summary 300, recent 500, semantic 200.
	in := memory.Input{
		Summary:  &memory.Summary{Content: "the summary", Tokens: 100, Through: 20},
		Messages: msgs(100, 100, 100, 100, 100, 100, 100, 100, 100, 100), // seqs 10..28
		Hits:     []memory.Hit{{Seq: 12, Score: 0.9}, {Seq: 28, Score: 0.8}, {Seq: 10, Score: 0.7}, {Seq: 99, Score: 0.6}, {Seq: 12, Score: 0.5}},
		Now:      t0,
	}
	c, err := memory.BuildContext(cfgBudget(1003), in)
	if err != nil {
		t.Fatal(err)
	}
	// Summary costs 109 of 300: 191 flows to recent → 691: six messages (600).
	// Recent leaves 91 → semantic 291: seq 12 (107) and 10 (107) fit; 28 is recent, 99 unknown, 12 repeated.
	// Semantic leaves 77 → recent again: message seq 16 costs 100, does not fit.
	if c.Summary == nil || !c.Metadata.HasSummary || c.Metadata.SummaryTokens != 109 {
		t.Fatalf("summary %+v %+v", c.Summary, c.Metadata)
	}
	if got := seqs(c.Recent); fmt.Sprint(got) != "[18 20 22 24 26 28]" {
		t.Fatalf("recent %v", got)
	}
	if got := seqs(c.Semantic); fmt.Sprint(got) != "[10 12]" {
		t.Fatalf("semantic %v", got)
	}
	if c.Metadata.HitsIgnored != 3 || c.Metadata.RecentCount != 6 || c.Metadata.SemanticCount != 2 || !c.Metadata.BuiltAt.Equal(t0) {
		t.Fatalf("metadata %+v", c.Metadata)
	}
	if c.TotalTokens != 3+109+600+214 || c.TotalTokens > c.Budget {
		t.Fatalf("total %d", c.TotalTokens)
	}
	for _, m := range c.Semantic {
		if m.Tier != memory.TierSemantic || m.Cost != m.Tokens+7 {
			t.Fatalf("semantic message %+v", m)
		}
	}

	out := c.Messages()
	if len(out) != 1+2+6 || out[0].Content != memory.SummaryPrefix+"the summary" || out[0].Role != "system" {
		t.Fatalf("formatted %v", out)
	}
	if out[1].Content != memory.SemanticPrefix+"message 0" || out[2].Content != memory.SemanticPrefix+"message 1" {
		t.Fatalf("semantic formatting %q %q", out[1].Content, out[2].Content)
	}
	if out[3].Content != "message 4" || out[8].Content != "message 9" {
		t.Fatalf("recent formatting %v", out[3:])
	}
}

// TestContextTaskPromptLast: the task prompt is the last message, after the recent
// tier, and the system prompt the first; what comes before the task prompt is the
// history alone.
func TestContextTaskPromptLast(t *testing.T) {
	c, err := memory.BuildContext(cfgBudget(1003), memory.Input{SystemPrompt: "stable", TaskPrompt: "Current step: x",
		SystemTokens: 6, Messages: msgs(100, 100, 100)})
	if err != nil {
		t.Fatal(err)
	}
	out := c.Messages()
	if len(out) != 5 || out[0].Role != "system" || out[0].Content != "stable" || out[3].Content != "message 2" ||
		out[4].Role != "system" || out[4].Content != "Current step: x" {
		t.Fatalf("formatted %+v", out)
	}
}

// TestBuildContextFlow: unused budget flows summary → recent → semantic → recent.
func TestBuildContextFlow(t *testing.T) {
	// No summary, no hits: the whole A = 1000 goes to recent.
	c, err := memory.BuildContext(cfgBudget(1003), memory.Input{Messages: msgs(100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100)})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Recent) != 10 || c.TotalTokens != 1003 {
		t.Fatalf("recent %d, total %d", len(c.Recent), c.TotalTokens)
	}
	// A summary too big for its share is omitted and its share flows on.
	c, err = memory.BuildContext(cfgBudget(1003), memory.Input{
		Summary:  &memory.Summary{Content: "long", Tokens: 400, Through: 1},
		Messages: msgs(100, 100, 100),
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Summary != nil || !c.Metadata.SummaryOmitted || len(c.Recent) != 3 || len(c.Messages()) != 3 {
		t.Fatalf("omitted summary: %+v", c.Metadata)
	}
	// Recent takes 800 (its 500 + the summary's 300) and stops at seq 16; semantic takes
	// seq 14 and leaves 183; the second recent pass adds seq 16 and stops at seq 14.
	c, err = memory.BuildContext(cfgBudget(1003), memory.Input{
		Messages: msgs(10, 10, 10, 10, 100, 100, 100, 100, 100, 100, 100, 100), // seqs 10..32
		Hits:     []memory.Hit{{Seq: 14}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seqs(c.Semantic)) != "[14]" || c.Recent[0].Seq != 16 || c.TotalTokens != 3+810+17 {
		t.Fatalf("semantic %v, recent %v", seqs(c.Semantic), seqs(c.Recent))
	}
}

func TestBuildContextToolMessages(t *testing.T) {
	ms := []memory.Message{
		{Seq: 1, Role: "user", Content: "find x", Tokens: 50},
		{Seq: 2, Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "search", Arguments: "{}"}}, Tokens: 50},
		{Seq: 3, Role: "tool", ToolCallID: "c1", Content: "x is 42", Tokens: 50},
		{Seq: 4, Role: "tool", ToolCallID: "c1", Content: "more", Tokens: 50},
		{Seq: 5, Role: "assistant", Content: "x is 42", Tokens: 50},
	}
	// A = 150 → recent share 75 + summary share 45 → 120: seq 5 fits, then seq 4 (tool)
	// would start the run with an orphan tool result.
	c, err := memory.BuildContext(memory.ContextConfig{Budget: 153, Ratios: memory.DefaultRatios(), Costs: memory.DefaultCosts()},
		memory.Input{Messages: ms, Hits: []memory.Hit{{Seq: 2}, {Seq: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Recent) == 0 || c.Recent[0].Role == "tool" {
		t.Fatalf("recent starts with a tool result: %v", seqs(c.Recent))
	}
	// Seq 2 has no text: ignored. Seq 3, a tool result, goes out as a user message.
	for _, m := range c.Messages() {
		if m.Role == "tool" && c.Recent[0].Seq > 3 {
			t.Fatalf("orphan tool message in %v", c.Messages())
		}
		if len(m.ToolCalls) > 0 && m.Content == "" && c.Recent[0].Seq > 2 {
			t.Fatalf("semantic tool call kept: %v", m)
		}
	}
}

func TestBuildContextErrors(t *testing.T) {
	bad := []memory.ContextConfig{
		{Budget: 0, Ratios: memory.DefaultRatios()},
		{Budget: 100, Ratios: memory.Ratios{Recent: 0.5, Summary: 0.3, Semantic: 0.3}},
		{Budget: 100, Ratios: memory.Ratios{Recent: 1.2, Summary: -0.2}},
		{Budget: 100, Ratios: memory.DefaultRatios(), Costs: memory.Costs{Reply: -1}},
	}
	for _, cfg := range bad {
		if _, err := memory.BuildContext(cfg, memory.Input{}); !errors.Is(err, memory.ErrInvalid) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	if _, err := memory.BuildContext(cfgBudget(100), memory.Input{SystemPrompt: "s", SystemTokens: 98}); !errors.Is(err, memory.ErrBudgetTooSmall) {
		t.Errorf("budget too small: %v", err)
	}
	out := []memory.Message{{Seq: 5, Tokens: 1}, {Seq: 4, Tokens: 1}}
	if _, err := memory.BuildContext(cfgBudget(100), memory.Input{Messages: out}); !errors.Is(err, memory.ErrInvalid) {
		t.Errorf("out of order: %v", err)
	}
	if _, err := memory.BuildContext(cfgBudget(100), memory.Input{Messages: []memory.Message{{Seq: 1, Tokens: -1}}}); !errors.Is(err, memory.ErrInvalid) {
		t.Errorf("negative tokens: %v", err)
	}
	// Zero ratios are allowed: everything to recent.
	c, err := memory.BuildContext(memory.ContextConfig{Budget: 103, Ratios: memory.Ratios{Recent: 1}}, memory.Input{Messages: msgs(50, 50, 50)})
	if err != nil || len(c.Recent) != 2 {
		t.Fatalf("recent only: %v %v", c, err)
	}
}

// randomSession makes n messages with random roles, sizes and seq gaps.
func randomSession(r *rand.Rand, n int) []memory.Message {
	roles := []string{"user", "assistant", "tool", "assistant"}
	ms := make([]memory.Message, n)
	seq := uint64(r.Intn(5))
	for i := range ms {
		seq += 1 + uint64(r.Intn(3))
		content := fmt.Sprintf("m%d", seq)
		if r.Intn(10) == 0 {
			content = ""
		}
		ms[i] = memory.Message{Seq: seq, Role: roles[r.Intn(len(roles))], Content: content, Tokens: 1 + r.Intn(400)}
		if r.Intn(40) == 0 {
			ms[i].Tokens = 20000 + r.Intn(200000) // an oversize message (a tool's huge output)
		}
	}
	return ms
}

// TestBuildContextProperties: for random sessions, budgets, ratios, summaries and hits,
// the context never exceeds the budget, never holds a message twice, keeps recent
// messages in order as a contiguous run ending at the newest message, and accounts its
// tokens exactly.
func TestBuildContextProperties(t *testing.T) {
	r := rand.New(rand.NewSource(20))
	for iter := 0; iter < 5000; iter++ {
		ms := randomSession(r, r.Intn(300))
		a, b := r.Float64(), r.Float64()
		if a > b {
			a, b = b, a
		}
		cfg := memory.ContextConfig{Budget: 1 + r.Intn(20000), Ratios: memory.Ratios{Summary: a, Recent: b - a, Semantic: 1 - b}, Costs: memory.DefaultCosts()}
		cfg.Ratios.Semantic = 1 - cfg.Ratios.Summary - cfg.Ratios.Recent
		in := memory.Input{Messages: ms, SystemPrompt: "sys", SystemTokens: r.Intn(cfg.Budget/4 + 1)}
		if r.Intn(2) == 0 {
			in.Summary = &memory.Summary{Content: "s", Tokens: r.Intn(3000), Through: uint64(r.Intn(400))}
		}
		for k := r.Intn(30); k > 0; k-- {
			in.Hits = append(in.Hits, memory.Hit{Seq: uint64(r.Intn(700)), Score: r.Float32()})
		}
		if len(ms) > 0 && r.Intn(2) == 0 {
			in.Task = ms[r.Intn(len(ms))].Seq
		}
		c, err := memory.BuildContext(cfg, in)
		if errors.Is(err, memory.ErrBudgetTooSmall) {
			if in.SystemTokens+3 <= cfg.Budget {
				t.Fatalf("iter %d: spurious ErrBudgetTooSmall", iter)
			}
			continue
		}
		if err != nil {
			t.Fatalf("iter %d: %v (ratios %+v)", iter, err, cfg.Ratios)
		}
		checkContext(t, iter, cfg, in, c)
	}
}

func checkContext(t *testing.T, iter int, cfg memory.ContextConfig, in memory.Input, c *memory.Context) {
	t.Helper()
	if c.TotalTokens > cfg.Budget {
		t.Fatalf("iter %d: %d tokens > budget %d", iter, c.TotalTokens, cfg.Budget)
	}
	sum := in.SystemTokens + cfg.Costs.Reply
	if c.Summary != nil {
		sum += c.Summary.Tokens + cfg.Costs.SummaryOverhead
	}
	seen := map[uint64]bool{}
	all := append(append([]memory.ContextMessage(nil), c.Semantic...), c.Recent...)
	if c.Task != nil {
		all = append(all, *c.Task)
		if c.Task.Seq != in.Task || (len(c.Recent) > 0 && c.Task.Seq >= c.Recent[0].Seq) || c.Task.Tier != memory.TierTask {
			t.Fatalf("iter %d: task %d placed apart from a recent tier starting at %v", iter, c.Task.Seq, seqs(c.Recent))
		}
	}
	for _, m := range all {
		if seen[m.Seq] {
			t.Fatalf("iter %d: message %d twice", iter, m.Seq)
		}
		seen[m.Seq] = true
		sum += m.Cost
	}
	if sum != c.TotalTokens {
		t.Fatalf("iter %d: parts add to %d, TotalTokens %d", iter, sum, c.TotalTokens)
	}
	ms := in.Messages
	if n := len(c.Recent); n > 0 {
		if c.Recent[n-1].Seq != ms[len(ms)-1].Seq {
			t.Fatalf("iter %d: recent does not end at the newest message", iter)
		}
		start := len(ms) - n
		for i, m := range c.Recent {
			if m.Seq != ms[start+i].Seq || m.Tier != memory.TierRecent {
				t.Fatalf("iter %d: recent is not the contiguous, ordered tail", iter)
			}
		}
		if c.Recent[0].Role == "tool" {
			t.Fatalf("iter %d: recent starts with a tool result", iter)
		}
	}
	for i := 1; i < len(c.Semantic); i++ {
		if c.Semantic[i-1].Seq >= c.Semantic[i].Seq {
			t.Fatalf("iter %d: semantic not in order", iter)
		}
	}
	for _, m := range c.Semantic {
		if m.Content == "" || (len(c.Recent) > 0 && m.Seq >= c.Recent[0].Seq) || (c.Task != nil && m.Seq == c.Task.Seq) {
			t.Fatalf("iter %d: semantic message %d is empty, in the recent range or the task", iter, m.Seq)
		}
	}
	checkPinned(t, iter, cfg, in, c)
}

// checkPinned: when the budget leaves MinContextRoom (four times that when counting
// bytes) beside the system prompt and the summary, the newest message (with the assistant call its trailing tool results
// answer) and the task are in the context.
func checkPinned(t *testing.T, iter int, cfg memory.ContextConfig, in memory.Input, c *memory.Context) {
	t.Helper()
	ms := in.Messages
	room := cfg.Budget - in.SystemTokens - cfg.Costs.Reply - c.Metadata.SummaryTokens
	minRoom := memory.MinContextRoom
	if cfg.Counter == nil {
		minRoom *= 4 // ByteCounter's notes and framing cost bytes, not tokens
	}
	if len(ms) == 0 || room < minRoom {
		return
	}
	start := len(ms) - 1
	for start >= 0 && ms[start].Role == "tool" {
		start--
	}
	if start < 0 {
		return // only orphan tool results: there is no turn to keep
	}
	if len(c.Recent) < len(ms)-start {
		t.Fatalf("iter %d: the newest turn (from seq %d) is not in the recent tier %v (room %d)", iter, ms[start].Seq, seqs(c.Recent), room)
	}
	if in.Task == 0 {
		return
	}
	inRecent := false
	for _, m := range c.Recent {
		inRecent = inRecent || m.Seq == in.Task
	}
	var role string
	for _, m := range ms {
		if m.Seq == in.Task {
			role = m.Role
		}
	}
	if role != "tool" && !inRecent && (c.Task == nil || c.Task.Seq != in.Task) {
		t.Fatalf("iter %d: task %d is missing (recent %v)", iter, in.Task, seqs(c.Recent))
	}
}

// TestContextTokensAreAnUpperBound: with counts from the real tokenizer, the formatted
// request never costs more than Context.TotalTokens, so the budget holds for the model.
func TestContextTokensAreAnUpperBound(t *testing.T) {
	words := strings.Fields("the quick brown fox jumps over a lazy dog 42 Grüße 世界 ! ? ... \n\n [ ] ' 's code: func() {} <|endoftext|>")
	r := rand.New(rand.NewSource(7))
	for _, enc := range []string{memory.EncodingCL100K, memory.EncodingO200K} {
		tk := tokenizer(t, enc)
		cfg := memory.DefaultContextConfig()
		cfg.Costs = tk.Costs()
		// A pool of random messages, counted once; each session draws from it.
		pool := make([]memory.Message, 200)
		for i := range pool {
			var b strings.Builder
			for j := r.Intn(80); j > 0; j-- {
				b.WriteString(words[r.Intn(len(words))])
				if r.Intn(4) > 0 {
					b.WriteByte(' ')
				}
			}
			pool[i] = memory.Message{Role: []string{"user", "assistant", "system"}[i%3], Content: b.String()}
			pool[i].Tokens = tk.CountMessage(pool[i].LLM())
		}
		for iter := 0; iter < 40; iter++ {
			ms := make([]memory.Message, 60)
			for i := range ms {
				ms[i] = pool[r.Intn(len(pool))]
				ms[i].Seq = uint64(i + 1)
			}
			sum := "summary " + ms[r.Intn(len(ms))].Content
			sys := "You are a helpful agent."
			cfg.Budget = 200 + r.Intn(3000)
			in := memory.Input{SystemPrompt: sys, SystemTokens: tk.CountMessage(llm.Message{Role: "system", Content: sys}),
				Summary: &memory.Summary{Content: sum, Tokens: tk.Count(sum), Through: 10}, Messages: ms}
			for k := 0; k < 20; k++ {
				in.Hits = append(in.Hits, memory.Hit{Seq: uint64(1 + r.Intn(60))})
			}
			c, err := memory.BuildContext(cfg, in)
			if err != nil {
				t.Fatal(err)
			}
			if real := tk.CountRequest(c.Messages()); real > c.TotalTokens {
				t.Fatalf("%s iter %d: request costs %d tokens, context says %d", enc, iter, real, c.TotalTokens)
			}
		}
	}
}

// TestBuildContextSkipsRepeatedText: a hit whose text the context already holds (a hit
// taken before it, or a recent message, of the same role and content) is skipped, so the
// semantic share goes to what the model has not seen; a message making tool calls is
// never taken for a copy.
func TestBuildContextSkipsRepeatedText(t *testing.T) {
	// Budget 1003 → recent 500, semantic 200 (no summary: its 300 flows on).
	// Budget 600 → 597: the recent tier (80% with no summary) takes the newest messages
	// (100 tokens each); the hits (10 tokens each) share the rest.
	ms := msgs(10, 10, 10, 10, 10, 100, 100, 100, 100, 100) // seqs 10..28, user/assistant alternating
	ms[0].Content = "alpha"                                 // seq 10, user
	ms[1].Content = "alpha"                                 // seq 12, assistant: another role, kept
	ms[2].Content = "alpha"                                 // seq 14, user: repeats seq 10
	ms[3].Content = ms[9].Content                           // seq 16, assistant: repeats recent seq 28
	ms[4].Role, ms[4].Content = "assistant", "alpha"        // seq 18: repeats seq 12, but makes a tool call
	ms[4].ToolCalls = []llm.ToolCall{{ID: "c1", Name: "lookup", Arguments: "{}"}}
	in := memory.Input{Messages: ms, Hits: []memory.Hit{{Seq: 10, Score: 0.9}, {Seq: 14, Score: 0.8}, {Seq: 16, Score: 0.7}, {Seq: 12, Score: 0.6}, {Seq: 18, Score: 0.5}}, Now: t0}
	c, err := memory.BuildContext(cfgBudget(600), in)
	if err != nil {
		t.Fatal(err)
	}
	if got := seqs(c.Recent); !slices.Contains(got, 28) || slices.Contains(got, 16) {
		t.Fatalf("recent %v, want 28 in it and not 16", got)
	}
	if got := seqs(c.Semantic); fmt.Sprint(got) != "[10 12 18]" {
		t.Fatalf("semantic %v, want [10 12 18]: 14 repeats 10, 16 repeats recent 28", got)
	}
	if c.Metadata.HitsIgnored != 2 {
		t.Fatalf("hits ignored %d, want 2", c.Metadata.HitsIgnored)
	}
}

// TestBuildContextSearchesOnlyWhenSomethingIsLeftOut: Input.Search is called once when the
// recent tier leaves an older message out, and its hits fill the semantic tier as Hits
// would; when the whole history fits it is not called at all (a hit could only name a
// message the context already holds).
func TestBuildContextSearchesOnlyWhenSomethingIsLeftOut(t *testing.T) {
	ms := msgs(10, 10, 10, 10, 10, 100, 100, 100, 100, 100) // seqs 10..28
	calls := 0
	search := func() []memory.Hit {
		calls++
		return []memory.Hit{{Seq: 10, Score: 0.9}, {Seq: 12, Score: 0.8}}
	}
	// Budget 600: the newest messages fill the recent tier, the old short ones are out.
	c, err := memory.BuildContext(cfgBudget(600), memory.Input{Messages: ms, Search: search, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("search called %d times with messages left out, want 1", calls)
	}
	withHits, err := memory.BuildContext(cfgBudget(600), memory.Input{Messages: ms, Hits: search(), Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := seqs(c.Semantic), seqs(withHits.Semantic); fmt.Sprint(got) != "[10 12]" || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("semantic %v with Search, %v with the same Hits; want [10 12] for both", got, want)
	}
	// A budget that holds every message: no search.
	calls = 0
	c, err = memory.BuildContext(cfgBudget(100_000), memory.Input{Messages: ms, Search: search, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 0 || len(c.Recent) != len(ms) {
		t.Fatalf("search called %d times, %d of %d messages recent; want 0 calls and all recent", calls, len(c.Recent), len(ms))
	}
}
