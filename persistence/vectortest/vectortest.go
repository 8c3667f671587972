// Package vectortest is the conformance suite every persistence.VectorStore passes (and
// its text search: the stores are persistence.TextSearchers, text.go; and the seqs
// they hold: persistence.VectorSeqs, seqs.go): run it from
// each implementation's tests with a constructor of fresh, empty stores.
//
//	func TestConformance(t *testing.T) {
//		vectortest.Run(t, func(t *testing.T, dims int) persistence.VectorStore { ... })
//	}
package vectortest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"sync"
	"testing"

	"github.com/fathom-agents/fathom/persistence"
)

// Tenant is the tenant of the suite's vectors; OtherTenant is another one, whose
// vectors must never be reachable through Tenant's keys (nor the reverse).
const (
	Tenant      = "acme"
	OtherTenant = "globex"
)

// Opener returns a fresh, empty store of dims-dimensional vectors. The suite closes it.
type Opener func(t *testing.T, dims int) persistence.VectorStore

// Run runs the suite. Each subtest opens its own store.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"SearchOrderAndScores", testSearchOrder},
		{"UpsertReplaces", testUpsertReplaces},
		{"StreamsAreIsolated", testStreams},
		{"DeleteStream", testDelete},
		{"Validation", testValidation},
		{"TopKMatchesBruteForce", testBruteForce},
		{"Concurrent", testConcurrent},
		{"Close", testClose},
		{"TenantsAreIsolated", testTenants},
		{"TextIdentifiers", testTextIdentifiers},
		{"TextUpsertAndDelete", testTextDelete},
		{"TextQueryTermsBounded", testTextQueryBound},
		{"TextTenantsAreIsolated", testTextTenants},
		{"TextValidation", testTextValidation},
		{"RetrievalModes", testRetrievalModes},
		{"StoredSeqs", testStoredSeqs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

func openStore(t *testing.T, open Opener, dims int) persistence.VectorStore {
	t.Helper()
	s := open(t, dims)
	t.Cleanup(func() { _ = s.Close() })
	if s.Dimensions() != dims {
		t.Fatalf("Dimensions() = %d, want %d", s.Dimensions(), dims)
	}
	return s
}

func upsert(t *testing.T, s persistence.VectorStore, stream string, vecs ...persistence.Vector) {
	t.Helper()
	if err := s.Upsert(context.Background(), Tenant, stream, vecs); err != nil {
		t.Fatalf("upsert %s: %v", stream, err)
	}
}

func search(t *testing.T, s persistence.VectorStore, stream string, q []float32, k int) []persistence.VectorHit {
	t.Helper()
	hits, err := s.Search(context.Background(), Tenant, stream, q, k)
	if err != nil {
		t.Fatalf("search %s: %v", stream, err)
	}
	return hits
}

func seqsOf(hits []persistence.VectorHit) []uint64 {
	out := make([]uint64, len(hits))
	for i, h := range hits {
		out[i] = h.Seq
	}
	return out
}

func testSearchOrder(t *testing.T, open Opener) {
	s := openStore(t, open, 3)
	upsert(t, s, "s1",
		persistence.Vector{Seq: 1, Values: []float32{1, 0, 0}, Meta: map[string]string{"role": "user"}},
		persistence.Vector{Seq: 2, Values: []float32{0, 2, 0}}, // not normalised
		persistence.Vector{Seq: 3, Values: []float32{1, 1, 0}},
		persistence.Vector{Seq: 4, Values: []float32{-1, 0, 0}},
		persistence.Vector{Seq: 5, Values: []float32{3, 0.3, 0}},
	)
	hits := search(t, s, "s1", []float32{2, 0, 0}, 3)
	if got := fmt.Sprint(seqsOf(hits)); got != "[1 5 3]" {
		t.Fatalf("order %s, want [1 5 3]", got)
	}
	want := []float64{1, 3 / math.Sqrt(9.09), 1 / math.Sqrt2}
	for i, h := range hits {
		if math.Abs(float64(h.Score)-want[i]) > 1e-4 {
			t.Errorf("hit %d score %f, want %f (cosine similarity)", h.Seq, h.Score, want[i])
		}
	}
	if hits[0].Meta["role"] != "user" {
		t.Errorf("meta %v", hits[0].Meta)
	}
	all := search(t, s, "s1", []float32{1, 0, 0}, 100)
	if got := fmt.Sprint(seqsOf(all)); got != "[1 5 3 2 4]" {
		t.Fatalf("k > count: %s", got)
	}
	if math.Abs(float64(all[4].Score)+1) > 1e-4 || math.Abs(float64(all[3].Score)) > 1e-4 {
		t.Fatalf("opposite/orthogonal scores %f %f", all[4].Score, all[3].Score)
	}
}

func testUpsertReplaces(t *testing.T, open Opener) {
	s := openStore(t, open, 2)
	upsert(t, s, "s", persistence.Vector{Seq: 7, Values: []float32{1, 0}, Meta: map[string]string{"v": "1"}})
	upsert(t, s, "s", persistence.Vector{Seq: 7, Values: []float32{0, 1}, Meta: map[string]string{"v": "2"}}, persistence.Vector{Seq: 8, Values: []float32{1, 0.1}})
	hits := search(t, s, "s", []float32{0, 1}, 10)
	if len(hits) != 2 || hits[0].Seq != 7 || hits[0].Meta["v"] != "2" || math.Abs(float64(hits[0].Score)-1) > 1e-4 {
		t.Fatalf("after replace: %+v", hits)
	}
	if err := s.Upsert(context.Background(), Tenant, "s", nil); err != nil {
		t.Fatalf("empty upsert: %v", err)
	}
}

func testStreams(t *testing.T, open Opener) {
	s := openStore(t, open, 2)
	upsert(t, s, "a", persistence.Vector{Seq: 1, Values: []float32{1, 0}})
	upsert(t, s, "b", persistence.Vector{Seq: 1, Values: []float32{0, 1}}, persistence.Vector{Seq: 2, Values: []float32{1, 1}})
	if hits := search(t, s, "a", []float32{0, 1}, 5); len(hits) != 1 || hits[0].Seq != 1 || hits[0].Score > 0.01 {
		t.Fatalf("stream a: %+v", hits)
	}
	if hits := search(t, s, "b", []float32{0, 1}, 5); fmt.Sprint(seqsOf(hits)) != "[1 2]" {
		t.Fatalf("stream b: %+v", hits)
	}
	if hits := search(t, s, "unknown", []float32{0, 1}, 5); len(hits) != 0 {
		t.Fatalf("unknown stream: %+v", hits)
	}
}

func testDelete(t *testing.T, open Opener) {
	s := openStore(t, open, 2)
	upsert(t, s, "a", persistence.Vector{Seq: 1, Values: []float32{1, 0}})
	upsert(t, s, "b", persistence.Vector{Seq: 1, Values: []float32{1, 0}})
	if err := s.DeleteStream(context.Background(), Tenant, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteStream(context.Background(), Tenant, "never"); err != nil {
		t.Fatalf("delete unknown: %v", err)
	}
	if hits := search(t, s, "a", []float32{1, 0}, 5); len(hits) != 0 {
		t.Fatalf("deleted stream still has %+v", hits)
	}
	if hits := search(t, s, "b", []float32{1, 0}, 5); len(hits) != 1 {
		t.Fatalf("other stream lost: %+v", hits)
	}
	upsert(t, s, "a", persistence.Vector{Seq: 1, Values: []float32{0, 1}})
	if hits := search(t, s, "a", []float32{0, 1}, 5); len(hits) != 1 || hits[0].Score < 0.99 {
		t.Fatalf("re-created stream: %+v", hits)
	}
}

func testValidation(t *testing.T, open Opener) {
	s := openStore(t, open, 3)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"short vector", s.Upsert(ctx, Tenant, "s", []persistence.Vector{{Seq: 1, Values: []float32{1, 0}}}), persistence.ErrDimension},
		{"zero vector", s.Upsert(ctx, Tenant, "s", []persistence.Vector{{Seq: 1, Values: []float32{0, 0, 0}}}), persistence.ErrInvalid},
		{"NaN", s.Upsert(ctx, Tenant, "s", []persistence.Vector{{Seq: 1, Values: []float32{float32(math.NaN()), 0, 1}}}), persistence.ErrInvalid},
		{"empty stream", s.Upsert(ctx, Tenant, "", []persistence.Vector{{Seq: 1, Values: []float32{1, 0, 0}}}), persistence.ErrInvalid},
		{"empty tenant", s.Upsert(ctx, "", "s", []persistence.Vector{{Seq: 1, Values: []float32{1, 0, 0}}}), persistence.ErrInvalid},
		{"bad tenant", s.Upsert(ctx, "../x", "s", []persistence.Vector{{Seq: 1, Values: []float32{1, 0, 0}}}), persistence.ErrInvalid},
		{"search empty tenant", func() error { _, err := s.Search(ctx, "", "s", []float32{1, 0, 0}, 1); return err }(), persistence.ErrInvalid},
		{"delete empty tenant", s.DeleteStream(ctx, "", "s"), persistence.ErrInvalid},
		{"long query", func() error { _, err := s.Search(ctx, Tenant, "s", []float32{1, 0, 0, 0}, 1); return err }(), persistence.ErrDimension},
		{"k 0", func() error { _, err := s.Search(ctx, Tenant, "s", []float32{1, 0, 0}, 0); return err }(), persistence.ErrInvalid},
		{"zero query", func() error { _, err := s.Search(ctx, Tenant, "s", []float32{0, 0, 0}, 1); return err }(), persistence.ErrInvalid},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	// A batch with one bad vector stores nothing.
	err := s.Upsert(ctx, Tenant, "s", []persistence.Vector{{Seq: 1, Values: []float32{1, 0, 0}}, {Seq: 2, Values: []float32{1}}})
	if !errors.Is(err, persistence.ErrDimension) {
		t.Fatalf("bad batch: %v", err)
	}
	if hits := search(t, s, "s", []float32{1, 0, 0}, 5); len(hits) != 0 {
		t.Fatalf("bad batch partly stored: %+v", hits)
	}
}

// RandomUnit returns n random unit vectors of dims dimensions (normal components).
func RandomUnit(r *rand.Rand, n, dims int) [][]float32 {
	out := make([][]float32, n)
	for i := range out {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		out[i] = persistence.Normalize(v)
	}
	return out
}

// BruteForce returns the indexes of the k vectors of vecs closest to q by cosine,
// best first: the reference for recall measurements.
func BruteForce(vecs [][]float32, q []float32, k int) []int {
	qn := persistence.Normalize(q)
	type sc struct {
		i int
		s float64
	}
	all := make([]sc, len(vecs))
	for i, v := range vecs {
		var d float64
		for j := range v {
			d += float64(v[j]) * float64(qn[j])
		}
		all[i] = sc{i, d}
	}
	sort.Slice(all, func(a, b int) bool { return all[a].s > all[b].s || (all[a].s == all[b].s && all[a].i < all[b].i) })
	out := make([]int, min(k, len(all)))
	for i := range out {
		out[i] = all[i].i
	}
	return out
}

func testBruteForce(t *testing.T, open Opener) {
	s := openStore(t, open, 16)
	r := rand.New(rand.NewSource(1))
	vecs := RandomUnit(r, 300, 16)
	batch := make([]persistence.Vector, len(vecs))
	for i, v := range vecs {
		batch[i] = persistence.Vector{Seq: uint64(i + 1), Values: v}
	}
	upsert(t, s, "s", batch...)
	found, total := 0, 0
	for _, q := range RandomUnit(r, 20, 16) {
		want := BruteForce(vecs, q, 10)
		hits := search(t, s, "s", q, 10)
		if len(hits) != 10 {
			t.Fatalf("%d hits, want 10", len(hits))
		}
		for i := 1; i < len(hits); i++ {
			if hits[i].Score > hits[i-1].Score {
				t.Fatalf("hits not best first: %+v", hits)
			}
		}
		set := map[uint64]bool{}
		for _, h := range hits {
			set[h.Seq] = true
		}
		for _, w := range want {
			total++
			if set[uint64(w+1)] {
				found++
			}
		}
	}
	// Approximate stores may miss a few; on 300 vectors an HNSW index is all but exact.
	if recall := float64(found) / float64(total); recall < 0.98 {
		t.Fatalf("recall@10 %.3f < 0.98", recall)
	}
}

func testConcurrent(t *testing.T, open Opener) {
	s := openStore(t, open, 8)
	r := rand.New(rand.NewSource(2))
	vecs := RandomUnit(r, 200, 8)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 4; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := w; i < len(vecs); i += 4 {
				if err := s.Upsert(context.Background(), Tenant, "s", []persistence.Vector{{Seq: uint64(i + 1), Values: vecs[i]}}); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				if _, err := s.Search(context.Background(), Tenant, "s", vecs[i], 5); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if hits := search(t, s, "s", vecs[17], 1); len(hits) != 1 || hits[0].Seq != 18 {
		t.Fatalf("after concurrent upserts: %+v", hits)
	}
}

func testClose(t *testing.T, open Opener) {
	s := open(t, 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Upsert(ctx, Tenant, "s", []persistence.Vector{{Seq: 1, Values: []float32{1, 0}}}); !errors.Is(err, persistence.ErrClosed) {
		t.Errorf("upsert after close: %v", err)
	}
	if _, err := s.Search(ctx, Tenant, "s", []float32{1, 0}, 1); !errors.Is(err, persistence.ErrClosed) {
		t.Errorf("search after close: %v", err)
	}
	if err := s.DeleteStream(ctx, Tenant, "s"); !errors.Is(err, persistence.ErrClosed) {
		t.Errorf("delete after close: %v", err)
	}
}

// testTenants: two tenants' streams of the same id (and seqs) are two streams: neither
// is searched, replaced or deleted through the other's key.
func testTenants(t *testing.T, open Opener) {
	s := openStore(t, open, 2)
	ctx := context.Background()
	if err := s.Upsert(ctx, Tenant, "s", []persistence.Vector{{Seq: 1, Values: []float32{1, 0}, Meta: map[string]string{"who": "a"}}}); err != nil {
		t.Fatal(err)
	}
	if hits, err := s.Search(ctx, OtherTenant, "s", []float32{1, 0}, 5); err != nil || len(hits) != 0 {
		t.Fatalf("tenant %s searches tenant %s's stream: %+v %v", OtherTenant, Tenant, hits, err)
	}
	// The other tenant's stream of the same id and seq.
	if err := s.Upsert(ctx, OtherTenant, "s", []persistence.Vector{{Seq: 1, Values: []float32{0, 1}, Meta: map[string]string{"who": "b"}}}); err != nil {
		t.Fatal(err)
	}
	a, err := s.Search(ctx, Tenant, "s", []float32{1, 0}, 5)
	if err != nil || len(a) != 1 || a[0].Meta["who"] != "a" || a[0].Score < 0.99 {
		t.Fatalf("tenant %s's stream after tenant %s's upsert: %+v %v", Tenant, OtherTenant, a, err)
	}
	if err := s.DeleteStream(ctx, OtherTenant, "s"); err != nil {
		t.Fatal(err)
	}
	if a, err := s.Search(ctx, Tenant, "s", []float32{1, 0}, 5); err != nil || len(a) != 1 || a[0].Meta["who"] != "a" {
		t.Fatalf("tenant %s's stream after tenant %s's delete: %+v %v", Tenant, OtherTenant, a, err)
	}
	if b, err := s.Search(ctx, OtherTenant, "s", []float32{0, 1}, 5); err != nil || len(b) != 0 {
		t.Fatalf("tenant %s's deleted stream: %+v %v", OtherTenant, b, err)
	}
}
