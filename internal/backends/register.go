package backends

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/anthropic"
	"github.com/fathom-agents/fathom/llm/openai"
	"github.com/fathom-agents/fathom/llm/resilient"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/memory/openaiembed"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/persistence/artifact/local"
	"github.com/fathom-agents/fathom/persistence/artifact/s3"
	"github.com/fathom-agents/fathom/persistence/bolt"
	"github.com/fathom-agents/fathom/persistence/indexfacts"
	"github.com/fathom-agents/fathom/persistence/memjournal"
	"github.com/fathom-agents/fathom/persistence/pgvector"
	"github.com/fathom-agents/fathom/persistence/postgres"
	"github.com/fathom-agents/fathom/persistence/vectormem"
)

// The registries of a node's components. Each backend is one line of init below.
var (
	// Journals are the event journals ("bolt", "postgres", "memory"), chosen by
	// JournalName. Each is a persistence.SessionStore: every capability a node needs.
	Journals = NewRegistry[JournalConfig, persistence.SessionStore]("journal")
	// LLMAPIs are the model APIs' clients ("openai", "anthropic"), chosen by the
	// node's LLM API setting.
	LLMAPIs = NewRegistry[LLMConfig, LLMClient]("LLM API")
	// Embedders make message embeddings ("hash", "openai").
	Embedders = NewRegistry[EmbedderConfig, memory.Embedder]("embedder")
	// VectorStores keep message embeddings ("memory", "pgvector").
	VectorStores = NewRegistry[VectorConfig, Vectors]("vector store")
	// ArtifactStores keep the sessions' artifacts ("filesystem", "s3"), chosen by
	// ArtifactStoreName.
	ArtifactStores = NewRegistry[ArtifactStoreConfig, artifact.Store]("artifact store")
)

func init() {
	Journals.Register("bolt", openBolt)
	Journals.Register("postgres", openPostgres)
	Journals.Register("memory", openMemory)
	LLMAPIs.Register("openai", openOpenAI)
	LLMAPIs.Register("anthropic", openAnthropic)
	Embedders.Register("hash", openHashEmbedder)
	Embedders.Register("openai", openOpenAIEmbedder)
	VectorStores.Register("memory", openVectormem)
	VectorStores.Register("pgvector", openPgvector)
	ArtifactStores.Register("filesystem", openLocalArtifacts)
	ArtifactStores.Register("s3", openS3Artifacts)
}

// JournalConfig configures a journal.
type JournalConfig struct {
	// Name is the backend ("bolt", "postgres", "memory"); "" means JournalName's default.
	Name string
	// DataDir holds the embedded journal (DataDir/journal.db).
	DataDir string
	// DSN is the PostgreSQL journal's connection string.
	DSN string
	// ReadOnly opens for reading only (the embedded journal with a shared lock, never
	// created).
	ReadOnly bool
	// Logger receives the journal's logs.
	Logger *slog.Logger
}

// JournalName is the journal cfg selects, the one place the default is decided:
// cfg.Name when set, else "postgres" with a DSN, else "bolt".
func JournalName(cfg JournalConfig) string {
	switch {
	case cfg.Name != "":
		return cfg.Name
	case cfg.DSN != "":
		return "postgres"
	}
	return "bolt"
}

func openBolt(_ context.Context, cfg JournalConfig) (persistence.SessionStore, error) {
	if cfg.DataDir == "" {
		return nil, ErrNoJournal
	}
	opts := bolt.Options{Logger: cfg.Logger, ReadOnly: cfg.ReadOnly}
	if !cfg.ReadOnly {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
		}
		opts.Facts = indexfacts.Of
	}
	j, err := bolt.Open(filepath.Join(cfg.DataDir, JournalFile), opts)
	if err != nil {
		return nil, fmt.Errorf("open journal in %s: %w", cfg.DataDir, err)
	}
	return j, nil
}

func openPostgres(ctx context.Context, cfg JournalConfig) (persistence.SessionStore, error) {
	if cfg.DSN == "" {
		return nil, errors.New("the postgres journal needs a PostgreSQL DSN (--postgres, env FATHOM_POSTGRES_DSN)")
	}
	j, err := postgres.Open(ctx, cfg.DSN, postgres.Options{Facts: indexfacts.Of})
	if err != nil {
		return nil, fmt.Errorf("open postgres journal: %w", err)
	}
	return j, nil
}

// ErrMemoryReadOnly is the error of opening the memory journal to read it from another
// process: it keeps nothing outside the node that holds it.
var ErrMemoryReadOnly = errors.New("the memory journal keeps its sessions only inside the running node: there is nothing to read from another process")

func openMemory(_ context.Context, cfg JournalConfig) (persistence.SessionStore, error) {
	if cfg.ReadOnly {
		return nil, ErrMemoryReadOnly
	}
	return memjournal.New(memjournal.Options{Facts: indexfacts.Of}), nil
}

// LLMConfig configures a model API's client.
type LLMConfig struct {
	// BaseURL is the API's root ("" means the client's default).
	BaseURL string
	// APIKey authenticates the calls.
	APIKey string
	// Model is the default model ("" means the client's default).
	Model string
	// AttemptTimeout bounds one HTTP attempt (0 means the client's default).
	AttemptTimeout time.Duration
	// Getenv reads the API's own settings (ANTHROPIC_MAX_TOKENS, OPENAI_ORG_ID,
	// OPENAI_PROJECT_ID); nil means os.Getenv.
	Getenv func(string) string
}

