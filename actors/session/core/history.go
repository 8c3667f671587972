package core

import (
	"slices"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
)

// HistoryCache keeps a session's History between step calls so that building a step
// call's context costs the same at 10,000 messages as at 200: a call appends the
// messages recorded since the last one instead of rebuilding the whole history. Any
// change other than new messages at the end (a step retried or re-planned, a sub-agent's
// hand-off older than the newest message, a state reloaded with another history) falls
// back to History once. The zero value is ready to use; it is not safe for concurrent
// use (the grain owns one).
type HistoryCache struct {
	goal string
	// thread is the length of the state's thread the cache was built with.
	thread int
	msgs   []memory.Message
	marks  []historyMark
}

// historyMark is what the cache took of one step in the history: the step's identity
// and how many transcript entries, ending with last.
type historyMark struct {
	startedSeq  uint64
	description string
	n           int
	last        *messages.TranscriptEntry
}

// History returns History(s), built incrementally. The slice is shared with the cache:
// callers must not modify it (appending to it is safe: its capacity is its length).
func (h *HistoryCache) History(s *messages.SessionState) []memory.Message {
	if msgs, ok := h.extend(s); ok {
		return msgs
	}
	h.rebuild(s)
	return h.msgs[:len(h.msgs):len(h.msgs)]
}

// Reset forgets the cached history (the next call rebuilds it).
func (h *HistoryCache) Reset() { *h = HistoryCache{} }

// extend appends what s recorded since the cached history, when that is all that
// changed, and reports whether it could.
func (h *HistoryCache) extend(s *messages.SessionState) ([]memory.Message, bool) {
	if h.msgs == nil || s.GetGoal() != h.goal || len(s.GetThread()) != h.thread {
		return nil, false
	}
	k := 0
	start := len(h.msgs)
	var lastSeq uint64
	if start > 0 {
		lastSeq = h.msgs[start-1].Seq
	}
	for _, st := range s.GetSteps() {
		if !InHistory(st) {
			continue
		}
		tr := st.GetTranscript()
		from := 0
		if k < len(h.marks) {
			m := &h.marks[k]
			if m.startedSeq != st.GetStartedSeq() || m.description != st.GetStep().GetDescription() || len(tr) < m.n ||
				(m.n > 0 && !sameEntry(tr[m.n-1], m.last)) {
				h.msgs = h.msgs[:start]
				return nil, false
			}
			from = m.n
		} else {
			if st.GetStartedSeq() <= lastSeq {
				h.msgs = h.msgs[:start]
				return nil, false
			}
			lastSeq = st.GetStartedSeq()
			h.msgs = append(h.msgs, openingOf(s, st))
		}
		for _, e := range tr[from:] {
			if e.GetSeq() <= lastSeq {
				h.msgs = h.msgs[:start]
				return nil, false
			}
			lastSeq = e.GetSeq()
			h.msgs = append(h.msgs, transcriptMessage(e))
		}
		k++
	}
	if k < len(h.marks) {
		h.msgs = h.msgs[:start]
		return nil, false
	}
	h.mark(s)
	return h.msgs[:len(h.msgs):len(h.msgs)], true
}

// historyRoom is the room a rebuilt cache keeps beyond a quarter of its history: the
// messages of a step or two.
const historyRoom = 8

// rebuild replaces the cache with History(s).
func (h *HistoryCache) rebuild(s *messages.SessionState) {
	h.goal, h.thread = s.GetGoal(), len(s.GetThread())
	// Room for the calls to come: the next appends do not copy the whole history again.
	// The room is proportional to the history (a session's cache is rebuilt on its first
	// call, when its history is a message or two: a fixed room of 64 messages was 7 kB
	// of every active session's memory); later appends grow it as append does.
	full := History(s)
	h.msgs = slices.Grow(full, len(full)/4+historyRoom)
	h.marks = h.marks[:0]
	h.mark(s)
}

// mark records what the cache holds of each step of s in the history.
func (h *HistoryCache) mark(s *messages.SessionState) {
	h.marks = h.marks[:0]
	for _, st := range s.GetSteps() {
		if !InHistory(st) {
			continue
		}
		tr := st.GetTranscript()
		m := historyMark{startedSeq: st.GetStartedSeq(), description: st.GetStep().GetDescription(), n: len(tr)}
		if len(tr) > 0 {
			m.last = tr[len(tr)-1]
		}
		h.marks = append(h.marks, m)
	}
}

// sameEntry reports whether two transcript entries are the same message (the grain's
// states are copies of each other, so entries are compared by value).
func sameEntry(a, b *messages.TranscriptEntry) bool {
	return a == b || (a.GetSeq() == b.GetSeq() && a.GetRole() == b.GetRole() && a.GetContent() == b.GetContent() &&
		a.GetToolCallId() == b.GetToolCallId() && a.GetTokens() == b.GetTokens() && len(a.GetToolCalls()) == len(b.GetToolCalls()))
}

// openingOf is the history message opening step st.
func openingOf(s *messages.SessionState, st *messages.StepState) memory.Message {
	return memory.Message{
		Seq: st.GetStartedSeq(), Role: "user", Content: OpeningMessage(s.GetGoal(), st.GetStep().GetDescription()),
		Tokens: int(st.GetOpeningTokens()),
	}
}

// transcriptMessage is the history message of transcript entry m.
func transcriptMessage(m *messages.TranscriptEntry) memory.Message {
	msg := memory.Message{Seq: m.GetSeq(), Role: m.GetRole(), Content: m.GetContent(), ToolCallID: m.GetToolCallId(), Tokens: int(m.GetTokens())}
	for _, c := range m.GetToolCalls() {
		msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.GetId(), Name: c.GetName(), Arguments: c.GetArguments()})
	}
	msg.Thinking = ThinkingOf(m.GetThinking())
	return msg
}

// ThinkingOf converts recorded thinking blocks to the provider's (nil for none).
func ThinkingOf(in []*messages.ThinkingBlock) []llm.ThinkingBlock {
	if len(in) == 0 {
		return nil
	}
	out := make([]llm.ThinkingBlock, len(in))
	for i, b := range in {
		out[i] = llm.ThinkingBlock{Thinking: b.GetThinking(), Signature: b.GetSignature(), RedactedData: b.GetRedactedData()}
	}
	return out
}

// ThinkingBlocks converts a provider's thinking blocks for recording (nil for none).
func ThinkingBlocks(in []llm.ThinkingBlock) []*messages.ThinkingBlock {
	if len(in) == 0 {
		return nil
	}
	out := make([]*messages.ThinkingBlock, len(in))
	for i, b := range in {
		out[i] = &messages.ThinkingBlock{Thinking: b.Thinking, Signature: b.Signature, RedactedData: b.RedactedData}
	}
	return out
}
