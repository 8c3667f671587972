package backends_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/internal/backends"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/persistence"
)

// TestRegistryOpensByName: a registered backend opens from its typed configuration; an
// unknown name is an *UnknownError listing the registered ones; a second registration of
// a name panics.
func TestRegistryOpensByName(t *testing.T) {
	r := backends.NewRegistry[int, string]("widget", nil)
	r.Register("double", func(_ context.Context, n int) (string, error) { return strings.Repeat("x", 2*n), nil })
	r.Register("fail", func(context.Context, int) (string, error) { return "", errors.New("no widget") })
	if got, err := r.Open(context.Background(), "double", 2); err != nil || got != "xxxx" {
		t.Fatalf("Open(double, 2) = %q, %v", got, err)
	}
	if _, err := r.Open(context.Background(), "fail", 1); err == nil || err.Error() != "no widget" {
		t.Fatalf("Open(fail) error %v", err)
	}
	_, err := r.Open(context.Background(), "triple", 1)
	var unknown *backends.UnknownError
	if !errors.As(err, &unknown) || unknown.Name != "triple" || !slices.Equal(unknown.Known, []string{"double", "fail"}) ||
		err.Error() != `unknown widget "triple" (want double, fail)` {
		t.Fatalf("Open(triple) error %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a second registration of double did not panic")
		}
	}()
	r.Register("double", func(context.Context, int) (string, error) { return "", nil })
}

// TestNodeBackendsAreRegistered: the node's registries hold the backends the flags name.
func TestNodeBackendsAreRegistered(t *testing.T) {
	for _, c := range []struct {
		kind  string
		names []string
		want  []string
	}{
		{"journals", backends.Journals.Names(), []string{"bolt", "memory", "postgres"}},
		{"LLM APIs", backends.LLMAPIs.Names(), []string{"anthropic", "openai"}},
		{"embedders", backends.Embedders.Names(), []string{"glove", "hash", "openai"}},
		{"vector stores", backends.VectorStores.Names(), []string{"memory", "pgvector"}},
		{"artifact stores", backends.ArtifactStores.Names(), []string{"filesystem", "s3"}},
	} {
		if !slices.Equal(c.names, c.want) {
			t.Errorf("%s: %v, want %v", c.kind, c.names, c.want)
		}
	}
}

