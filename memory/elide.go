package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/fathom-agents/fathom/llm"
)

// Elision. A message too large for the room it must fit in (a tool printing hundreds of
// kilobytes, a huge goal in a task brief) is not dropped: its text is cut in the middle,
// keeping the head and the tail, and the cut is replaced by a note saying how much was
// cut and where the whole text is (the event that recorded it). Tool call arguments are
// cut the same way, wrapped in a JSON object so they stay valid JSON.

// MessageCounter counts what a message costs in a request. *Tokenizer implements it;
// ByteCounter is the tokenizer-free upper bound.
type MessageCounter interface {
	CountMessage(m llm.Message) int
}

var _ MessageCounter = (*Tokenizer)(nil)

// ByteCounter counts a message as if every byte of its text were a token, plus the
// framing CountMessage adds. No BPE token is shorter than a byte, so it never counts
// less than a tokenizer: elisions made with it fit any encoding, at the price of
// keeping about a quarter of what a tokenizer would allow.
type ByteCounter struct{}

// CountMessage implements MessageCounter.
func (ByteCounter) CountMessage(m llm.Message) int {
	n := TokensPerMessage + len(m.Role) + len(m.Content)
	for _, c := range m.ToolCalls {
		n += TokensPerToolCall + len(c.Name) + len(c.Arguments)
	}
	return n
}

// WithContext returns c bound to ctx: it counts as c until ctx is done and as
// ByteCounter from then on (an upper bound, in constant time), and a count under way
// when ctx ends stops within a few thousand merges (Tokenizer.CountMessageContext) and
// falls back the same way. Give it to ContextConfig.Counter or Elide for work done on
// behalf of a call that can be cancelled: once the call is cancelled no more text is
// tokenised for it, and what is built meanwhile still fits its budget. A nil c is
// ByteCounter.
func WithContext(ctx context.Context, c MessageCounter) MessageCounter {
	if c == nil {
		return ByteCounter{}
	}
	return ctxCounter{ctx: ctx, c: c}
}

// ctxCounter is WithContext's counter.
type ctxCounter struct {
	ctx context.Context
	c   MessageCounter
}

// CountMessage implements MessageCounter.
func (c ctxCounter) CountMessage(m llm.Message) int {
	tok, isTok := c.c.(*Tokenizer)
	switch {
	case c.ctx.Err() != nil:
		if isTok {
			tok.stopped.Add(1) // never begun
		}
	case !isTok:
		return c.c.CountMessage(m)
	default:
		if n, err := tok.CountMessageContext(c.ctx, m); err == nil {
			return n
		}
	}
	return ByteCounter{}.CountMessage(m)
}

// ElidedArgumentsKey is the key of the JSON object that replaces elided tool call
// arguments.
const ElidedArgumentsKey = "_elided_arguments"

// elider cuts messages down to a token allowance.
type elider struct {
	counter MessageCounter
	// origin names where recorded messages are kept, for the notes.
	origin string
}

func newElider(c MessageCounter, origin string) elider {
	if c == nil {
		c = ByteCounter{}
	}
	if origin == "" {
		origin = "the session's journal"
	}
	return elider{counter: c, origin: origin}
}

// elide returns m cut to cost at most allowance tokens (its Tokens set to the exact
// cost; cut says whether any text was cut), or ok false when not even the notes fit. A
// message that fits is returned as is.
func (e elider) elide(m Message, allowance int) (out Message, cut, ok bool) {
	if m.Tokens <= allowance {
		return m, false, true
	}
	pieces := make([]string, 1+len(m.ToolCalls))
	pieces[0] = m.Content
	total := len(m.Content)
	for i, c := range m.ToolCalls {
		pieces[i+1] = c.Arguments
		total += len(c.Arguments)
	}
	bare := m
	bare.Content, bare.ToolCalls = "", make([]llm.ToolCall, len(m.ToolCalls))
	for i, c := range m.ToolCalls {
		bare.ToolCalls[i] = llm.ToolCall{ID: c.ID, Name: c.Name}
	}
	base := e.counter.CountMessage(bare.LLM())
	if base >= allowance {
		return Message{}, false, false
	}
	if total <= 8*allowance {
		// Short text with a large stored count (another encoding's, or an estimate):
		// counting it whole is cheap, and it may fit as it is.
		if n := e.counter.CountMessage(m.LLM()); n <= allowance {
			m.Tokens = n
			return m, false, true
		}
	}
	if total == 0 {
		return Message{}, false, false
	}
	// Bytes per token of this message's text: the first cut aims at what the allowance
	// holds; an exact count then shrinks it until it fits.
	ratio := float64(total) / float64(max(m.Tokens-base, 1))
	keep := float64(allowance-base) * ratio
	for try := 0; try < 12; try++ {
		out := e.cut(m, pieces, int(keep))
		out.Tokens = e.counter.CountMessage(out.LLM())
		if out.Tokens <= allowance {
			return out, true, true
		}
		keep *= 0.9 * float64(allowance-base) / float64(max(out.Tokens-base, 1))
		if keep < 1 {
			keep = 0
		}
	}
	out = e.cut(m, pieces, 0)
	out.Tokens = e.counter.CountMessage(out.LLM())
	return out, true, out.Tokens <= allowance
}

