package hashembed_test

import (
	"context"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/memory/hashembed"
)

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func TestEmbedder(t *testing.T) {
	e := hashembed.New(0)
	if e.Dimensions() != hashembed.DefaultDimensions {
		t.Fatalf("dims %d", e.Dimensions())
	}
	texts := []string{"The deploy key is ZEBRA-42", "what was the deploy key?", "a recipe for soup", "", "The deploy key is ZEBRA-42"}
	vecs, err := e.Embed(context.Background(), texts)
	if err != nil || len(vecs) != len(texts) {
		t.Fatalf("%v %d", err, len(vecs))
	}
	for i, v := range vecs {
		if len(v) != e.Dimensions() || math.Abs(dot(v, v)-1) > 1e-5 {
			t.Fatalf("vector %d: len %d, norm² %f", i, len(v), dot(v, v))
		}
	}
	if dot(vecs[0], vecs[4]) < 0.99999 {
		t.Fatal("not deterministic")
	}
	if dot(vecs[0], vecs[1]) <= dot(vecs[0], vecs[2]) {
		t.Fatalf("related %f <= unrelated %f", dot(vecs[0], vecs[1]), dot(vecs[0], vecs[2]))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, texts); err == nil {
		t.Fatal("cancelled context ignored")
	}
}

// referenceVector is the first definition of Vector, kept to pin its output: stored
// embeddings (pgvector) must match the vectors of new queries, so a faster Vector must
// give the very same floats.
func referenceVector(text string, dims int) []float32 {
	v := make([]float64, dims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127)
	}) {
		h := fnv.New64a()
		_, _ = h.Write([]byte(w))
		x := h.Sum64()
		sign := 1.0
		if x&1 == 1 {
			sign = -1
		}
		v[(x>>1)%uint64(dims)] += sign
	}
	var norm float64
	for _, f := range v {
		norm += f * f
	}
	out := make([]float32, dims)
	if norm == 0 {
		out[0] = 1
		return out
	}
	norm = math.Sqrt(norm)
	for i, f := range v {
		out[i] = float32(f / norm)
	}
	return out
}

func TestVectorMatchesReference(t *testing.T) {
	texts := []string{
		"", "   ", "!!!", "The deploy key is ZEBRA-42", "what was the deploy key?",
		"Ünïcödé Straße İstanbul ΣΊΣΥΦΟΣ café", "\xff\xfeinvalid\xc3 utf8 \xe2\x82", "KELVIN \u212a sign",
		"tabs\tand\nnewlines\r\nmixed_CASE-words 123 4.5e6", strings.Repeat("word ", 10000),
	}
	for _, dims := range []int{1, 7, 256, 1536} {
		for _, text := range texts {
			got, want := hashembed.Vector(text, dims), referenceVector(text, dims)
			if !slices.Equal(got, want) {
				t.Fatalf("dims %d, text %q: vector differs from the reference", dims, text)
			}
		}
	}
}

func FuzzVectorMatchesReference(f *testing.F) {
	f.Add("The deploy key is ZEBRA-42", 256)
	f.Add("Ünïcödé \xff", 3)
	f.Fuzz(func(t *testing.T, text string, dims int) {
		if dims < 1 || dims > 4096 {
			return
		}
		if got, want := hashembed.Vector(text, dims), referenceVector(text, dims); !slices.Equal(got, want) {
			t.Fatalf("dims %d, text %q: vector differs from the reference", dims, text)
		}
	})
}

func BenchmarkVector(b *testing.B) {
	text := strings.Repeat("The step is done: here is a short deliverable of a few dozen words. ", 8)
	b.ReportAllocs()
	for b.Loop() {
		hashembed.Vector(text, hashembed.DefaultDimensions)
	}
}

// A text of 2^24 bytes or more counts in float64 (a bucket could pass float32's exact
// integers): the same floats as the reference too.
func TestVectorLongTextMatchesReference(t *testing.T) {
	text := strings.Repeat("alphabetical betatron gammaray ", 1<<24/31+1) // just over 2^24 bytes: the float64 path
	if len(text) < 1<<24 {
		t.Fatalf("text of %d bytes is too short for the long path", len(text))
	}
	if got, want := hashembed.Vector(text, 3), referenceVector(text, 3); !slices.Equal(got, want) {
		t.Fatalf("long text: vector %v, reference %v", got, want)
	}
}
