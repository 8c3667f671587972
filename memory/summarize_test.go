package memory_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
)

func TestSummaryTrigger(t *testing.T) {
	cfg := memory.DefaultSummaryConfig()
	ms := msgs(1000, 1000, 1000, 1000, 1) // seqs 10..18
	if got := memory.UnsummarizedTokens(ms, 0); got != 4001 {
		t.Fatalf("unsummarized %d", got)
	}
	if got := memory.UnsummarizedTokens(ms, 12); got != 2001 {
		t.Fatalf("after seq 12: %d", got)
	}
	if !memory.ShouldSummarize(ms, nil, cfg) {
		t.Fatal("4001 > 4000 must trigger")
	}
	if memory.ShouldSummarize(ms[:4], nil, cfg) {
		t.Fatal("4000 must not trigger (strictly more than the threshold)")
	}
	if memory.ShouldSummarize(ms, &memory.Summary{Through: 10}, cfg) {
		t.Fatal("3001 uncovered must not trigger")
	}
	cfg.Threshold = 100
	if !memory.NeedsSummary(101, cfg) || memory.NeedsSummary(100, cfg) {
		t.Fatal("configured threshold ignored")
	}
	if err := (memory.SummaryConfig{}).Validate(); !errors.Is(err, memory.ErrInvalid) {
		t.Fatalf("zero config: %v", err)
	}
}

func TestSummarize(t *testing.T) {
	cfg := memory.DefaultSummaryConfig()
	ms := []memory.Message{
		{Seq: 3, Role: "user", Content: "Remember: the deploy key is ZEBRA-42.", Tokens: 15},
		{Seq: 4, Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "web_search", Arguments: `{"q":"zebra"}`}}, Tokens: 20},
		{Seq: 5, Role: "tool", ToolCallID: "c1", Content: "results", Tokens: 8},
		{Seq: 7, Role: "assistant", Content: "Noted.", Tokens: 6},
	}
	call, err := memory.Summarize(memory.SummaryInput{Previous: &memory.Summary{Content: "OLD", Through: 2}, Messages: ms}, "SYSTEM", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if call.Through != 7 || call.From != 3 || call.UsesPrevious || call.InputTokens != 49 {
		t.Fatalf("call %+v", call)
	}
	req := call.Request
	if len(req.Messages) != 2 || req.Messages[0].Content != "SYSTEM" || req.MaxTokens != 4000 {
		t.Fatalf("request %+v", req)
	}
	user := req.Messages[1].Content
	for _, want := range []string{"[#3 user]\nRemember: the deploy key is ZEBRA-42.", "calls tool web_search", "[#5 tool result of c1]\nresults", "[#7 assistant]\nNoted."} {
		if !strings.Contains(user, want) {
			t.Errorf("transcript lacks %q:\n%s", want, user)
		}
	}
	if strings.Contains(user, "OLD") {
		t.Error("full history fits: the previous summary must not be used (full replacement)")
	}

	// An input budget too small for the history: newest messages plus the previous summary.
	cfg.InputBudget = 15
	call, err = memory.Summarize(memory.SummaryInput{Previous: &memory.Summary{Content: "OLD", Through: 4}, Messages: ms}, "SYSTEM", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if call.From != 5 || !call.UsesPrevious || !strings.Contains(call.Request.Messages[1].Content, "OLD") || strings.Contains(call.Request.Messages[1].Content, "ZEBRA") {
		t.Fatalf("truncated call %+v", call)
	}
	// At least the newest message, even when it alone exceeds the budget.
	cfg.InputBudget = 1
	if call, err = memory.Summarize(memory.SummaryInput{Messages: ms}, "S", cfg); err != nil || call.From != 7 || !strings.Contains(call.Request.Messages[1].Content, "not available") {
		t.Fatalf("tiny budget: %+v %v", call, err)
	}
	if _, err := memory.Summarize(memory.SummaryInput{}, "S", memory.DefaultSummaryConfig()); !errors.Is(err, memory.ErrInvalid) {
		t.Fatalf("no messages: %v", err)
	}
}

// TestSummarizeElidesOversizeMessages: a message larger than half the input budget is
// sent elided (head, tail, a note naming its event), and the messages before it still
// fit beside it.
func TestSummarizeElidesOversizeMessages(t *testing.T) {
	tk := tokenizer(t, memory.EncodingO200K)
	cfg := memory.DefaultSummaryConfig()
	out := bigText(230<<10, "out")
	mk := func(m memory.Message) memory.Message { m.Tokens = tk.CountMessage(m.LLM()); return m }
	ms := []memory.Message{
		mk(memory.Message{Seq: 3, Role: "user", Content: "Remember: the deploy key is ZEBRA-42."}),
		mk(memory.Message{Seq: 4, Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "code_execute", Arguments: `{"code":"dump()"}`}}}),
		mk(memory.Message{Seq: 5, Role: "tool", ToolCallID: "c1", Content: out}),
	}
	call, err := memory.Summarize(memory.SummaryInput{Messages: ms, Counter: tk, Origin: "session s-1"}, "SYSTEM", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if call.From != 3 || call.Elided != 1 || call.InputTokens > cfg.InputBudget {
		t.Fatalf("call %+v", call)
	}
	user := call.Request.Messages[1].Content
	if real := tk.Count(user); real > cfg.InputBudget+200 {
		t.Fatalf("the transcript is %d tokens for an input budget of %d", real, cfg.InputBudget)
	}
	for _, want := range []string{"ZEBRA-42", "calls tool code_execute", out[:2000], out[len(out)-1000:], "whole text is event seq 5 of session s-1"} {
		if !strings.Contains(user, want) {
			t.Fatalf("transcript lacks %.80q", want)
		}
	}
}
