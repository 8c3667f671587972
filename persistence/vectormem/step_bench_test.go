package vectormem_test

import (
	"context"
	"testing"

	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/vectormem"
	"github.com/fathom-agents/fathom/persistence/vectortest"
)

// BenchmarkStepRetrieval is what a session step asks of the embedded store: one message
// indexed (Upsert of its vector and text) and one hybrid retrieval (k 5) in a stream of
// a session's size, 60 messages of the evaluation set, the new message replacing the
// oldest in turn so the stream keeps its size. Embeddings are made beforehand.
func BenchmarkStepRetrieval(b *testing.B) {
	ctx := context.Background()
	set, err := vectortest.LoadEval()
	if err != nil {
		b.Fatal(err)
	}
	var texts []string
	for _, s := range set.Sessions {
		texts = append(texts, s.Messages...)
	}
	const size = 60
	embed := hashembed.New(hashembed.DefaultDimensions).Embed
	vecs, err := embed(ctx, texts)
	if err != nil {
		b.Fatal(err)
	}
	qvecs, err := embed(ctx, []string{set.Queries[0].Query, set.Queries[1].Query})
	if err != nil {
		b.Fatal(err)
	}
	s, err := vectormem.New(hashembed.DefaultDimensions)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range size {
		if err := s.Upsert(ctx, vectortest.Tenant, "s", []persistence.Vector{{Seq: uint64(i), Values: vecs[i], Text: texts[i]}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m := (size + i) % len(texts)
		if err := s.Upsert(ctx, vectortest.Tenant, "s", []persistence.Vector{{Seq: uint64(i % size), Values: vecs[m], Text: texts[m]}}); err != nil {
			b.Fatal(err)
		}
		q := set.Queries[i%2].Query
		if _, err := persistence.HybridSearch(ctx, s, persistence.Retrieval{}, vectortest.Tenant, "s", q, qvecs[i%2], 5); err != nil {
			b.Fatal(err)
		}
	}
}
