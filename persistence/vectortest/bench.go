package vectortest

import (
	"context"
	"fmt"
	"testing"

	"github.com/fathom-agents/fathom/persistence"
)

// Modes are the retrieval modes the benchmarks measure, one sub-benchmark each.
var Modes = []string{persistence.RetrievalHybrid, persistence.RetrievalVector, persistence.RetrievalText}

// BenchRecall is a backend's BenchmarkRetrievalEval: it loads the committed evaluation
// set (LoadEval) into s with embed and reports, per retrieval mode (a sub-benchmark
// each), recall@5 overall, per query kind (identifier, paraphrase, mixed) and on the
// held-out half of the set (recall@5-heldout, Halves).
func BenchRecall(b *testing.B, s persistence.VectorStore, embed Embed) {
	set := loadEval(b, s, embed)
	_, held := set.Halves()
	for _, mode := range Modes {
		b.Run(mode, func(b *testing.B) { benchMode(b, s, embed, set, held, persistence.Retrieval{Mode: mode}) })
	}
}

// Weights are a candidate VectorWeight/TextWeight of hybrid retrieval.
type Weights struct{ Vector, Text float64 }

// TuneWeights are the weights BenchRecallTuned chooses from: the default 1/1 first
// (it wins ties), then more weight to one ranking or the other.
var TuneWeights = []Weights{{1, 1}, {1, 2}, {2, 1}, {2, 3}, {3, 2}, {1, 3}, {3, 1}}

// TuneRRFK are the rank constants of reciprocal rank fusion BenchRecallTuned chooses
// from, with each of TuneWeights: the default first, then web search's 60.
var TuneRRFK = []int{persistence.DefaultRRFK, 30, 60}

// BenchRecallTuned is BenchRecall plus a sub-benchmark "hybrid-tuned": hybrid retrieval
// with the fusion weights and rank constant, among TuneWeights × TuneRRFK, of the best recall@5 on the tuning half
// of the set (Halves; the first best on a tie), chosen afresh each run. It reports
// recall@5 of those weights on the whole set, recall@5-heldout on the half they were
// not chosen on, recall@5-tune on the half they were, by kind, and what was chosen
// (vector-weight, text-weight, rrf-k). The single rankings' recall@5-heldout are their rows'.
func BenchRecallTuned(b *testing.B, s persistence.VectorStore, embed Embed) {
	set := loadEval(b, s, embed)
	tune, held := set.Halves()
	for _, mode := range Modes {
		b.Run(mode, func(b *testing.B) { benchMode(b, s, embed, set, held, persistence.Retrieval{Mode: mode}) })
	}
	ctx := context.Background()
	best, bestRecall := persistence.Retrieval{}, -1.0
	for _, k := range TuneRRFK {
		for _, w := range TuneWeights {
			r := persistence.Retrieval{Mode: persistence.RetrievalHybrid, VectorWeight: w.Vector, TextWeight: w.Text, RRFK: k}
			rec, err := tune.Recall(ctx, s, embed, r, 5)
			if err != nil {
				b.Fatal(err)
			}
			if rec.All > bestRecall {
				best, bestRecall = r, rec.All
			}
		}
	}
	b.Run("hybrid-tuned", func(b *testing.B) {
		benchMode(b, s, embed, set, held, best)
		b.ReportMetric(bestRecall, "recall@5-tune")
		b.ReportMetric(best.VectorWeight, "vector-weight")
		b.ReportMetric(best.TextWeight, "text-weight")
		b.ReportMetric(float64(best.RRFK), "rrf-k")
	})
}

// loadEval loads the evaluation set into s.
func loadEval(b *testing.B, s persistence.VectorStore, embed Embed) EvalSet {
	set, err := LoadEval()
	if err != nil {
		b.Fatal(err)
	}
	if err := set.Load(context.Background(), s, embed); err != nil {
		b.Fatal(err)
	}
	return set
}

// benchMode measures retrieval r over set and reports its recall@5 overall, by kind and
// on the held-out half held.
func benchMode(b *testing.B, s persistence.VectorStore, embed Embed, set, held EvalSet, r persistence.Retrieval) {
	ctx := context.Background()
	var rec Recall
	var err error
	for b.Loop() {
		if rec, err = set.Recall(ctx, s, embed, r, 5); err != nil {
			b.Fatal(err)
		}
	}
	h, err := held.Recall(ctx, s, embed, r, 5)
	if err != nil {
		b.Fatal(fmt.Errorf("held-out half: %w", err))
	}
	b.ReportMetric(rec.All, "recall@5")
	b.ReportMetric(rec.ByKind["identifier"], "recall@5-identifier")
	b.ReportMetric(rec.ByKind["paraphrase"], "recall@5-paraphrase")
	b.ReportMetric(rec.ByKind["mixed"], "recall@5-mixed")
	b.ReportMetric(h.All, "recall@5-heldout")
}
