package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/tools"
)

// embedServer is an OpenAI-compatible embeddings API (the mock model's) that counts the
// texts it embeds and refuses (500) every request refuse says to.
type embedServer struct {
	url    string
	refuse func(inputs []string) bool

	mu                sync.Mutex
	embedded, refused int
}

func newEmbedServer(t *testing.T, refuse func(inputs []string) bool) *embedServer {
	t.Helper()
	e := &embedServer{refuse: refuse}
	model := mock.New(mock.Config{}).Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		refused := e.refuse != nil && e.refuse(req.Input)
		if refused {
			e.refused += len(req.Input)
		} else {
			e.embedded += len(req.Input)
		}
		e.mu.Unlock()
		if refused {
			http.Error(w, "embedding provider down", http.StatusInternalServerError)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		model.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e.url = srv.URL + "/v1"
	return e
}

// counts returns the texts embedded and refused so far.
func (e *embedServer) counts() (embedded, refused int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.embedded, e.refused
}

// TestActivationEmbedsWhatPgvectorMisses: with the pgvector store, a session whose
// embedding jobs were lost (here: the embeddings API refused every request carrying the
// vault code, a probe result handed to the worker with the whole history when the
// session crossed the embedding threshold, and a failed round is dropped) gets exactly
// its missing messages embedded at its next activation, on a node with a working API:
// afterwards the store holds every history message, and the API embedded only the
// missing ones. A second activation embeds nothing.
func TestActivationEmbedsWhatPgvectorMisses(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	reg := probeRegistry(t, vaultPad)
	j := openJournal(t)
	defer j.Close()
	start := func(api *embedServer) *harness {
		return startHarness(t, harnessOpts{journal: j, cfg: vaultConfig, tools: &tools.Executor{Registry: reg}, script: vaultScript(t), postgres: dsn,
			memory: node.MemoryConfig{VectorStore: node.VectorStorePgvector, Embedder: node.EmbedderOpenAI,
				EmbeddingBaseURL: api.url, EmbeddingAPIKey: "test", EmbeddingDimensions: 64}})
	}
	stored := func(h *harness) []uint64 {
		t.Helper()
		vs, ok := h.node.Vectors().(persistence.VectorSeqs)
		if !ok {
			t.Fatalf("%T is not a persistence.VectorSeqs", h.node.Vectors())
		}
		seqs, err := vs.StoredSeqs(context.Background(), "default", "long", nil)
		if err != nil {
			t.Fatal(err)
		}
		return seqs
	}

	// Node A: the API refuses what carries the fact.
	down := newEmbedServer(t, func(inputs []string) bool {
		return slices.ContainsFunc(inputs, func(s string) bool { return strings.Contains(s, "ZEBRA-42") })
	})
	a := start(down)
	if _, err := a.start("long", "c1", "find the vault code"); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, waitTerminal(t, j, "long", time.Minute))
	st, err := a.state("long")
	if err != nil {
		t.Fatal(err)
	}
	var want []uint64 // the history messages with text, which an eager observer embeds
	for _, m := range core.History(st.GetState()) {
		if m.Content != "" {
			want = append(want, m.Seq)
		}
	}
	stopNode(t, a) // its embed worker has run every job
	if _, refused := down.counts(); refused == 0 {
		t.Fatal("the API refused no text: nothing was lost")
	}

	// Node B: a working API; activating the session embeds what the store misses.
	up := newEmbedServer(t, nil)
	b := start(up)
	before := stored(b)
	var missing []uint64
	for _, seq := range want {
		if !slices.Contains(before, seq) {
			missing = append(missing, seq)
		}
	}
	if len(missing) == 0 || len(before) == 0 {
		t.Fatalf("the store holds %d of the %d history messages before the activation: want some, not all", len(before), len(want))
	}
	_, refused := down.counts()
	t.Logf("%d history messages; %d texts refused; %d stored before the activation, %d missing", len(want), refused, len(before), len(missing))
	if _, err := b.state("long"); err != nil { // activates the session
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return slices.Equal(stored(b), want) },
		"the activation did not embed the %d missing messages (%v)", len(missing), missing)
	stopNode(t, b) // its embed worker has run every job
	if embedded, _ := up.counts(); embedded != len(missing) {
		t.Fatalf("the activation embedded %d texts, want the %d missing", embedded, len(missing))
	}

	// Node C: nothing is missing, nothing is embedded.
	again := newEmbedServer(t, nil)
	c := start(again)
	if _, err := c.state("long"); err != nil {
		t.Fatal(err)
	}
	if got := stored(c); !slices.Equal(got, want) {
		t.Fatalf("the store holds %v, want %v", got, want)
	}
	stopNode(t, c)
	if embedded, _ := again.counts(); embedded != 0 {
		t.Fatalf("a second activation embedded %d texts, want none", embedded)
	}
}
