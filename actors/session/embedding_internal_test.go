package session

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence/vectormem"
)

// embedState is a session of one custom step (opening at seq 1 of openingTokens) whose
// transcript holds one tool result per token count in tr (seqs 2, 3, ...), and a
// sub-agent's step started at seq 100 (its opening not in the history until it completes).
func embedState(openingTokens uint32, tr ...uint32) *messages.SessionState {
	st := &messages.StepState{Step: &messages.PlanStep{Id: "s1", Type: "custom", Description: "look"}, StartedSeq: 1, OpeningTokens: openingTokens}
	for i, n := range tr {
		st.Transcript = append(st.Transcript, &messages.TranscriptEntry{Role: "tool", Content: "result", Seq: uint64(2 + i), Tokens: n})
	}
	sub := &messages.StepState{Step: &messages.PlanStep{Id: "s2", Type: "researcher", Description: "dig"}, StartedSeq: 100}
	return &messages.SessionState{SessionId: "e", Goal: "g", Steps: []*messages.StepState{st, sub}}
}

// toolResult is the event recording the tool result at seq.
func toolResult(seq uint64) *messages.Event {
	return &messages.Event{Seq: seq, Payload: &messages.Event_ToolResult{ToolResult: &messages.ToolResult{StepId: "s1", Result: "result"}}}
}

// TestEmbeddingObserverIsLazy: with a 1,000-token budget (threshold 250) the observer
// embeds nothing while the history is smaller; the commit that takes it to 250 embeds
// the whole history (the sub-agent step's opening too), the next commits their own
// messages; an answer whose context cost half the budget embeds the history below the
// threshold; an activation re-embeds only a history past it.
func TestEmbeddingObserverIsLazy(t *testing.T) {
	cc := memory.DefaultContextConfig()
	cc.Budget = 1000
	if got := embedFrom(cc); got != 250 {
		t.Fatalf("embedFrom = %d, want 250 (half the recent share)", got)
	}
	log := slog.New(slog.DiscardHandler)
	// run tells o (a new observer, reembed) of commits (nil: none) and activates with act
	// (nil: no activation), then returns the seqs stored.
	run := func(t *testing.T, act *messages.SessionState, commits ...Commit) []uint64 {
		t.Helper()
		store, err := vectormem.New(hashembed.DefaultDimensions)
		if err != nil {
			t.Fatal(err)
		}
		w, err := memory.NewEmbedWorker(memory.EmbedWorkerConfig{Embedder: hashembed.New(hashembed.DefaultDimensions), Store: store})
		if err != nil {
			t.Fatal(err)
		}
		o := Embedding(w, true, cc)
		if act != nil {
			o.Activated("e", act, log)
		}
		for _, c := range commits {
			c.SessionID, c.Log = "e", log
			o.Committed(c)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Close(ctx); err != nil { // waits for the queued jobs
			t.Fatal(err)
		}
		hits, err := store.Search(ctx, "default", "e", hashembed.Vector("result", hashembed.DefaultDimensions), 1000)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for _, h := range hits {
			seqs = append(seqs, h.Seq)
		}
		slices.Sort(seqs)
		return seqs
	}
	below, at, past := embedState(100, 100), embedState(100, 100, 50), embedState(100, 100, 50, 10)
	if o := (embedObserver{from: 250}); o.embeds(below) || !o.embeds(at) || !o.embeds(past) || o.embeds(nil) {
		t.Fatal("embeds does not compare the history's stored tokens with the threshold")
	}
	t.Run("below", func(t *testing.T) {
		if got := run(t, nil, Commit{Events: []*messages.Event{toolResult(2)}, Prev: embedState(100), State: below}); len(got) != 0 {
			t.Fatalf("stored %v below the threshold", got)
		}
	})
	t.Run("crossing", func(t *testing.T) {
		got := run(t, nil,
			Commit{Events: []*messages.Event{toolResult(3)}, Prev: below, State: at},
			Commit{Events: []*messages.Event{toolResult(4)}, Prev: at, State: past})
		if want := []uint64{1, 2, 3, 4, 100}; !slices.Equal(got, want) {
			t.Fatalf("stored %v, want %v", got, want)
		}
	})
	t.Run("past", func(t *testing.T) {
		// Past the threshold before the commit: only its own message.
		if got := run(t, nil, Commit{Events: []*messages.Event{toolResult(4)}, Prev: at, State: past}); !slices.Equal(got, []uint64{4}) {
			t.Fatalf("stored %v, want [4]", got)
		}
	})
	t.Run("large context", func(t *testing.T) {
		answer := func(total uint32, sub string) *messages.Event {
			return &messages.Event{Seq: 3, Payload: &messages.Event_LlmResponded{LlmResponded: &messages.LlmResponded{
				StepId: "s1", CallId: "s1/llm-1", SubAgentId: sub, Context: &messages.ContextInfo{TotalTokens: total, Budget: 1000}}}}
		}
		if got := run(t, nil, Commit{Events: []*messages.Event{answer(499, "")}, Prev: below, State: below},
			Commit{Events: []*messages.Event{answer(900, "a1")}, Prev: below, State: below}); len(got) != 0 {
			t.Fatalf("stored %v for a context under half the budget and a sub-agent's", got)
		}
		if got := run(t, nil, Commit{Events: []*messages.Event{answer(500, "")}, Prev: below, State: below}); !slices.Equal(got, []uint64{1, 2, 100}) {
			t.Fatalf("stored %v for a context of half the budget, want the history [1 2 100]", got)
		}
	})
	t.Run("activation", func(t *testing.T) {
		if got := run(t, below); len(got) != 0 {
			t.Fatalf("activation below the threshold stored %v", got)
		}
		if got := run(t, past); !slices.Equal(got, []uint64{1, 2, 3, 4, 100}) {
			t.Fatalf("activation past the threshold stored %v", got)
		}
	})
}
