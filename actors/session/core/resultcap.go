package core

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/tools"
)

// Bounds of Config.MaxToolResultBytes.
const (
	// DefaultMaxToolResultBytes is the cap of a tool result when Config.MaxToolResultBytes is 0: 256 KiB.
	DefaultMaxToolResultBytes = 256 << 10
	// MinMaxToolResultBytes is the smallest cap: room for a head, a tail and the note.
	MinMaxToolResultBytes = 1 << 10
	// MaxToolResultBytesLimit is the largest cap: a tool_result event holding a result
	// of this size, with its ids, stays under the journal's persistence.MaxEventBytes.
	MaxToolResultBytesLimit = persistence.MaxEventBytes - 64<<10
	// ToolResultPreviewBytes is the most of a truncated result's head, and of its tail,
	// that its tool_result event keeps (never more than a quarter of the cap each).
	ToolResultPreviewBytes = 2 << 10
)

// MaxToolResult is MaxToolResultBytes, or DefaultMaxToolResultBytes when it is 0.
func (c Config) MaxToolResult() int {
	if c.MaxToolResultBytes > 0 {
		return c.MaxToolResultBytes
	}
	return DefaultMaxToolResultBytes
}

// ToolResultBytes is what r puts in its tool_result event, in bytes: the output, or a
// failure's message and the text the model reads (which holds the message again).
func ToolResultBytes(r tools.Result) int {
	if r.Err != nil {
		return len(r.Err.Message) + len(r.Err.FormatForLLM())
	}
	return len(r.Output)
}

// TruncateToolResult returns r with what the model reads cut to its first and last
// bytes (at most ToolResultPreviewBytes each, and a quarter of max each) around
// "[truncated: note]", e.g. "[truncated: 4194304 bytes; full result stored as
// artifact S/results/call_1]". A failure keeps its type and retryability: its message
// is the full text the model would have read, cut the same way, without the context.
// Cuts fall on UTF-8 character boundaries.
func TruncateToolResult(r tools.Result, max int, note string) tools.Result {
	n := min(ToolResultPreviewBytes, max/4)
	if r.Err == nil {
		r.Output = preview(r.Output, n, note)
		return r
	}
	e := *r.Err
	e.Message, e.Context = preview(r.Err.FormatForLLM(), n, note), nil
	r.Err = &e
	return r
}

// preview is s's first and last n bytes (fewer, to end on a character boundary) around
// the note.
func preview(s string, n int, note string) string {
	head := s[:min(n, len(s))]
	for len(head) > 0 && len(head) < len(s) && !utf8.RuneStart(s[len(head)]) {
		head = head[:len(head)-1]
	}
	tail := s[len(s)-min(n, len(s)-len(head)):]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	var b strings.Builder
	b.Grow(len(head) + len(tail) + len(note) + 128)
	b.WriteString(head)
	fmt.Fprintf(&b, "\n…\n[truncated: %s; shown: the first %d and the last %d bytes]\n…\n", note, len(head), len(tail))
	b.WriteString(tail)
	return b.String()
}
