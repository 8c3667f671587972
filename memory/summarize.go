package memory

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fathom-agents/fathom/llm"
)

// SummaryConfig configures when a session's summary is regenerated and what the
// summarizer is asked for.
type SummaryConfig struct {
	// Threshold: the summary is regenerated when the tokens of the messages it does not
	// cover exceed it. Default 4,000 (the seed's).
	Threshold int
	// TargetTokens is the size the summarizer is asked to aim for. Default 2,000. The
	// request's MaxTokens is twice this, a hard stop for a model that rambles.
	TargetTokens int
	// InputBudget bounds the transcript sent to the summarizer, in stored message
	// tokens. Default 48,000: well inside a 128k model, and history-length independent.
	InputBudget int
	// Model is the summarizer's model; empty means the provider's default.
	Model string
}

// DefaultSummaryConfig returns the seed's trigger (4,000) and target (2,000).
func DefaultSummaryConfig() SummaryConfig {
	return SummaryConfig{Threshold: 4000, TargetTokens: 2000, InputBudget: 48000}
}

// Validate reports a configuration that cannot work.
func (c SummaryConfig) Validate() error {
	if c.Threshold <= 0 || c.TargetTokens <= 0 || c.InputBudget <= 0 {
		return fmt.Errorf("%w: summary threshold, target and input budget must be positive, got %+v", ErrInvalid, c)
	}
	return nil
}

// UnsummarizedTokens returns the stored tokens of the messages newer than through (the
// Seq the current summary covers; 0 without a summary). msgs are in increasing Seq
// order; only the uncovered tail is read.
func UnsummarizedTokens(msgs []Message, through uint64) int {
	n := 0
	for i := len(msgs) - 1; i >= 0 && msgs[i].Seq > through; i-- {
		n += msgs[i].Tokens
	}
	return n
}

// NeedsSummary reports whether unsummarized tokens call for a new summary: more than
// cfg.Threshold.
func NeedsSummary(unsummarized int, cfg SummaryConfig) bool {
	return unsummarized > cfg.Threshold
}

// ShouldSummarize is NeedsSummary(UnsummarizedTokens(msgs, through), cfg), where through
// is what summary covers (0 when summary is nil). Call it after each recorded LLM
// response and when a session resumes.
func ShouldSummarize(msgs []Message, summary *Summary, cfg SummaryConfig) bool {
	var through uint64
	if summary != nil {
		through = summary.Through
	}
	return NeedsSummary(UnsummarizedTokens(msgs, through), cfg)
}

// SummaryInput is what a summary is regenerated from.
type SummaryInput struct {
	// Previous is the current summary, nil when there is none. It is used only when the
	// history does not fit the input budget, to stand for the messages left out.
	Previous *Summary
	// Messages are the session's recorded messages in increasing Seq order (the whole
	// history may be passed: only the newest that fit the input budget are read).
	Messages []Message
	// Counter counts the messages Summarize elides (nil: ByteCounter); Origin names
	// where they are kept whole, for the elision note (see Input.Origin).
	Counter MessageCounter
	Origin  string
}

// SummaryCall is a prepared summarizer call.
type SummaryCall struct {
	// Request is the chat request to send.
	Request llm.Request
	// Through is the Seq of the newest message the resulting summary covers: the
	// covered-through sequence of its summary_updated event.
	Through uint64
	// From is the Seq of the oldest message sent verbatim.
	From uint64
	// UsesPrevious is true when the previous summary stands in for older messages that
	// did not fit the input budget.
	UsesPrevious bool
	// InputTokens is the stored token count of the messages sent (elided ones at their
	// elided count).
	InputTokens int
	// Elided counts the messages sent with their middle cut: one message never takes
	// more than half the input budget.
	Elided int
}

// Summarize prepares the call that regenerates a session's summary from scratch (full
// replacement, the seed's mode): systemPrompt (the rendered "summarizer" template) and
// one user message holding the transcript of in.Messages. When the whole history does
// not fit cfg.InputBudget, the newest messages that fit are sent (at least one), preceded
// by the previous summary standing for the older ones. A message larger than half the
// input budget is elided to that (head and tail kept, the middle replaced by a note
// naming the event that holds it whole), so a huge tool output neither crowds out the
// rest of the transcript nor overflows the summarizer's context.
func Summarize(in SummaryInput, systemPrompt string, cfg SummaryConfig) (SummaryCall, error) {
	if err := cfg.Validate(); err != nil {
		return SummaryCall{}, err
	}
	msgs := in.Messages
	if len(msgs) == 0 {
		return SummaryCall{}, fmt.Errorf("%w: no messages to summarize", ErrInvalid)
	}
	el := newElider(in.Counter, in.Origin)
	half := max(cfg.InputBudget/2, 1)
	var over map[int]Message
	lo, used, elided := len(msgs), 0, 0
	for lo > 0 {
		m := msgs[lo-1]
		if lo < len(msgs) && m.Seq >= msgs[lo].Seq {
			return SummaryCall{}, fmt.Errorf("%w: messages out of order at seq %d", ErrInvalid, m.Seq)
		}
		if m.Tokens > half {
			if e, cut, ok := el.elide(m, half); ok {
				if over == nil {
					over = map[int]Message{}
				}
				over[lo-1], m = e, e
				if cut {
					elided++
				}
			}
		}
		if used+m.Tokens > cfg.InputBudget && lo < len(msgs) {
			break
		}
		used += m.Tokens
		lo--
	}
	call := SummaryCall{Through: msgs[len(msgs)-1].Seq, From: msgs[lo].Seq, InputTokens: used, Elided: elided}

	var b strings.Builder
	if lo > 0 && in.Previous != nil && in.Previous.Content != "" {
		call.UsesPrevious = true
		fmt.Fprintf(&b, "<previous_summary through_message=\"%d\">\n%s\n</previous_summary>\n\n", in.Previous.Through, in.Previous.Content)
	} else if lo > 0 {
		fmt.Fprintf(&b, "(Messages before #%d are not available.)\n\n", msgs[lo].Seq)
	}
	b.WriteString("<transcript>\n")
	for i := lo; i < len(msgs); i++ {
		m := msgs[i]
		if e, ok := over[i]; ok {
			m = e
		}
		writeTranscriptEntry(&b, m)
	}
	b.WriteString("</transcript>\n\nWrite the new summary of the whole conversation now.")

	call.Request = llm.Request{
		Model: cfg.Model,
		Messages: []llm.Message{
			{Role: "system", Content: systemPrompt},
			{Role: "user", Content: b.String()},
		},
		MaxTokens: 2 * cfg.TargetTokens,
	}
	return call, nil
}

// writeTranscriptEntry writes one message as "[#seq role]" then its text and tool calls.
func writeTranscriptEntry(b *strings.Builder, m Message) {
	b.WriteString("[#")
	b.WriteString(strconv.FormatUint(m.Seq, 10))
	b.WriteByte(' ')
	b.WriteString(m.Role)
	if m.ToolCallID != "" {
		b.WriteString(" result of ")
		b.WriteString(m.ToolCallID)
	}
	b.WriteString("]\n")
	if m.Content != "" {
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	for _, c := range m.ToolCalls {
		fmt.Fprintf(b, "(calls tool %s %s with id %s)\n", c.Name, c.Arguments, c.ID)
	}
	b.WriteByte('\n')
}
