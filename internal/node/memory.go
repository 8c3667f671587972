package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/internal/backends"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/memory/openaiembed"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/pgvector"
)

// The vector stores MemoryConfig.VectorStore selects.
const (
	// VectorStoreMemory is the exact in-process scan (persistence/vectormem): nothing to
	// run, lost with the process, so sessions re-embed their history when activated.
	VectorStoreMemory = "memory"
	// VectorStorePgvector is PostgreSQL with pgvector (persistence/pgvector, HNSW, cosine)
	// in the node's PostgreSQL database.
	VectorStorePgvector = "pgvector"
)

// The embedders MemoryConfig.Embedder selects.
const (
	// EmbedderHash is the deterministic local feature-hashing embedder (memory/hashembed).
	EmbedderHash = "hash"
	// EmbedderOpenAI is an OpenAI-compatible embeddings API (memory/openaiembed).
	EmbedderOpenAI = "openai"
)

// MemoryConfig selects where a node keeps message embeddings and what makes them. The
// zero value is the embedded default: the in-process store and the hash embedder.
type MemoryConfig struct {
	// VectorStore is VectorStoreMemory ("" means it) or VectorStorePgvector, which needs
	// Config.PostgresDSN (the store lives in the journal's database).
	VectorStore string
	// Embedder is EmbedderHash ("" means it) or EmbedderOpenAI.
	Embedder string
	// EmbeddingModel is the OpenAI embedder's model; "" means text-embedding-3-small.
	// Only for EmbedderOpenAI.
	EmbeddingModel string
	// EmbeddingDimensions is the vectors' length; 0 means 256 for EmbedderHash and 1536
	// for EmbedderOpenAI. pgvector indexes at most pgvector.MaxDimensions.
	EmbeddingDimensions int
	// EmbeddingBaseURL is the OpenAI embedder's API root (env OPENAI_BASE_URL). Empty
	// means the built-in demo model's when the node runs it, else api.openai.com.
	EmbeddingBaseURL string
	// EmbeddingAPIKey is the OpenAI embedder's key (env OPENAI_API_KEY).
	EmbeddingAPIKey string
	// PgvectorEfSearch is the pgvector store's hnsw.ef_search (recall against speed of
	// an index scan), 1..pgvector.MaxEfSearch; 0 means pgvector.DefaultEfSearch. Only
	// for VectorStorePgvector.
	PgvectorEfSearch int
	// LongTerm turns on long-term memory (persistence/ltm): a memory store beside the
	// journal (the fathom_memories table with a PostgreSQL DSN, else
	// DataDir/memories.db), the remember, recall and forget tools, and the user's most
	// relevant memories in the orchestrator's context.
	LongTerm bool
	// LongTermTTL, when positive, is how long a memory lives unless remember's ttl_days
	// says otherwise; 0 keeps memories until deleted. Only with LongTerm.
	LongTermTTL time.Duration
}

// withDefaults fills the store, the embedder and the dimension.
func (c MemoryConfig) withDefaults() MemoryConfig {
	if c.VectorStore == "" {
		c.VectorStore = VectorStoreMemory
	}
	if c.Embedder == "" {
		c.Embedder = EmbedderHash
	}
	if c.EmbeddingDimensions == 0 {
		c.EmbeddingDimensions = hashembed.DefaultDimensions
		if c.Embedder == EmbedderOpenAI {
			c.EmbeddingDimensions = openaiembed.DefaultConfig().Dimensions
		}
	}
	return c
}

