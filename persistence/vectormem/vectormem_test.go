package vectormem_test

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"testing"

	"github.com/fathom-agents/fathom/memory/hashembed"
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
	// The terms, the list of the rows replaced and DeleteFunc's closure (the meta is
	// nil: no clone).
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

// TestReplacedRowsLoseTheirTerms: rows replaced in one upsert, with new rows and a seq
// given twice (the last text wins), are found by their new text only.
func TestReplacedRowsLoseTheirTerms(t *testing.T) {
	ctx := context.Background()
	s, err := vectormem.New(2)
	if err != nil {
		t.Fatal(err)
	}
	vec := func(seq uint64, text string) persistence.Vector {
		return persistence.Vector{Seq: seq, Values: []float32{1, 0}, Text: text}
	}
	if err := s.Upsert(ctx, "t", "s", []persistence.Vector{vec(1, "alpha beta"), vec(2, "beta gamma"), vec(3, "zeta")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Upsert(ctx, "t", "s", []persistence.Vector{vec(1, "delta"), vec(4, "alpha"), vec(2, "epsilon"), vec(2, "gamma eta")}); err != nil {
		t.Fatal(err)
	}
	for query, want := range map[string][]uint64{"alpha": {4}, "beta": nil, "delta": {1}, "epsilon": nil, "gamma": {2}, "eta": {2}, "zeta": {3}} {
		hits, err := s.SearchText(ctx, "t", "s", query, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for _, h := range hits {
			got = append(got, h.Seq)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q finds seqs %v, want %v", query, got, want)
		}
	}
}

// TestSparseRowsScoreAsDense: a vector with few non-zero entries (the hash embedder's)
// is kept sparse, and its scores are the dense vector's, bit for bit, with -0 entries,
// a vector replaced by one of the other form, and every dimension count.
func TestSparseRowsScoreAsDense(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewSource(7))
	for _, dims := range []int{1, 2, 7, 64, 256, 1536} {
		s, err := vectormem.New(dims)
		if err != nil {
			t.Fatal(err)
		}
		want := map[uint64][]float32{}
		for round := range 3 {
			var vecs []persistence.Vector
			for i := range 200 {
				v := make([]float32, dims)
				nz := []int{0, 1, dims / 8, dims / 3, dims}[r.Intn(5)]
				for range nz {
					v[r.Intn(dims)] = float32(r.NormFloat64())
				}
				if r.Intn(4) == 0 {
					v[r.Intn(dims)] = float32(math.Copysign(0, -1))
				}
				if !slices.ContainsFunc(v, func(f float32) bool { return f != 0 }) {
					v[r.Intn(dims)] = 1
				}
				seq := uint64(i + 1 + round*50) // later rounds replace rows of earlier ones
				vecs = append(vecs, persistence.Vector{Seq: seq, Values: v})
				want[seq] = persistence.Normalize(v)
			}
			if err := s.Upsert(ctx, "t", "s", vecs); err != nil {
				t.Fatal(err)
			}
			q := persistence.Normalize(vectortest.RandomUnit(r, 1, dims)[0])
			hits, err := s.Search(ctx, "t", "s", q, len(want))
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) != len(want) {
				t.Fatalf("dims %d: %d hits, want %d", dims, len(hits), len(want))
			}
			for _, h := range hits {
				if d := vectormem.Dot(want[h.Seq], q); math.Float32bits(d) != math.Float32bits(h.Score) {
					t.Fatalf("dims %d seq %d: score %v, the dense vector's %v", dims, h.Seq, h.Score, d)
				}
			}
		}
	}
}

// TestRowMemory: a message embedded by the hash embedder (a few words: a few non-zero
// entries of 256) with the session's usual metadata costs the store far less than its
// dense vector's kilobyte.
func TestRowMemory(t *testing.T) {
	ctx := context.Background()
	const rows = 4000
	s, err := vectormem.New(hashembed.DefaultDimensions)
	if err != nil {
		t.Fatal(err)
	}
	vecs := make([]persistence.Vector, rows)
	roles := []string{"user", "assistant", "tool"}
	for i := range vecs {
		text := fmt.Sprintf("step %d: read the file notes-%d.txt and summarise what it says", i, i%97)
		vecs[i] = persistence.Vector{Seq: uint64(i + 1), Values: hashembed.Vector(text, hashembed.DefaultDimensions), Meta: map[string]string{"role": roles[i%3]}}
	}
	before := liveHeap()
	for i := 0; i < rows; i += 10 {
		if err := s.Upsert(ctx, "t", "s"+strconv.Itoa(i%100), vecs[i:i+10]); err != nil {
			t.Fatal(err)
		}
	}
	perRow := (liveHeap() - before) / rows
	runtime.KeepAlive(s)
	runtime.KeepAlive(vecs)
	if perRow > 600 {
		t.Fatalf("a row costs the store %d bytes, want at most 600", perRow)
	}
	t.Logf("%d bytes per row", perRow)
}

// liveHeap collects and returns the bytes of the heap objects the collection kept.
func liveHeap() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}
