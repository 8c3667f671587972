package vectormem_test

import (
	"context"
	"math/rand"
	"slices"
	"strconv"
	"testing"

	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/vectormem"
	"github.com/fathom-agents/fathom/persistence/vectortest"
)

func TestConformance(t *testing.T) {
	vectortest.Run(t, func(t *testing.T, dims int) persistence.VectorStore {
		s, err := vectormem.New(dims)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestTopKExact: TopK is exactly the brute-force top k.
func TestTopKExact(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, dims := range []int{1, 7, 64, 1536} {
		vecs := vectortest.RandomUnit(r, 500, dims)
		data := make([]float32, 0, len(vecs)*dims)
		for _, v := range vecs {
			data = append(data, v...)
		}
		for _, k := range []int{1, 10, 499, 600} {
			q := vectortest.RandomUnit(r, 1, dims)[0]
			got := vectormem.TopK(data, dims, q, k)
			want := vectortest.BruteForce(vecs, q, k)
			if len(got) != len(want) {
				t.Fatalf("dims %d k %d: %d hits, want %d", dims, k, len(got), len(want))
			}
			for i := range want {
				if got[i].Row != want[i] {
					// float32 vs float64 sums may swap near-equal neighbours.
					if d := got[i].Score - vectormem.Dot(vecs[want[i]], q); d > 1e-5 || d < -1e-5 {
						t.Fatalf("dims %d k %d: rank %d row %d, want %d", dims, k, i, got[i].Row, want[i])
					}
				}
			}
		}
	}
	if got := vectormem.TopK(nil, 3, []float32{1, 0, 0}, 5); got != nil {
		t.Fatalf("empty: %v", got)
	}
}

func TestNewRejectsBadDims(t *testing.T) {
	if _, err := vectormem.New(0); err == nil {
		t.Fatal("0 dims accepted")
	}
}

// TestSearchEqualsTopK: a stream of hundreds of rows (a vector of its own each), some
// replaced after others were added, searches exactly like one TopK over the matrix of
// all its vectors.
func TestSearchEqualsTopK(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewSource(5))
	const dims, n = 16, 300
	s, err := vectormem.New(dims)
	if err != nil {
		t.Fatal(err)
	}
	vecs := vectortest.RandomUnit(r, n, dims)
	for i, v := range vecs {
		if err := s.Upsert(ctx, "default", "st", []persistence.Vector{{Seq: uint64(i + 1), Values: v, Meta: map[string]string{"i": strconv.Itoa(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{0, 63, 64, 200, n - 1} { // replaced in place
		vecs[i] = vectortest.RandomUnit(r, 1, dims)[0]
		if err := s.Upsert(ctx, "default", "st", []persistence.Vector{{Seq: uint64(i + 1), Values: vecs[i], Meta: map[string]string{"i": strconv.Itoa(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	data := slices.Concat(vecs...)
	for _, k := range []int{1, 10, n} {
		for range 5 {
			q := vectortest.RandomUnit(r, 1, dims)[0]
			hits, err := s.Search(ctx, "default", "st", q, k)
			if err != nil {
				t.Fatal(err)
			}
			want := vectormem.TopK(data, dims, q, k)
			if len(hits) != len(want) {
				t.Fatalf("k %d: %d hits, want %d", k, len(hits), len(want))
			}
			for i, w := range want {
				if hits[i].Seq != uint64(w.Row+1) || hits[i].Meta["i"] != strconv.Itoa(w.Row) {
					t.Fatalf("k %d rank %d: seq %d (meta %v), want %d", k, i, hits[i].Seq, hits[i].Meta, w.Row+1)
				}
			}
		}
	}
}

// TestIndexAndSearchTextAllocations: indexing a message, new or replacing one, and a
// text search allocate for what they keep and return, not a map per message or query.
func TestIndexAndSearchTextAllocations(t *testing.T) {
	ctx := context.Background()
	s, err := vectormem.New(4)
	if err != nil {
		t.Fatal(err)
	}
	const text = "the order ord-2024-0042 failed twice while retrying the payment of the customer"
	v := []persistence.Vector{{Seq: 1, Values: []float32{1, 0, 0, 0}, Text: text}}
	if err := s.Upsert(ctx, "t", "s", v); err != nil {
		t.Fatal(err)
	}
	// The terms, the row's distinct terms and DeleteFunc's closure (the meta is nil: no
	// clone).
	replace := testing.AllocsPerRun(50, func() { _ = s.Upsert(ctx, "t", "s", v) })
	// The terms, the scores, the heap, the hits.
	search := testing.AllocsPerRun(50, func() { _, _ = s.SearchText(ctx, "t", "s", "order failed order payment", 3) })
	seq := uint64(1)
	// The same and the row's vector; the stream's slices and the postings grow now and then.
	add := testing.AllocsPerRun(200, func() {
		seq++
		_ = s.Upsert(ctx, "t", "s", []persistence.Vector{{Seq: seq, Values: v[0].Values, Text: text}})
	})
	if replace > 3 || add > 4 || search > 5 {
		t.Errorf("replacing a message allocates %v times, adding one %v, a text search %v: want at most 3, 4 and 5", replace, add, search)
	}
}
