// Package hashembed is Fathom's deterministic local Embedder, the embedded default: no
// model, no network. A text's vector is the feature hashing of its lower-cased words
// (letters, digits and any non-ASCII rune) into Dimensions buckets with FNV-1a and a
// sign bit, normalised to unit length. Texts that share words have positive cosine
// similarity, which is what retrieval of "the fact from message 10" needs; it knows
// nothing of synonyms.
//
// It is the same function as llm/mock's embeddings endpoint (mock.Embed): a session
// embedded locally and one embedded through `fathom mock-llm` get identical vectors.
//
//	e := hashembed.New(256)
//	vecs, _ := e.Embed(ctx, []string{"event sourcing with actors"})
package hashembed

import (
	"context"
	"hash/fnv"
	"math"
	"strings"

	"github.com/fathom-agents/fathom/memory"
)

// DefaultDimensions is the vector length of New(0).
const DefaultDimensions = 256

// Embedder is the feature-hashing embedder. It is safe for concurrent use.
type Embedder struct {
	dims int
}

var _ memory.Embedder = (*Embedder)(nil)

// New returns an embedder of dims dimensions (DefaultDimensions when dims ≤ 0).
func New(dims int) *Embedder {
	if dims <= 0 {
		dims = DefaultDimensions
	}
	return &Embedder{dims: dims}
}

// Dimensions implements memory.Embedder.
func (e *Embedder) Dimensions() int { return e.dims }

// Embed implements memory.Embedder. It fails only when ctx is done.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[i] = Vector(t, e.dims)
	}
	return out, nil
}

// Vector embeds one text into dims dimensions. An empty text (no words) gets a fixed
// unit vector (1, 0, 0, ...).
func Vector(text string, dims int) []float32 {
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
