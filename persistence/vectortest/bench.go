package vectortest

import (
	"context"
	"testing"

	"github.com/fathom-agents/fathom/persistence"
)

// Modes are the retrieval modes the benchmarks measure, one sub-benchmark each.
var Modes = []string{persistence.RetrievalHybrid, persistence.RetrievalVector, persistence.RetrievalText}

// BenchRecall is a backend's BenchmarkRetrievalEval: it loads the committed evaluation
// set (LoadEval) into s with embed and reports, per retrieval mode (a sub-benchmark
// each), recall@5 overall and per query kind (identifier, paraphrase, mixed).
func BenchRecall(b *testing.B, s persistence.VectorStore, embed Embed) {
	ctx := context.Background()
	set, err := LoadEval()
	if err != nil {
		b.Fatal(err)
	}
	if err := set.Load(ctx, s, embed); err != nil {
		b.Fatal(err)
	}
	for _, mode := range Modes {
		b.Run(mode, func(b *testing.B) {
			var rec Recall
			for b.Loop() {
				if rec, err = set.Recall(ctx, s, embed, persistence.Retrieval{Mode: mode}, 5); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(rec.All, "recall@5")
			b.ReportMetric(rec.ByKind["identifier"], "recall@5-identifier")
			b.ReportMetric(rec.ByKind["paraphrase"], "recall@5-paraphrase")
			b.ReportMetric(rec.ByKind["mixed"], "recall@5-mixed")
		})
	}
}
