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
//
// It allocates only the vector it returns (and, for a text with non-ASCII bytes, its
// lower-cased copy): every model call embeds its query and every recorded message is
// embedded once. The buckets count words in the vector itself, which is exact for
// counts below 2^24; longer texts count in float64.
func Vector(text string, dims int) []float32 {
	if !isASCII(text) {
		text = strings.ToLower(text)
	}
	out := make([]float32, dims)
	if len(text) >= 1<<24 { // a bucket could pass float32's exact integers
		return vectorLong(text, out)
	}
	for i := 0; ; {
		h, next, ok := nextWord(text, i)
		if !ok {
			break
		}
		i = next
		if h&1 == 1 {
			out[(h>>1)%uint64(dims)]--
		} else {
			out[(h>>1)%uint64(dims)]++
		}
	}
	var norm float64
	for _, f := range out {
		norm += float64(f) * float64(f)
	}
	return normalise(out, norm)
}

// vectorLong is Vector for texts of 2^24 bytes or more: the counts in float64.
func vectorLong(text string, out []float32) []float32 {
	v := make([]float64, len(out))
	for i := 0; ; {
		h, next, ok := nextWord(text, i)
		if !ok {
			break
		}
		i = next
		sign := 1.0
		if h&1 == 1 {
			sign = -1
		}
		v[(h>>1)%uint64(len(v))] += sign
	}
	var norm float64
	for _, f := range v {
		norm += f * f
	}
	if norm == 0 {
		return normalise(out, 0)
	}
	norm = math.Sqrt(norm)
	for i, f := range v {
		out[i] = float32(f / norm)
	}
	return out
}

// normalise divides counts by the square root of norm (their sum of squares), or makes
// the fixed unit vector when there was no word.
func normalise(out []float32, norm float64) []float32 {
	if norm == 0 {
		clear(out)
		out[0] = 1
		return out
	}
	norm = math.Sqrt(norm)
	for i, f := range out {
		out[i] = float32(float64(f) / norm)
	}
	return out
}

// nextWord finds the first word of text at or after byte i and returns its FNV-1a hash
// and the index after it. A word is a run of ASCII letters and digits and non-ASCII
// bytes (a multi-byte rune's bytes, or an invalid byte, which strings.ToLower has made
// U+FFFD), ASCII letters hashed lower-cased: the words of strings.FieldsFunc over the
// lower-cased text with every other ASCII byte a separator.
func nextWord(text string, i int) (h uint64, next int, ok bool) {
	const offset, prime = 14695981039346656037, 1099511628211
	for i < len(text) && !wordByte(text[i]) {
		i++
	}
	if i == len(text) {
		return 0, i, false
	}
	h = offset
	for ; i < len(text) && wordByte(text[i]); i++ {
		b := text[i]
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		h ^= uint64(b)
		h *= prime
	}
	return h, i, true
}

// wordByte says whether b belongs to a word.
func wordByte(b byte) bool {
	return 'a' <= b && b <= 'z' || '0' <= b && b <= '9' || 'A' <= b && b <= 'Z' || b >= 0x80
}

// isASCII says whether s has only ASCII bytes.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
