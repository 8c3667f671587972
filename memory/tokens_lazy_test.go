package memory

import (
	"slices"
	"testing"
)

// TestCountingBuildsNoTiktokenEncoder: a tokenizer counts with Fathom's own ranks
// without building tiktoken-go's encoder (about 13 MB of maps a node kept for nothing);
// Encode builds it on first use, over the same ranks, and its ids count as Count does.
func TestCountingBuildsNoTiktokenEncoder(t *testing.T) {
	for _, enc := range []string{EncodingO200K, EncodingCL100K} {
		tok, err := newTokenizer(enc)
		if err != nil {
			t.Fatal(err)
		}
		const text = "The shopper's card was billed twice for order ORD-2024-00042, 3 days ago."
		n := tok.Count(text)
		if tok.tk != nil || tok.ranks == nil {
			t.Fatalf("%s: counting built tiktoken-go's encoder (tk %v, own ranks %v)", enc, tok.tk != nil, tok.ranks != nil)
		}
		ids := tok.Encode(text)
		if tok.tk == nil || len(ids) != n || n == 0 {
			t.Fatalf("%s: Encode gave %d ids (encoder built: %v), Count %d", enc, len(ids), tok.tk != nil, n)
		}
		shared, err := GetTokenizer(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(shared.Encode(text), ids) {
			t.Fatalf("%s: two tokenizers encode differently", enc)
		}
		if loader.ranksOf(enc) == nil {
			t.Fatalf("%s: ranks not kept by the loader", enc)
		}
	}
}

// ranksOf returns the ranks the loader holds for encoding, nil if not loaded.
func (l *ranksLoader) ranksOf(encoding string) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.loaded[rankFiles[encoding]]
}
