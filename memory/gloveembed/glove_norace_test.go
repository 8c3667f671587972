//go:build !race

// The tests of the npm package's word vectors: reading its 307 MB of JSON takes minutes
// under the race detector, which a single-goroutine parse gives nothing to find, so
// they are excluded from -race runs; `make test` runs them in its second pass without
// -race.

package gloveembed_test

import (
	"sync"
	"testing"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/memory/gloveembed"
	"github.com/fathom-agents/fathom/memory/hashembed"
)

var glove struct {
	once sync.Once
	e    *gloveembed.Embedder
	err  error
}

// loadGloVe is the npm package's embedder (testenv.GloVe: skipped when npm is not
// reachable), loaded once.
func loadGloVe(t testing.TB) *gloveembed.Embedder {
	t.Helper()
	path := testenv.GloVe(t)
	glove.once.Do(func() { glove.e, glove.err = gloveembed.Load(path, gloveembed.Options{}) })
	if glove.err != nil {
		t.Fatal(glove.err)
	}
	return glove.e
}

// TestGloVeParaphrasesAreNear: with the npm package's word vectors (341,479 words, 100
// dimensions), a question is nearer the message that answers it in other words than a
// message on another subject that shares a word with it; the hash embedder, which knows
// words and not meanings, ranks them the other way.
func TestGloVeParaphrasesAreNear(t *testing.T) {
	e := loadGloVe(t)
	if e.Dimensions() != gloveembed.WinkDimensions || e.Words() != 341479 {
		t.Fatalf("%d dimensions, %d words", e.Dimensions(), e.Words())
	}
	hash := func(text string) []float32 { return hashembed.Vector(text, hashembed.DefaultDimensions) }
	for _, c := range []struct{ query, answer, other string }{
		{"Did a customer pay double for the same order?", "The shopper's card was billed twice for a single purchase.", "The customer asked whether the same jacket comes in blue."},
		{"Which server ran out of storage?", "The disk on the database host filled up with logs.", "Which server hosts the newsletter archive?"},
		{"Why is the page so slow to load?", "The website takes ten seconds to render because of large images.", "Why is the office closed on Monday?"},
	} {
		q, a, o := e.Vector(c.query), e.Vector(c.answer), e.Vector(c.other)
		if cos(q, a) <= cos(q, o) {
			t.Errorf("%q: the answer %.3f, the other %.3f", c.query, cos(q, a), cos(q, o))
		}
		hq, ha, ho := hash(c.query), hash(c.answer), hash(c.other)
		if cos(hq, ha) >= cos(hq, ho) {
			t.Errorf("%q: the hash embedder already finds the answer (%.3f against %.3f): not a paraphrase test", c.query, cos(hq, ha), cos(hq, ho))
		}
	}
}

// BenchmarkLoad: reading the npm package's word vectors (307 MB of JSON, streamed)
// into the table, with the common direction removed: what a node with --embedder glove
// pays at start.
func BenchmarkLoad(b *testing.B) {
	p := testenv.GloVe(b)
	for b.Loop() {
		if _, err := gloveembed.Load(p, gloveembed.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
