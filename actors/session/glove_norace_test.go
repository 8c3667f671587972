//go:build !race

// Reading the GloVe word vectors' 307 MB of JSON at node start takes minutes under the
// race detector, so this file is excluded from -race runs; `make test` runs it in its
// second pass without -race.

package session_test

import (
	"fmt"
	"testing"

	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestGloVeRetrievalFindsParaphrase runs a long session through the grain against
// mock-llm, as TestHybridRetrievalFindsEarlyIdentifier does, on a node with the GloVe
// embedder (--embedder glove: memory/gloveembed, the npm package's word vectors;
// skipped when npm is unreachable) and then with the hash embedder, both with the
// default hybrid retrieval. One early probe says a shopper's card was billed twice for
// one purchase; the other 149 are about customers' deliveries, returns and questions.
// The later step asks "Did a customer pay double for the same order?", which shares
// only "a" and "for" with the fact: the GloVe embedder's vector ranking brings the fact into the
// call's semantic slice, the hash embedder's (which knows words, not meanings) does
// not, and text search cannot.
func TestGloVeRetrievalFindsParaphrase(t *testing.T) {
	for _, tc := range []struct {
		name      string
		memory    func(t *testing.T) node.MemoryConfig
		wantFound bool
	}{
		{"glove", func(t *testing.T) node.MemoryConfig {
			return node.MemoryConfig{Embedder: node.EmbedderGloVe, EmbeddingVectors: testenv.GloVe(t)}
		}, true},
		{"hash", func(*testing.T) node.MemoryConfig { return node.MemoryConfig{} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fillers := []string{
				"probe %d: customer %d changed the delivery address to their office",
				"probe %d: customer %d asked about the return policy for shoes",
				"probe %d: customer %d subscribed to the newsletter",
				"probe %d: customer %d wants the parcel left with a neighbour",
				"probe %d: customer %d reported that the website was slow on Monday",
				"probe %d: customer %d asked whether the jacket comes in blue",
			}
			found := runProbeSession(t, probeSession{
				fact:     "probe 3: the shopper's card was billed twice for a single purchase, a duplicate payment of 49 euros",
				filler:   func(n int) string { return fmt.Sprintf(fillers[n%len(fillers)], n, 300+n) },
				question: "Did a customer pay double for the same order?",
				mentions: []string{"billed twice"},
				memory:   tc.memory(t),
			})
			if found != tc.wantFound {
				t.Fatalf("embedder %s: the early fact (billed twice) in the paraphrased question's semantic slice: %v, want %v", tc.name, found, tc.wantFound)
			}
		})
	}
}
