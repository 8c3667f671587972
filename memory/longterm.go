package memory

import (
	"strings"

	"github.com/fathom-agents/fathom/llm"
)

// LongTermPrefix starts the system message that carries the user's long-term memories
// (persistence/ltm), so the model knows where they come from.
const LongTermPrefix = "[Long-term memory: what earlier sessions of this user saved]\n"

// LongTerm is one long-term memory item offered to a context.
type LongTerm struct {
	// ID identifies the item (ltm.Item.ID).
	ID string
	// Text is the item's text.
	Text string
	// Tokens is what the item's line (LongTermLine) costs in the memory message.
	Tokens int
	// Score is the item's search score (higher is better).
	Score float32
}

// LongTermLine is how an item is written in the memory message.
func LongTermLine(text string) string { return "- " + text }

// FitLongTerm chooses, best first, the memories that fit room tokens together with
// overhead (the memory message's own cost: its role and LongTermPrefix), skipping those
// that do not fit. It returns the chosen ones, in the order given, and their cost with
// the overhead (0 when none is chosen).
func FitLongTerm(mems []LongTerm, overhead, room int) ([]LongTerm, int) {
	if len(mems) == 0 || overhead >= room {
		return nil, 0
	}
	left := room - overhead
	var out []LongTerm
	for _, m := range mems {
		if m.Tokens < 0 || m.Tokens > left || strings.TrimSpace(m.Text) == "" {
			continue
		}
		left -= m.Tokens
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, 0
	}
	return out, room - left
}

// LongTermMessage is the system message carrying mems: LongTermPrefix and one line per
// memory (LongTermLine).
func LongTermMessage(mems []LongTerm) llm.Message {
	lines := make([]string, len(mems))
	for i, m := range mems {
		lines[i] = LongTermLine(m.Text)
	}
	return llm.Message{Role: "system", Content: LongTermPrefix + strings.Join(lines, "\n")}
}