// TestOpenJournalReadOnlyCreatesNothing: reading a data dir that does not exist is an
// error wrapping os.ErrNotExist, and the directory is not created.
func TestOpenJournalReadOnlyCreatesNothing(t *testing.T) {
	dir := t.TempDir() + "/missing"
	if _, err := backends.OpenJournalReadOnly(context.Background(), backends.JournalConfig{DataDir: dir}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only open of a missing directory: %v, want os.ErrNotExist", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the read-only open created %s: %v", dir, err)
	}
	j, err := backends.OpenJournal(context.Background(), backends.JournalConfig{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, err = backends.OpenJournalReadOnly(context.Background(), backends.JournalConfig{DataDir: dir})
	if err != nil {
		t.Fatalf("read-only open of an existing journal: %v", err)
	}
	_ = j.Close()
}

// TestJournalsByName: the journal is chosen by name, defaulted in one place (postgres
// with a DSN, else bolt); the memory journal needs no data dir, keeps every capability
// and cannot be read from another process; an unknown name lists the valid ones.
func TestJournalsByName(t *testing.T) {
	for _, c := range []struct {
		cfg  backends.JournalConfig
		want string
	}{
		{backends.JournalConfig{DataDir: "d"}, "bolt"},
		{backends.JournalConfig{DataDir: "d", DSN: "postgres://x"}, "postgres"},
		{backends.JournalConfig{Name: "memory", DSN: "postgres://x"}, "memory"},
		{backends.JournalConfig{Name: "bolt", DSN: "postgres://x"}, "bolt"},
	} {
		if got := backends.JournalName(c.cfg); got != c.want {
			t.Errorf("JournalName(%+v) = %q, want %q", c.cfg, got, c.want)
		}
	}
	ctx := context.Background()
	j, err := backends.OpenJournal(ctx, backends.JournalConfig{Name: "memory"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, "s", 0, []persistence.Record{{Type: "t"}}); err != nil {
		t.Fatal(err)
	}
	_ = j.Close()
	if _, err := backends.OpenJournalReadOnly(ctx, backends.JournalConfig{Name: "memory"}); !errors.Is(err, backends.ErrMemoryReadOnly) {
		t.Fatalf("read-only open of the memory journal: %v", err)
	}
	_, err = backends.OpenJournal(ctx, backends.JournalConfig{Name: "sqlite", DataDir: t.TempDir()})
	if err == nil || err.Error() != `unknown journal "sqlite" (want bolt, memory, postgres)` {
		t.Fatalf("unknown journal: %v", err)
	}
	if _, err := backends.OpenJournal(ctx, backends.JournalConfig{Name: "postgres"}); err == nil || !strings.Contains(err.Error(), "needs a PostgreSQL DSN") {
		t.Fatalf("postgres without a DSN: %v", err)
	}
}

// TestOpenAIClientSendsOrgAndProjectFromEnv: the node's OpenAI client sends
// OPENAI_ORG_ID and OPENAI_PROJECT_ID as the OpenAI-Organization and OpenAI-Project
// headers of a real HTTP call.
func TestOpenAIClientSendsOrgAndProjectFromEnv(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Clone():
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer srv.Close()
	env := map[string]string{"OPENAI_ORG_ID": "org-1", "OPENAI_PROJECT_ID": "proj-1"}
	c, err := backends.LLMAPIs.Open(context.Background(), "openai", backends.LLMConfig{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "m", Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Provider.Chat(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.Get("OpenAI-Organization") != "org-1" || h.Get("OpenAI-Project") != "proj-1" {
		t.Fatalf("headers OpenAI-Organization %q, OpenAI-Project %q; want org-1, proj-1", h.Get("OpenAI-Organization"), h.Get("OpenAI-Project"))
	}
}

// TestUnknownBackendOfEachKindListsTheValidNames: every kind refuses a name it does not
// have with the names it has.
func TestUnknownBackendOfEachKindListsTheValidNames(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		open func() error
		want string
	}{
		{func() error { _, err := backends.Journals.Open(ctx, "sqlite", backends.JournalConfig{}); return err },
			`unknown journal "sqlite" (want bolt, memory, postgres)`},
		{func() error { _, err := backends.LLMAPIs.Open(ctx, "gemini", backends.LLMConfig{}); return err },
			`unknown LLM API "gemini" (want anthropic, openai)`},
		{func() error {
			_, err := backends.Embedders.Open(ctx, "word2vec", backends.EmbedderConfig{})
			return err
		},
			`unknown embedder "word2vec" (want glove, hash, openai)`},
		{func() error { _, err := backends.VectorStores.Open(ctx, "faiss", backends.VectorConfig{}); return err },
			`unknown vector store "faiss" (want memory, pgvector)`},
		{func() error {
			_, _, _, err := backends.OpenArtifacts(t.TempDir(), backends.ArtifactConfig{Name: "nfs"})
			return err
		}, `unknown artifact store "nfs" (want filesystem, s3)`},
	} {
		var unknown *backends.UnknownError
		if err := c.open(); !errors.As(err, &unknown) || err.Error() != c.want {
			t.Errorf("got %v, want %s", err, c.want)
		}
	}
}

// TestBackendsValidateTheirConfiguration: each descriptor's checks, with the messages
// the CLI shows (cmd/fathom's TestRunRejectsBadFlags holds them end to end).
func TestBackendsValidateTheirConfiguration(t *testing.T) {
	for _, c := range []struct {
		name string
		err  func() error
		want string
	}{
		{"bolt without a data dir", prep(backends.Journals, "bolt", backends.JournalConfig{}), "no journal: set a data directory or a PostgreSQL DSN"},
		{"postgres without a DSN", prep(backends.Journals, "postgres", backends.JournalConfig{}), "the postgres journal needs a PostgreSQL DSN"},
		{"memory read from outside", prep(backends.Journals, "memory", backends.JournalConfig{ReadOnly: true}), "keeps its sessions only inside the running node"},
		{"hash with a model", prep(backends.Embedders, "hash", backends.EmbedderConfig{Model: "text-embedding-3-large"}), `an embedding model ("text-embedding-3-large") is only for the openai embedder`},
		{"hash with word vectors", prep(backends.Embedders, "hash", backends.EmbedderConfig{Vectors: "v.json"}), "word vectors (v.json) are only for the glove embedder, not hash"},
		{"openai with word vectors", prep(backends.Embedders, "openai", backends.EmbedderConfig{Vectors: "v.json"}), "word vectors (v.json) are only for the glove embedder, not openai"},
		{"glove without word vectors", prep(backends.Embedders, "glove", backends.EmbedderConfig{}), "the glove embedder needs its word vectors"},
		{"glove with another dimension", prep(backends.Embedders, "glove", backends.EmbedderConfig{Vectors: "v.json", Dimensions: 64}), "the glove embedder's vectors have 300 dimensions, not 64"},
		{"glove with a model", prep(backends.Embedders, "glove", backends.EmbedderConfig{Vectors: "v.json", Model: "m"}), `an embedding model ("m") is only for the openai embedder`},
		{"ef_search for the memory store", prep(backends.VectorStores, "memory", backends.VectorConfig{EfSearch: 200}), "a pgvector ef_search (200) is only for the pgvector vector store"},
		{"pgvector without PostgreSQL", prep(backends.VectorStores, "pgvector", backends.VectorConfig{Dimensions: 8}), "needs PostgreSQL: set a PostgreSQL DSN (--postgres)"},
		{"pgvector ef_search out of range", prep(backends.VectorStores, "pgvector", backends.VectorConfig{PostgresDSN: "postgres://x", EfSearch: 1 << 20}), "pgvector ef_search must be 1..1000"},
		{"pgvector dimension too large", prep(backends.VectorStores, "pgvector", backends.VectorConfig{PostgresDSN: "postgres://x", Dimensions: 3072}), "more than pgvector indexes (2000)"},
		{"filesystem without a data dir", prep(backends.ArtifactStores, "filesystem", backends.ArtifactStoreConfig{}), "needs a data directory"},
		{"s3 without an endpoint", prep(backends.ArtifactStores, "s3", backends.ArtifactStoreConfig{}), "needs an endpoint (--s3-endpoint"},
	} {
		if err := c.err(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func prep[C, T any](r *backends.Registry[C, T], name string, cfg C) func() error {
	return func() error { _, err := r.Prepare(name, cfg); return err }
}

// TestBackendDefaults: each kind's default is decided once, in its registry, and each
// backend fills its own defaults (dimensions, base URLs, the demo model's path).
func TestBackendDefaults(t *testing.T) {
	if got := backends.LLMAPIs.Choose("", backends.LLMConfig{}); got != "openai" {
		t.Errorf("default LLM API %q", got)
	}
	if got := backends.Embedders.Choose("", backends.EmbedderConfig{}); got != "hash" {
		t.Errorf("default embedder %q", got)
	}
	if got := backends.VectorStores.Choose("", backends.VectorConfig{}); got != "memory" {
		t.Errorf("default vector store %q", got)
	}
	for _, c := range []struct {
		cfg  backends.ArtifactStoreConfig
		want string
	}{
		{backends.ArtifactStoreConfig{}, ""},
		{backends.ArtifactStoreConfig{Dir: "d"}, "filesystem"},
	} {
		if got := backends.ArtifactStores.Choose("", c.cfg); got != c.want {
			t.Errorf("artifact store for %+v: %q, want %q", c.cfg, got, c.want)
		}
	}
	for name, dim := range map[string]int{"hash": 256, "openai": 1536, "glove": 300} {
		if c, err := backends.Embedders.Prepare(name, backends.EmbedderConfig{Vectors: map[string]string{"glove": "v.json"}[name]}); err != nil || c.Dimensions != dim {
			t.Errorf("%s embedder's default dimension %d (%v), want %d", name, c.Dimensions, err, dim)
		}
	}
	for _, c := range []struct{ api, demo, want string }{
		{"openai", "", "https://api.openai.com/v1"},
		{"openai", "http://127.0.0.1:9", "http://127.0.0.1:9/v1"},
		{"anthropic", "http://127.0.0.1:9", "http://127.0.0.1:9"},
	} {
		if got, _ := backends.LLMAPIs.Prepare(c.api, backends.LLMConfig{Demo: c.demo}); got.BaseURL != c.want {
			t.Errorf("%s with demo %q: base URL %q, want %q", c.api, c.demo, got.BaseURL, c.want)
		}
	}
	env := map[string]string{"ANTHROPIC_API_KEY": "ak", "ANTHROPIC_BASE_URL": "http://a", "OPENAI_API_KEY": "ok"}
	if got := backends.LLMAPIs.FromEnv("anthropic", backends.LLMConfig{}, func(k string) string { return env[k] }); got.APIKey != "ak" || got.BaseURL != "http://a" {
		t.Errorf("anthropic from env: %+v", got)
	}
	if got := backends.LLMAPIs.EnvVar("anthropic", "BaseURL"); got != "ANTHROPIC_BASE_URL" {
		t.Errorf("anthropic's base URL variable %q", got)
	}
}

// TestHelpListsEveryBackendWithItsDoc: -h text of a kind is read from its descriptors.
func TestHelpListsEveryBackendWithItsDoc(t *testing.T) {
	want := "memory (exact in-process scan, re-embedded when a session is activated) or pgvector (PostgreSQL, HNSW; needs --postgres)"
	if got := backends.VectorStores.Help(); got != want {
		t.Fatalf("VectorStores.Help() = %q, want %q", got, want)
	}
}