// Validate reports a combination that cannot work; postgresDSN is the node's.
func (c MemoryConfig) Validate(postgresDSN string) error {
	c = c.withDefaults()
	switch c.VectorStore {
	case VectorStoreMemory:
		if c.PgvectorEfSearch != 0 {
			return fmt.Errorf("memory: a pgvector ef_search (%d) is only for the pgvector vector store; the memory store scans exactly", c.PgvectorEfSearch)
		}
	case VectorStorePgvector:
		if postgresDSN == "" {
			return errors.New("memory: the pgvector vector store needs PostgreSQL: set a PostgreSQL DSN (--postgres)")
		}
		if c.PgvectorEfSearch < 0 || c.PgvectorEfSearch > pgvector.MaxEfSearch {
			return fmt.Errorf("memory: pgvector ef_search must be 1..%d (0 = the default, %d), got %d", pgvector.MaxEfSearch, pgvector.DefaultEfSearch, c.PgvectorEfSearch)
		}
		if c.EmbeddingDimensions > pgvector.MaxDimensions {
			return fmt.Errorf("memory: embedding dimension %d is more than pgvector indexes (%d): choose a smaller dimension (--embedding-dim; OpenAI's text-embedding-3 models shorten on request)", c.EmbeddingDimensions, pgvector.MaxDimensions)
		}
	default:
		if !backends.VectorStores.Has(c.VectorStore) {
			return fmt.Errorf("memory: %w", &backends.UnknownError{Kind: "vector store", Name: c.VectorStore, Known: backends.VectorStores.Names()})
		}
	}
	switch c.Embedder {
	case EmbedderHash:
		if c.EmbeddingModel != "" {
			return fmt.Errorf("memory: an embedding model (%q) is only for the openai embedder; the hash embedder has none", c.EmbeddingModel)
		}
	default:
		if !backends.Embedders.Has(c.Embedder) {
			return fmt.Errorf("memory: %w", &backends.UnknownError{Kind: "embedder", Name: c.Embedder, Known: backends.Embedders.Names()})
		}
	}
	if c.LongTermTTL < 0 || (c.LongTermTTL > 0 && !c.LongTerm) {
		return fmt.Errorf("memory: a long-term memory TTL (%s) must be positive and needs long-term memory on", c.LongTermTTL)
	}
	if c.EmbeddingDimensions < 0 {
		return fmt.Errorf("memory: embedding dimension must be positive, got %d", c.EmbeddingDimensions)
	}
	return nil
}

// memoryStores is what startMemory opens.
type memoryStores struct {
	embedder memory.Embedder
	vectors  persistence.VectorStore
	// reembed is set when the store does not outlive the process.
	reembed bool
}

// startMemory makes the embedder and opens the vector store. demoURL is the demo
// model's OpenAI API root ("" when the node runs none).
func startMemory(ctx context.Context, cfg MemoryConfig, postgresDSN, demoURL string) (memoryStores, error) {
	if err := cfg.Validate(postgresDSN); err != nil {
		return memoryStores{}, err
	}
	cfg = cfg.withDefaults()
	embedder, err := backends.Embedders.Open(ctx, cfg.Embedder, backends.EmbedderConfig{Dimensions: cfg.EmbeddingDimensions,
		Model: cfg.EmbeddingModel, BaseURL: cfg.EmbeddingBaseURL, APIKey: cfg.EmbeddingAPIKey, DemoURL: demoURL})
	if err != nil {
		return memoryStores{}, err
	}
	v, err := backends.VectorStores.Open(ctx, cfg.VectorStore, backends.VectorConfig{Dimensions: cfg.EmbeddingDimensions,
		PostgresDSN: postgresDSN, EfSearch: cfg.PgvectorEfSearch})
	if err != nil {
		return memoryStores{}, err
	}
	return memoryStores{embedder: embedder, vectors: v.Store, reembed: v.Reembed}, nil
}

// otherDimensions lists the dimensions the pgvector store was used with besides the
// configured one ("" for other stores or none).
func otherDimensions(ctx context.Context, v persistence.VectorStore) string {
	s, ok := v.(*pgvector.Store)
	if !ok {
		return ""
	}
	dims, err := s.IndexedDimensions(ctx)
	if err != nil {
		return ""
	}
	var other []string
	for _, d := range dims {
		if d != s.Dimensions() {
			other = append(other, fmt.Sprint(d))
		}
	}
	return strings.Join(other, ", ")
}
