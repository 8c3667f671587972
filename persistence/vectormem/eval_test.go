package vectormem_test

import (
	"context"
	"testing"

	"github.com/fathom-agents/fathom/memory/gloveembed"
	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/vectormem"
	"github.com/fathom-agents/fathom/persistence/vectortest"
)

// BenchmarkRetrievalEval: recall@5 of the embedded store on the committed evaluation set
// (vectortest.LoadEval, 216 queries), with the local hash embedder, per retrieval mode:
// recall@5 overall and recall@5-identifier (queries naming an identifier).
func BenchmarkRetrievalEval(b *testing.B) {
	s, err := vectormem.New(hashembed.DefaultDimensions)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	vectortest.BenchRecall(b, s, hashembed.New(s.Dimensions()).Embed)
}

// BenchmarkRetrievalEvalGloVe is BenchmarkRetrievalEval with the GloVe embedder
// (memory/gloveembed: SIF-weighted mean, max and min of GloVe word vectors, 300 dimensions, all
// 341,479 words; installed from npm, skipped when npm is unreachable): the semantic
// embedding the hash embedder is not.
func BenchmarkRetrievalEvalGloVe(b *testing.B) { benchGloVe(b, gloveembed.Options{}) }

// BenchmarkRetrievalEvalGloVe100k is BenchmarkRetrievalEvalGloVe keeping only the
// 100,000 most frequent words (gloveembed.Options.MaxWords: 40 MB of table instead of
// 137 MB).
func BenchmarkRetrievalEvalGloVe100k(b *testing.B) {
	benchGloVe(b, gloveembed.Options{MaxWords: 100_000})
}

// BenchmarkRetrievalEvalGloVeKeepCommon is BenchmarkRetrievalEvalGloVe with the word
// vectors as the file has them (gloveembed.Options.KeepCommon: their mean and first
// principal component not removed): SIF's weighted mean alone.
func BenchmarkRetrievalEvalGloVeKeepCommon(b *testing.B) {
	benchGloVe(b, gloveembed.Options{KeepCommon: true})
}

func benchGloVe(b *testing.B, opts gloveembed.Options) {
	e := vectortest.GloVe(b, opts)
	s, err := vectormem.New(e.Dimensions())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	vectortest.BenchRecallTuned(b, s, e.Embed)
}

// BenchmarkRetrievalLatency100k: retrieval of the evaluation set's queries (embedding
// included, k 5) with 100,000 messages stored, 100 sessions of 1,000, per mode: p50 and
// p99 latency (target p99 ≤ 5 ms for hybrid).
func BenchmarkRetrievalLatency100k(b *testing.B) {
	const streams, per = 100, 1000
	ctx := context.Background()
	set, err := vectortest.LoadEval()
	if err != nil {
		b.Fatal(err)
	}
	embed := hashembed.New(hashembed.DefaultDimensions).Embed
	corpus, err := set.Scaled(ctx, embed, streams, per)
	if err != nil {
		b.Fatal(err)
	}
	s, err := vectormem.New(hashembed.DefaultDimensions)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, st := range corpus {
		if err := s.Upsert(ctx, vectortest.Tenant, st.ID, st.Vecs); err != nil {
			b.Fatal(err)
		}
	}
	for _, mode := range vectortest.Modes {
		b.Run(mode, func(b *testing.B) { set.BenchLatency(b, s, embed, persistence.Retrieval{Mode: mode}, streams) })
	}
}
