package memory_test

import (
	"context"
	"fmt"
	"math/rand"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/memory/openaiembed"
	"github.com/fathom-agents/fathom/persistence/vectormem"
)

// TestLongSession drives the library the way the session grain does over a 2,000-message
// session, with embeddings served by mock-llm: every message is counted once when
// recorded and embedded in the background; every LLM call builds a context within
// budget; the summary is regenerated exactly when the uncovered tokens exceed the
// threshold; and a fact from message 10 comes back through semantic retrieval.
func TestLongSession(t *testing.T) {
	srv := httptest.NewServer(mock.New(mock.Config{Script: mock.DemoScript()}).Handler())
	defer srv.Close()
	emb, err := openaiembed.New(openaiembed.Config{BaseURL: srv.URL + "/v1", Dimensions: 256})
	if err != nil {
		t.Fatal(err)
	}
	store, _ := vectormem.New(256)
	worker, err := memory.NewEmbedWorker(memory.EmbedWorkerConfig{Embedder: emb, Store: store, BatchSize: 64,
		OnError: func(jobs []memory.EmbedJob, err error) { t.Errorf("embedding %d jobs: %v", len(jobs), err) }})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := memory.TokenizerForModel("gpt-4o", "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := memory.DefaultContextConfig()
	cfg.Costs = tk.Costs()
	scfg := memory.DefaultSummaryConfig()
	sys := "You are a research agent of Fathom."
	sysTokens := tk.CountMessage(llm.Message{Role: "system", Content: sys})

	topics := strings.Fields("actors journals snapshots sandboxes gateways consul tracing budgets prompts retries")
	r := rand.New(rand.NewSource(3))
	var msgs []memory.Message
	var summary *memory.Summary
	regenerations := 0
	embed := true
	record := func(role, content string) {
		m := memory.Message{Seq: uint64(len(msgs) + 1), Role: role, Content: content}
		m.Tokens = tk.CountMessage(m.LLM())
		msgs = append(msgs, m)
		if !embed {
			return
		}
		if err := worker.Enqueue(memory.EmbedJob{Stream: "s", Seq: m.Seq, Text: content}); err != nil {
			t.Fatal(err)
		}
	}
	record("assistant", "Hello! What shall we research today?") // so that message 10 is the user's
	for len(msgs) < 2000 {
		if len(msgs) == 9 {
			record("user", "Please remember that the staging deploy token is PELICAN-7731.")
		} else {
			a, b := topics[r.Intn(len(topics))], topics[r.Intn(len(topics))]
			record("user", fmt.Sprintf("Tell me more about %s and how they relate to %s in step %d.", a, b, len(msgs)))
		}
		c, err := memory.BuildContext(cfg, memory.Input{SystemPrompt: sys, SystemTokens: sysTokens, Summary: summary, Messages: msgs, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if c.TotalTokens > cfg.Budget {
			t.Fatalf("message %d: context %d tokens, budget %d", len(msgs), c.TotalTokens, cfg.Budget)
		}
		if len(msgs)%97 == 0 && tk.CountRequest(c.Messages()) > c.TotalTokens { // the real count, now and then
			t.Fatalf("message %d: context %d tokens (request %d), budget %d", len(msgs), c.TotalTokens, tk.CountRequest(c.Messages()), cfg.Budget)
		}
		record("assistant", strings.Repeat(fmt.Sprintf("Notes on %s. ", topics[r.Intn(len(topics))]), 1+r.Intn(20)))
		// After each stored LLM response: the trigger.
		var through uint64
		if summary != nil {
			through = summary.Through
		}
		uncovered := memory.UnsummarizedTokens(msgs, through)
		if memory.ShouldSummarize(msgs, summary, scfg) {
			if uncovered <= scfg.Threshold {
				t.Fatalf("triggered at %d uncovered tokens", uncovered)
			}
			call, err := memory.Summarize(memory.SummaryInput{Previous: summary, Messages: msgs}, "sys", scfg)
			if err != nil {
				t.Fatal(err)
			}
			content := fmt.Sprintf("Summary of messages 1–%d: the user asked about many topics.", call.Through)
			summary = &memory.Summary{Content: content, Tokens: tk.Count(content), Through: call.Through}
			regenerations++
		} else if uncovered > scfg.Threshold {
			t.Fatalf("not triggered at %d uncovered tokens", uncovered)
		}
	}
	if regenerations < 5 {
		t.Fatalf("only %d summary regenerations over 2,000 messages", regenerations)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := worker.Close(ctx); err != nil {
		t.Fatal(err)
	}

	question := "What was the staging deploy token again?"
	q, err := emb.Embed(ctx, []string{question})
	if err != nil {
		t.Fatal(err)
	}
	found, err := store.Search(ctx, "default", "s", q[0], 20)
	if err != nil {
		t.Fatal(err)
	}
	hits := make([]memory.Hit, len(found))
	for i, h := range found {
		hits[i] = memory.Hit{Seq: h.Seq, Score: h.Score}
	}
	embed = false
	record("user", question)
	c, err := memory.BuildContext(cfg, memory.Input{SystemPrompt: sys, SystemTokens: sysTokens, Summary: summary, Messages: msgs, Hits: hits, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	var recalled bool
	for _, m := range c.Semantic {
		recalled = recalled || (m.Seq == 10 && strings.Contains(m.Content, "PELICAN-7731"))
	}
	if !recalled || c.TotalTokens > cfg.Budget || !c.Metadata.HasSummary {
		t.Fatalf("message 10 not recalled: semantic %v, metadata %+v", seqs(c.Semantic), c.Metadata)
	}
	t.Logf("%d regenerations; final context: %d recent, %d semantic, %d tokens of %d", regenerations, len(c.Recent), len(c.Semantic), c.TotalTokens, cfg.Budget)
}
