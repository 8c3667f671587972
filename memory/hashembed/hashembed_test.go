package hashembed_test

import (
	"context"
	"math"
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
