package session_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// TestLongSessionMemory runs a long session through the grain against mock-llm: one step
// probes a thousand times (~2,000 history messages; 300 with -short) (one early result holds a fact), a second step asks for the
// fact. Every step call's context stays within the budget, summaries are regenerated
// only once the unsummarized history passes the threshold, and the fact comes back to
// the second step through the semantic tier.
func TestLongSessionMemory(t *testing.T) {
	const (
		budget    = 3000
		threshold = 1500
	)
	probes := 1000 // ~2,000 history messages
	if testing.Short() {
		probes = 300
	}
	reg := probeRegistry(t, "")
	s, err := mock.ParseScript([]byte(`{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s1\",\"type\":\"custom\",\"description\":\"Probe the sensors one by one\"},{\"id\":\"s2\",\"type\":\"custom\",\"description\":\"What is the vault code?\",\"dependencies\":[\"s1\"]}]}"},
		{"system_match":"FATHOM-ROLE: summarizer","response":"Summary: the agent probed the sensors many times."},
		{"system_match":"Current step: What is the vault code","context_match":"ZEBRA-42","response":"The vault code is ZEBRA-42."},
		{"system_match":"Current step: What is the vault code","response":"I do not know the vault code."},
		{"system_match":"Current step: Probe the sensors","times":` + fmt.Sprint(probes) + `,"tool_calls":[{"name":"probe","arguments":"{\"n\":{{.N}}}"}]},
		{"system_match":"Current step: Probe the sensors","response":"All sensors probed."}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	h := startHarness(t, harnessOpts{script: &s, tools: &tools.Executor{Registry: reg}, cfg: func(c *session.Config) {
		c.MaxIterations = uint32(probes + 10)
		c.MaxLLMCalls = 0 // unlimited: the probes alone are more than the default
		c.ContextBudget = budget
		c.Summary = memory.SummaryConfig{Threshold: threshold, TargetTokens: 200, InputBudget: 48000}
	}})
	if _, err := h.start("long", "c1", "find the vault code"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "long", 6*time.Minute)
	mustComplete(t, evs)
	if got := evs[len(evs)-1].GetSessionCompleted().GetResult(); got != "The vault code is ZEBRA-42." {
		t.Fatalf("result %q: the fact did not come back", got)
	}

	// Replay the history's stored counts and check every context and every summary.
	type hmsg struct {
		seq    uint64
		tokens int
	}
	var hist []hmsg
	var through uint64
	stepCalls, summaries, withSummary := 0, 0, 0
	var last *messages.LlmResponded
	for _, ev := range evs {
		switch p := ev.GetPayload().(type) {
		case *messages.Event_StepStarted:
			if p.StepStarted.GetOpeningTokens() == 0 {
				t.Fatalf("step_started %d without opening tokens", ev.GetSeq())
			}
			hist = append(hist, hmsg{ev.GetSeq(), int(p.StepStarted.GetOpeningTokens())})
		case *messages.Event_ToolResult:
			if p.ToolResult.GetTokens() == 0 {
				t.Fatalf("tool_result %d without tokens", ev.GetSeq())
			}
			hist = append(hist, hmsg{ev.GetSeq(), int(p.ToolResult.GetTokens())})
		case *messages.Event_LlmResponded:
			r := p.LlmResponded
			if r.GetStepId() == "" {
				continue // the planner's answer is not history
			}
			if r.GetTokens() == 0 {
				t.Fatalf("llm_responded %d without tokens", ev.GetSeq())
			}
			hist = append(hist, hmsg{ev.GetSeq(), int(r.GetTokens())})
			c := r.GetContext()
			if c == nil || c.GetBudget() != budget || c.GetTotalTokens() == 0 || c.GetTotalTokens() > budget || c.GetRecentCount() == 0 {
				t.Fatalf("llm_responded %d: context %v (budget %d)", ev.GetSeq(), c, budget)
			}
			stepCalls++
			if c.GetHasSummary() {
				withSummary++
			}
			last = r
		case *messages.Event_SummaryUpdated:
			u := p.SummaryUpdated
			covered := 0
			for _, m := range hist {
				if m.seq > through && m.seq <= u.GetCoveredThroughSeq() {
					covered += m.tokens
				}
			}
			if covered <= threshold {
				t.Fatalf("summary_updated %d covers %d new tokens, not above the threshold %d", ev.GetSeq(), covered, threshold)
			}
			if u.GetContent() == "" || u.GetTokens() == 0 {
				t.Fatalf("summary_updated %v", u)
			}
			through = u.GetCoveredThroughSeq()
			summaries++
		}
	}
	if stepCalls < probes+2 {
		t.Fatalf("%d step calls, want at least %d", stepCalls, probes+2)
	}
	if summaries == 0 || withSummary == 0 {
		t.Fatalf("%d summary_updated events, %d calls with a summary", summaries, withSummary)
	}
	if c := last.GetContext(); c.GetSemanticCount() == 0 {
		t.Fatalf("the question's call had no semantic hits: %v", c)
	}
	total := 0
	for _, m := range hist {
		total += m.tokens
	}
	if total <= 2*budget {
		t.Fatalf("history of %d tokens is too short to test the budget", total)
	}
	t.Logf("%d history messages (%d tokens), %d step calls, %d summaries, last context %v", len(hist), total, stepCalls, summaries, last.GetContext())
}

// TestSummarizerFailureNeverFailsTheSession: a summarizer that always errors leaves the
// session without a summary, and the session completes.
func TestSummarizerFailureNeverFailsTheSession(t *testing.T) {
	reg := probeRegistry(t, "")
	s, err := mock.ParseScript([]byte(`{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s1\",\"type\":\"custom\",\"description\":\"Probe the sensors one by one\"}]}"},
		{"system_match":"FATHOM-ROLE: summarizer","status":500,"error_message":"summarizer down"},
		{"system_match":"Current step: Probe the sensors","times":60,"tool_calls":[{"name":"probe","arguments":"{\"n\":{{.N}}}"}]},
		{"system_match":"Current step: Probe the sensors","response":"All sensors probed."}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	h := startHarness(t, harnessOpts{script: &s, tools: &tools.Executor{Registry: reg}, cfg: func(c *session.Config) {
		c.MaxIterations = 100
		c.ContextBudget = 3000
		c.Summary = memory.SummaryConfig{Threshold: 200, TargetTokens: 100, InputBudget: 48000}
	}})
	if _, err := h.start("nosum", "c1", "probe"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "nosum", time.Minute)
	mustComplete(t, evs)
	if n := count(evs, "summary_updated"); n != 0 {
		t.Fatalf("%d summary_updated events from a failing summarizer", n)
	}
	for _, ev := range ofType(evs, "llm_responded") {
		if c := ev.GetLlmResponded().GetContext(); c != nil && (c.GetTotalTokens() > 3000 || c.GetHasSummary()) {
			t.Fatalf("context %v", c)
		}
	}
}

// TestSessionModelCountsWithItsEncoding: a session started with a model other than the
// node's default counts its messages with its model's tokenizer (gpt-4: cl100k_base),
// while a session of the node's default model (gpt-4o-mini: o200k_base) uses the node's.
func TestSessionModelCountsWithItsEncoding(t *testing.T) {
	const answer = "検索結果によると、答えは東京都千代田区の図書館にあります。詳細は後ほど報告します。"
	h := startHarness(t, harnessOpts{script: script(t,
		`{"tool_match":"value of","response":"`+answer+`"}`,
		`{"match":"Step: find it","tool_calls":[{"name":"lookup","arguments":"{\"key\":\"k1\"}"}]}`,
	)})
	o200k, err := memory.GetTokenizer(memory.EncodingO200K)
	if err != nil {
		t.Fatal(err)
	}
	cl100k, err := memory.GetTokenizer(memory.EncodingCL100K)
	if err != nil {
		t.Fatal(err)
	}
	answerMsg := llm.Message{Role: "assistant", Content: answer}
	if o200k.CountMessage(answerMsg) == cl100k.CountMessage(answerMsg) {
		t.Fatal("the answer counts the same in both encodings: the test cannot tell them apart")
	}
	for _, c := range []struct {
		id, model string
		tok       *memory.Tokenizer
	}{{"default", "", o200k}, {"gpt4", "gpt-4", cl100k}} {
		_, err := h.node.Session(c.id).Start(&messages.StartRequest{CommandId: "c1", Goal: "goal",
			Config: &messages.SessionConfig{Model: c.model}}, cluster.WithTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		evs := waitTerminal(t, h.j, c.id, 20*time.Second)
		mustComplete(t, evs)
		checked := 0
		for _, ev := range evs {
			var msg llm.Message
			var got uint32
			switch p := ev.GetPayload().(type) {
			case *messages.Event_LlmResponded:
				r := p.LlmResponded
				if r.GetStepId() == "" {
					continue
				}
				msg, got = llm.Message{Role: "assistant", Content: r.GetContent()}, r.GetTokens()
				for _, tc := range r.GetToolCalls() {
					msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: tc.GetId(), Name: tc.GetName(), Arguments: tc.GetArguments()})
				}
			case *messages.Event_ToolResult:
				r := p.ToolResult
				msg, got = llm.Message{Role: "tool", Content: r.GetResult(), ToolCallID: r.GetCallId()}, r.GetTokens()
			default:
				continue
			}
			if want := uint32(c.tok.CountMessage(msg)); got != want {
				t.Fatalf("session %s (%s): %s %d stores %d tokens, want %d (%s)", c.id, c.model, ev.Type(), ev.GetSeq(), got, want, c.tok.Name())
			}
			checked++
		}
		if checked != 3 {
			t.Fatalf("session %s: checked %d messages, want 3", c.id, checked)
		}
	}
}

// TestActivationReembedsAndSummarizes: a session waits at a breakpoint on a node whose
// summarizer is down, so its long history has no summary. A second node (fresh
// in-process vector store, working summarizer) activates it: the history is embedded
// again, so the semantic tier finds the early fact, and the summary is regenerated
// before any new model answer. After the resume the fact comes back through the
// semantic tier.
func TestActivationReembedsAndSummarizes(t *testing.T) {
	const (
		probes    = 40
		threshold = 600
	)
	reg := probeRegistry(t, ";"+strings.Repeat(" reading nominal;", 30))
	mkScript := func(summarizer string) *mock.Script {
		s, err := mock.ParseScript([]byte(`{"rules":[
			{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s1\",\"type\":\"custom\",\"description\":\"Probe the sensors one by one\"},{\"id\":\"s2\",\"type\":\"custom\",\"description\":\"What is the vault code?\",\"dependencies\":[\"s1\"]}]}"},
			` + summarizer + `,
			{"system_match":"Current step: What is the vault code","context_match":"ZEBRA-42","response":"The vault code is ZEBRA-42."},
			{"system_match":"Current step: What is the vault code","response":"I do not know the vault code."},
			{"system_match":"Current step: Probe the sensors","times":` + fmt.Sprint(probes) + `,"tool_calls":[{"name":"probe","arguments":"{\"n\":{{.N}}}"}]},
			{"system_match":"Current step: Probe the sensors","response":"All sensors probed."}
		]}`))
		if err != nil {
			t.Fatal(err)
		}
		return &s
	}
	cfg := func(c *session.Config) {
		c.MaxIterations = probes + 10
		c.ContextBudget = 3000
		c.Summary = memory.SummaryConfig{Threshold: threshold, TargetTokens: 100, InputBudget: 48000}
	}
	j := openJournal(t)
	defer j.Close()
	ctx := context.Background()

	// Node 1: the summarizer always fails; the session stops before step s2.
	h1 := startHarness(t, harnessOpts{journal: j, cfg: cfg, tools: &tools.Executor{Registry: reg},
		script: mkScript(`{"system_match":"FATHOM-ROLE: summarizer","status":500,"error_message":"summarizer down"}`)})
	if _, err := h1.start("act", "c1", "find the vault code"); err != nil {
		t.Fatal(err)
	}
	if _, err := h1.node.Session("act").SetBreakpoint(&messages.SetBreakpointRequest{CommandId: "c2",
		Breakpoint: &messages.Breakpoint{Id: "b", Position: "before", StepId: "s2"}}, call()); err != nil {
		t.Fatal(err)
	}
	waitInterrupted(t, h1, "act")
	evs := storedEvents(t, j, "act")
	if n := count(evs, "summary_updated"); n != 0 {
		t.Fatalf("%d summaries from a failing summarizer", n)
	}
	var factSeq uint64
	for _, ev := range evs {
		if strings.Contains(ev.GetToolResult().GetResult(), "ZEBRA-42") {
			factSeq = ev.GetSeq()
		}
	}
	if factSeq == 0 {
		t.Fatal("the fact was never recorded")
	}
	lastSeq := evs[len(evs)-1].GetSeq()
	stopNode(t, h1)

	// Node 2: activating the session re-embeds its history and regenerates its summary.
	h2 := startHarness(t, harnessOpts{journal: j, cfg: cfg, tools: &tools.Executor{Registry: reg},
		script: mkScript(`{"system_match":"FATHOM-ROLE: summarizer","response":"Summary: the agent probed the sensors many times."}`)})
	if hits, err := h2.node.Vectors().Search(ctx, "default", "act", hashembed.Vector("What is the vault code?", hashembed.DefaultDimensions), 20); err != nil || len(hits) != 0 {
		t.Fatalf("the new node's store already has %v (%v)", hits, err)
	}
	if _, err := h2.state("act"); err != nil { // activates the session
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		hits, err := h2.node.Vectors().Search(ctx, "default", "act", hashembed.Vector("What is the vault code?", hashembed.DefaultDimensions), 20)
		return err == nil && len(hits) > 0 && hits[0].Seq == factSeq
	}, "the re-embedded history does not bring back the fact (seq %d) first", factSeq)
	var sum *messages.SummaryUpdated
	testenv.Eventually(t, 10*time.Second, func() bool {
		for _, ev := range storedEvents(t, j, "act") {
			if s := ev.GetSummaryUpdated(); s != nil {
				sum = s
			}
		}
		return sum != nil
	}, "no summary_updated after the activation")
	if sum.GetCoveredThroughSeq() > lastSeq || sum.GetCoveredThroughSeq() < factSeq || sum.GetTokens() == 0 {
		t.Fatalf("summary_updated %v (history through seq %d)", sum, lastSeq)
	}
	for _, ev := range storedEvents(t, j, "act")[lastSeq:] {
		if ev.Type() != "summary_updated" {
			t.Fatalf("%s %d while the session was interrupted", ev.Type(), ev.GetSeq())
		}
	}

	if _, err := h2.node.Session("act").Resume(&messages.ResumeRequest{CommandId: "c3"}, call()); err != nil {
		t.Fatal(err)
	}
	evs = waitTerminal(t, j, "act", 20*time.Second)
	mustComplete(t, evs)
	last := ofType(evs, "llm_responded")
	ans := last[len(last)-1].GetLlmResponded()
	if ans.GetContent() != "The vault code is ZEBRA-42." || ans.GetContext().GetSemanticCount() == 0 || !ans.GetContext().GetHasSummary() {
		t.Fatalf("final answer %q with context %v", ans.GetContent(), ans.GetContext())
	}
}

// probeRegistry is a registry of one tool, probe, whose reading of sensor 3 holds the
// vault code (ZEBRA-42); every other reading is "nothing notable" and pad (long readings
// make a history outgrow a small context budget).
func probeRegistry(t *testing.T, pad string) *tools.Registry {
	t.Helper()
	type probeArgs struct {
		N int `json:"n"`
	}
	reg, err := tools.NewRegistry(tools.MustNew("probe", "Probes sensor n.", tools.SandboxNone, func(_ context.Context, a probeArgs) (any, error) {
		if a.N == 3 {
			return fmt.Sprintf("probe %d: the vault code is ZEBRA-42", a.N), nil
		}
		return fmt.Sprintf("probe %d: nothing notable%s", a.N, pad), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return reg
}
