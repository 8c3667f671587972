package memory_test

import (
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/memory"
)

// TestLongTermInsideTheSemanticSlice: the user's long-term memories are paid from the
// semantic share (never more, even when the recent tier leaves budget unused), counted
// in the total, sent as one system message after the system prompt, best first, and
// a memory that does not fit is left out whole.
func TestLongTermInsideTheSemanticSlice(t *testing.T) {
	cfg := cfgBudget(1003) // A = 1000: summary 300, recent 500, semantic 200
	mems := []memory.LongTerm{
		{ID: "a", Text: "The user's order id is ORD-7", Tokens: 60},
		{ID: "big", Text: "too big for what is left", Tokens: 150},
		{ID: "b", Text: "The user prefers metric units", Tokens: 50},
		{ID: "c", Text: "The user lives in Porto", Tokens: 70},
	}
	in := memory.Input{SystemPrompt: "sys", Messages: msgs(10, 10), LongTerm: mems, LongTermOverhead: 10, Now: t0}
	c, err := memory.BuildContext(cfg, in)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range c.LongTerm {
		got = append(got, m.ID)
	}
	if strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("memories %v, want a,b,c (big does not fit the 200-token slice after a)", got)
	}
	if md := c.Metadata; md.LongTermCount != 3 || md.LongTermTokens != 10+60+50+70 || md.LongTermTokens > md.SemanticShare {
		t.Fatalf("metadata %+v", md)
	}
	if c.TotalTokens != 3+20+190 || c.TotalTokens > cfg.Budget {
		t.Fatalf("total %d, want system 0 + reply 3 + recent 20 + memories 190", c.TotalTokens)
	}
	out := c.Messages()
	if out[0].Content != "sys" || out[1].Role != "system" || !strings.HasPrefix(out[1].Content, memory.LongTermPrefix) ||
		!strings.Contains(out[1].Content, "- The user's order id is ORD-7\n- The user prefers metric units\n- The user lives in Porto") {
		t.Fatalf("messages %+v", out[:2])
	}
	// Without memories, no memory message.
	in.LongTerm = nil
	if c, _ := memory.BuildContext(cfg, in); len(c.Messages()) != 3 || c.Metadata.LongTermTokens != 0 {
		t.Fatalf("without memories: %+v", c.Messages())
	}
}

func TestFitLongTerm(t *testing.T) {
	if got, cost := memory.FitLongTerm([]memory.LongTerm{{Text: "x", Tokens: 5}}, 10, 10); got != nil || cost != 0 {
		t.Fatalf("overhead fills the room: %v %d", got, cost)
	}
	if got, cost := memory.FitLongTerm([]memory.LongTerm{{Text: "x", Tokens: 5}, {Text: " ", Tokens: 1}}, 2, 10); len(got) != 1 || cost != 7 {
		t.Fatalf("got %v %d", got, cost)
	}
}
