package gloveembed_test

import (
	"testing"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/memory/gloveembed"
)

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
