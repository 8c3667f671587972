package session

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
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
// messages; an answer whose context leaves the history less room than the threshold
// assumes embeds the history below it; an activation re-embeds only a history past it.
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
	if o := (embedObserver{from: 250}); o.embeds(below) || !o.embeds(at) || !o.embeds(past) || o.embeds(nil) || o.history(below) != 200 {
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
	t.Run("crowded", func(t *testing.T) {
		// total is the call's context cost, recent and hist its tier's and its history's
		// message counts.
		answer := func(total, recent, hist uint32, sub string) *messages.Event {
			return &messages.Event{Seq: 3, Payload: &messages.Event_LlmResponded{LlmResponded: &messages.LlmResponded{
				StepId: "s1", CallId: "s1/llm-1", SubAgentId: sub, Tokens: 10,
				Context: &messages.ContextInfo{TotalTokens: total, Budget: 1000, RecentCount: recent, HistoryCount: hist}}}}
		}
		small := embedState(10) // 10 tokens
		for _, c := range []Commit{
			// Besides its history (190 tokens: 200 less the answer's 10), the context
			// spent 500 tokens: not over half the budget.
			{Events: []*messages.Event{answer(690, 2, 2, "")}, Prev: below, State: below},
			// 550 (over half), but the history's 10 tokens are under half the recent share
			// of the 450 left (112).
			{Events: []*messages.Event{answer(550, 1, 1, "")}, Prev: small, State: small},
			// A sub-agent's call does not search the session's history.
			{Events: []*messages.Event{answer(990, 1, 2, "a1")}, Prev: below, State: below},
		} {
			if got := run(t, nil, c); len(got) != 0 {
				t.Fatalf("stored %v for a call that leaves room (%v)", got, c.Events[0].GetLlmResponded().GetContext())
			}
		}
		for _, c := range []Commit{
			// 551 besides the history: 2*200 >= 0.5*449.
			{Events: []*messages.Event{answer(741, 2, 2, "")}, Prev: below, State: below},
			// The history did not fit whole.
			{Events: []*messages.Event{answer(300, 1, 2, "")}, Prev: below, State: below},
		} {
			if got := run(t, nil, c); !slices.Equal(got, []uint64{1, 2, 100}) {
				t.Fatalf("stored %v for a crowded call (%v), want the history [1 2 100]", got, c.Events[0].GetLlmResponded().GetContext())
			}
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

// countingEmbedder is hashembed counting the texts it embeds.
type countingEmbedder struct {
	memory.Embedder
	texts atomic.Int64
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.texts.Add(int64(len(texts)))
	return c.Embedder.Embed(ctx, texts)
}

// TestEmbeddingActivationEmbedsWhatADurableStoreMisses: over a store that holds some of
// a session's history (seqs 1 to 3 of 1, 2, 3, 4, 100), an activation embeds only the
// rest when the store is durable (no reembed), all of it with reembed, nothing below the
// threshold.
func TestEmbeddingActivationEmbedsWhatADurableStoreMisses(t *testing.T) {
	cc := memory.DefaultContextConfig()
	cc.Budget = 1000
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		reembed bool
		act     *messages.SessionState
		texts   int64
	}{
		{"durable", false, embedState(100, 100, 50, 10), 2},
		{"in-process", true, embedState(100, 100, 50, 10), 5},
		{"below the threshold", false, embedState(100, 100), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, err := vectormem.New(hashembed.DefaultDimensions)
			if err != nil {
				t.Fatal(err)
			}
			for seq := uint64(1); seq <= 3; seq++ {
				if err := store.Upsert(ctx, "default", "e", []persistence.Vector{{Seq: seq, Values: hashembed.Vector("result", hashembed.DefaultDimensions)}}); err != nil {
					t.Fatal(err)
				}
			}
			emb := &countingEmbedder{Embedder: hashembed.New(hashembed.DefaultDimensions)}
			w, err := memory.NewEmbedWorker(memory.EmbedWorkerConfig{Embedder: emb, Store: store})
			if err != nil {
				t.Fatal(err)
			}
			Embedding(w, c.reembed, cc).Activated("e", c.act, log)
			if err := w.Close(ctx); err != nil { // waits for the queued jobs
				t.Fatal(err)
			}
			if got := emb.texts.Load(); got != c.texts {
				t.Fatalf("embedded %d texts, want %d", got, c.texts)
			}
			want := []uint64{1, 2, 3, 4, 100}
			if c.texts == 0 {
				want = []uint64{1, 2, 3}
			}
			if got, err := store.StoredSeqs(ctx, "default", "e", nil); err != nil || !slices.Equal(got, want) {
				t.Fatalf("stored %v (%v), want %v", got, err, want)
			}
		})
	}
}

// TestCatchUpTakesNoRoom: an activation's catch-up over a durable store takes none of
// the embed worker's queue (many activations at once never crowd out new messages):
// the worker takes it once no queued job waits, so a history longer than the whole
// queue is caught up too, and the new messages are still taken meanwhile.
func TestCatchUpTakesNoRoom(t *testing.T) {
	cc := memory.DefaultContextConfig()
	cc.Budget = 1000
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	store, err := vectormem.New(hashembed.DefaultDimensions)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	emb := &blockingEmbedder{Embedder: hashembed.New(hashembed.DefaultDimensions), release: release, started: make(chan struct{}, 1)}
	// A queue of 8, which the history (24 messages) is far longer than.
	w, err := memory.NewEmbedWorker(memory.EmbedWorkerConfig{Embedder: emb, Store: store, QueueSize: 8, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	// One job held by the embedder, then 2 queued.
	for seq := uint64(1); seq <= 3; seq++ {
		if err := w.Enqueue(memory.EmbedJob{Stream: "other", Seq: seq, Text: "busy"}); err != nil {
			t.Fatal(err)
		}
		if seq == 1 {
			<-emb.started
		}
	}
	tr := make([]uint32, 22)
	for i := range tr {
		tr[i] = 10
	}
	o := Embedding(w, false, cc)
	o.Activated("e", embedState(100, tr...), log) // 23 messages and the sub-agent's opening
	o.Committed(Commit{SessionID: "e", Log: log, Events: []*messages.Event{toolResult(24)}, Prev: embedState(100, tr...),
		State: embedState(100, append(tr, 5)...)}) // its own message is queued
	// 3 of the 8 slots are taken (2 busy jobs, the committed message): the other 5 are
	// free, none taken by the catch-up.
	free := 0
	for ; free < 8; free++ {
		if err := w.Enqueue(memory.EmbedJob{Stream: "other", Seq: uint64(4 + free), Text: "busy"}); err != nil {
			break
		}
	}
	if free != 5 {
		t.Fatalf("%d of the queue's 8 slots were free after the catch-up, want 5: it took room", free)
	}
	close(release)
	want := []uint64{1}
	for seq := uint64(2); seq <= 24; seq++ {
		want = append(want, seq)
	}
	want = append(want, 100)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := store.StoredSeqs(ctx, "default", "e", nil)
		if err == nil && slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session e stored %v (%v), want its whole history %v", got, err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// blockingEmbedder is an embedder whose calls wait for release (started is told of
// each call).
type blockingEmbedder struct {
	memory.Embedder
	release chan struct{}
	started chan struct{}
}

func (b *blockingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	select {
	case b.started <- struct{}{}:
	default:
	}
	<-b.release
	return b.Embedder.Embed(ctx, texts)
}