// LLMClient is a model API's client and the endpoint it calls (the key of its rate
// limit).
type LLMClient struct {
	// Provider is the client.
	Provider llm.Provider
	// Endpoint identifies the base URL and key it calls.
	Endpoint resilient.Endpoint
}

func openOpenAI(_ context.Context, c LLMConfig) (LLMClient, error) {
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg := openai.DefaultConfig()
	cfg.APIKey, cfg.Model = c.APIKey, c.Model
	cfg.Organization, cfg.Project = getenv("OPENAI_ORG_ID"), getenv("OPENAI_PROJECT_ID")
	if c.BaseURL != "" {
		cfg.BaseURL = c.BaseURL
	}
	if c.AttemptTimeout > 0 {
		cfg.Timeout = c.AttemptTimeout
	}
	p, err := openai.New(cfg)
	if err != nil {
		return LLMClient{}, err
	}
	return LLMClient{Provider: p, Endpoint: resilient.EndpointOf(cfg.BaseURL, cfg.APIKey)}, nil
}

func openAnthropic(_ context.Context, c LLMConfig) (LLMClient, error) {
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg, err := anthropic.ConfigFromEnv(getenv) // ANTHROPIC_MAX_TOKENS
	if err != nil {
		return LLMClient{}, err
	}
	cfg.APIKey = c.APIKey
	if c.Model != "" {
		cfg.Model = c.Model
	}
	if c.BaseURL != "" {
		cfg.BaseURL = c.BaseURL
	}
	if c.AttemptTimeout > 0 {
		cfg.Timeout = c.AttemptTimeout
	}
	p, err := anthropic.New(cfg)
	if err != nil {
		return LLMClient{}, err
	}
	return LLMClient{Provider: p, Endpoint: resilient.EndpointOf(cfg.BaseURL, cfg.APIKey)}, nil
}

// EmbedderConfig configures an embedder.
type EmbedderConfig struct {
	// Dimensions is the vectors' length (filled by the node's defaults).
	Dimensions int
	// Model, BaseURL and APIKey configure an embeddings API (openai).
	Model, BaseURL, APIKey string
	// DemoURL is the built-in demo model's OpenAI API root ("" when the node runs
	// none): the openai embedder's endpoint when neither BaseURL nor APIKey is set.
	DemoURL string
}

func openHashEmbedder(_ context.Context, c EmbedderConfig) (memory.Embedder, error) {
	return hashembed.New(c.Dimensions), nil
}

func openOpenAIEmbedder(_ context.Context, c EmbedderConfig) (memory.Embedder, error) {
	cfg := openaiembed.Config{BaseURL: c.BaseURL, APIKey: c.APIKey, Model: c.Model, Dimensions: c.Dimensions}
	if cfg.BaseURL == "" && cfg.APIKey == "" {
		if c.DemoURL == "" {
			return nil, errors.New("memory: the openai embedder needs an API key (OPENAI_API_KEY) or an OpenAI-compatible base URL (OPENAI_BASE_URL)")
		}
		cfg.BaseURL = c.DemoURL // the demo model serves embeddings too
	}
	e, err := openaiembed.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	return e, nil
}

// VectorConfig configures a vector store.
type VectorConfig struct {
	// Dimensions is the vectors' length.
	Dimensions int
	// PostgresDSN is the node's PostgreSQL database (pgvector).
	PostgresDSN string
	// EfSearch is pgvector's hnsw.ef_search (0 = its default).
	EfSearch int
}

// Vectors is an open vector store.
type Vectors struct {
	// Store is the store.
	Store persistence.VectorStore
	// Reembed is set when the store does not outlive the process: sessions embed their
	// history again when activated.
	Reembed bool
}

func openVectormem(_ context.Context, c VectorConfig) (Vectors, error) {
	v, err := vectormem.New(c.Dimensions)
	if err != nil {
		return Vectors{}, fmt.Errorf("memory: %w", err)
	}
	return Vectors{Store: v, Reembed: true}, nil
}

func openPgvector(ctx context.Context, c VectorConfig) (Vectors, error) {
	v, err := pgvector.Open(ctx, pgvector.Config{DSN: c.PostgresDSN, Dimensions: c.Dimensions, EfSearch: c.EfSearch})
	if err != nil {
		return Vectors{}, fmt.Errorf("memory: open the pgvector store: %w", err)
	}
	return Vectors{Store: v}, nil
}

// ArtifactStoreConfig configures an artifact store.
type ArtifactStoreConfig struct {
	// Dir is the filesystem store's directory.
	Dir string
	// S3 configures the S3 store.
	S3 s3.Config
	// MaxSize bounds one artifact in bytes (0 = artifact.DefaultMaxSize).
	MaxSize int64
}

// ArtifactStoreName is the artifact store cfg selects: "s3" with an S3 endpoint, else
// "filesystem" (or "" when there is no directory either: no store).
func ArtifactStoreName(cfg ArtifactStoreConfig) string {
	switch {
	case cfg.S3.Endpoint != "":
		return "s3"
	case cfg.Dir != "":
		return "filesystem"
	}
	return ""
}

func openLocalArtifacts(_ context.Context, c ArtifactStoreConfig) (artifact.Store, error) {
	s, err := local.Open(c.Dir, local.Config{MaxSize: c.MaxSize})
	if err != nil {
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	return s, nil
}

func openS3Artifacts(_ context.Context, c ArtifactStoreConfig) (artifact.Store, error) {
	cfg := c.S3
	if cfg.MaxSize == 0 {
		cfg.MaxSize = c.MaxSize
	}
	s, err := s3.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	return s, nil
}