// cut shares keep bytes between m's pieces (content, then each call's arguments),
// smallest first so a short piece stays whole, and cuts each piece to its share.
func (e elider) cut(m Message, pieces []string, keep int) Message {
	order := make([]int, len(pieces))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(pieces[order[a]]) < len(pieces[order[b]]) })
	shares := make([]int, len(pieces))
	left := keep
	for k, i := range order {
		fair := left / (len(order) - k)
		shares[i] = min(len(pieces[i]), fair)
		left -= shares[i]
	}
	out := m
	what := "message"
	if m.Role == "tool" {
		what = "tool result"
	}
	out.Content = e.cutText(pieces[0], shares[0], m.Seq, what)
	if len(m.ToolCalls) > 0 {
		out.ToolCalls = make([]llm.ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			args := e.cutText(pieces[i+1], shares[i+1], m.Seq, "arguments of "+c.Name)
			if args != pieces[i+1] {
				b, _ := json.Marshal(map[string]string{ElidedArgumentsKey: args})
				args = string(b)
			}
			out.ToolCalls[i] = llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: args}
		}
	}
	return out
}

// cutText keeps about keep bytes of text, 60% from its head and 40% from its tail
// (cut at line ends where one is near, and never inside a UTF-8 character), and puts a
// note where the middle was. Text no longer than keep is returned as is.
func (e elider) cutText(text string, keep int, seq uint64, what string) string {
	if len(text) <= keep {
		return text
	}
	headLen := keep * 3 / 5
	head := text[:runeStart(text, headLen)]
	if i := strings.LastIndexByte(head, '\n'); i >= len(head)*4/5 {
		head = head[:i+1]
	}
	tailFrom := len(text) - (keep - len(head))
	tailFrom = runeStart(text, max(tailFrom, len(head)))
	if i := strings.IndexByte(text[tailFrom:], '\n'); i >= 0 && i < (len(text)-tailFrom)/5 {
		tailFrom += i + 1
	}
	tail := text[tailFrom:]
	cut := len(text) - len(head) - len(tail)
	note := fmt.Sprintf("\n[... %d of %d bytes of this %s elided here to fit the context; the whole text is event seq %d of %s ...]\n",
		cut, len(text), what, seq, e.origin)
	if keep < 4*len(note) {
		// Little room: a short note, so more of the text fits.
		note = fmt.Sprintf("\n[...%d bytes elided; whole text: event seq %d...]\n", cut, seq)
	}
	return head + note + tail
}

// runeStart moves i back to the start of the UTF-8 character it falls in.
func runeStart(s string, i int) int {
	i = min(max(i, 0), len(s))
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// Elide returns m cut to cost at most maxTokens (counted with c; nil means
// ByteCounter), keeping the head and the tail of its text and putting a note where the
// middle was: how much was cut and that the whole text is event seq m.Seq of origin.
// Its Tokens is the exact cost of the result. A message that fits (by m.Tokens) is
// returned unchanged. ok is false when not even the note fits.
func Elide(m Message, maxTokens int, c MessageCounter, origin string) (out Message, ok bool) {
	out, _, ok = newElider(c, origin).elide(m, maxTokens)
	return out, ok
}
