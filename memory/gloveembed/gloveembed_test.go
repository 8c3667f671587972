package gloveembed_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/memory/gloveembed"
)

func cos(a, b []float32) float64 {
	s := 0.0
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// tiny is a file in wink-embeddings' form: 4 words of 3 dimensions, each array its
// values, its norm (index 3) and its rank (wordIndex 4).
const tiny = `{"precision":8,"l2NormIndex":3,"wordIndex":4,"size":4,"dimensions":3,
"words":["the","cat","dog","car"],
"vectors":{"the":[1,0,0,1,0],"cat":[0,1,0,1,1],"dog":[0,0.6,0.8,1,2],"car":[0,0,1,1,3]},
"unkVector":[0,0,0,-1]}`

func read(t *testing.T, text string, opts gloveembed.Options) *gloveembed.Embedder {
	t.Helper()
	e, err := gloveembed.Read(strings.NewReader(text), opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func near(t *testing.T, what string, got []float32, want ...float64) {
	t.Helper()
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-6 {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
}

// meanOnly are the options of the mean alone, without stop words: the tiny file's 4
// words are all among the default stop list's 50.
var meanOnly = gloveembed.Options{KeepCommon: true, StopWords: -1, MeanOnly: true}

// TestSIFWeightedMean: with MeanOnly, a text's vector is its known words' vectors
// weighed by a/(a+p(w)), p(w) = 1/(rank·H) (Zipf), summed and normalised; case and
// punctuation do not matter, unknown words are skipped, a text with no known word is
// (1, 0, 0).
func TestSIFWeightedMean(t *testing.T) {
	e := read(t, tiny, meanOnly)
	if e.Dimensions() != 3 || e.Words() != 4 {
		t.Fatalf("%d dimensions, %d words", e.Dimensions(), e.Words())
	}
	h := 1 + 1.0/2 + 1.0/3 + 1.0/4
	w := func(rank int) float64 { p := 1 / (float64(rank) * h); return 1e-3 / (1e-3 + p) }
	// "the" (rank 1) and "cat" (rank 2): (w1, w2, 0) normalised.
	x, y := w(1), w(2)
	n := math.Hypot(x, y)
	near(t, "The cat!", e.Vector("The CAT! zebra"), x/n, y/n, 0)
	near(t, "cat", e.Vector("cat"), 0, 1, 0)
	near(t, "no known word", e.Vector("zebra, okapi"), 1, 0, 0)
	near(t, "empty", e.Vector(""), 1, 0, 0)
	vecs, err := e.Embed(context.Background(), []string{"cat", "car"})
	if err != nil || len(vecs) != 2 {
		t.Fatalf("%v %d", err, len(vecs))
	}
	near(t, "Embed car", vecs[1], 0, 0, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, []string{"cat"}); err == nil {
		t.Fatal("a cancelled context was ignored")
	}
	// SIF's a: a larger one weighs the frequent word more.
	big := read(t, tiny, gloveembed.Options{KeepCommon: true, StopWords: -1, MeanOnly: true, SIFA: 1})
	if v, d := big.Vector("the cat"), e.Vector("the cat"); v[0] <= d[0] {
		t.Fatalf("a = 1 weighs \"the\" %f, a = 1e-3 %f", v[0], d[0])
	}
}

// TestMeanMaxMin: by default a text's vector is three blocks, the SIF-weighted sum,
// the maximum and the minimum of its words' weighted vectors, each normalised, scaled
// by 1/√3 to unit length in all.
func TestMeanMaxMin(t *testing.T) {
	e := read(t, tiny, gloveembed.Options{KeepCommon: true, StopWords: -1})
	if e.Dimensions() != 9 {
		t.Fatalf("%d dimensions, want 3 × 3", e.Dimensions())
	}
	h := 1 + 1.0/2 + 1.0/3 + 1.0/4
	w := func(rank int) float64 { p := 1 / (float64(rank) * h); return 1e-3 / (1e-3 + p) }
	// "cat" (rank 2, (0, 1, 0)) and "dog" (rank 3, (0, 0.6, 0.8)).
	cat, dog := w(2), w(3)
	s := 1 / math.Sqrt(3)
	sum := math.Hypot(cat+0.6*dog, 0.8*dog)
	mx := math.Hypot(max(cat, 0.6*dog), 0.8*dog)
	near(t, "cat dog", e.Vector("cat dog"),
		0, s*(cat+0.6*dog)/sum, s*0.8*dog/sum,
		0, s*max(cat, 0.6*dog)/mx, s*0.8*dog/mx,
		0, s, 0) // the minimum: (0, min(cat, 0.6·dog), 0)
	if n := math.Sqrt(cos(e.Vector("cat dog"), e.Vector("cat dog"))); math.Abs(n-1) > 1e-6 {
		t.Fatalf("norm %f", n)
	}
	near(t, "one word: three times its direction", e.Vector("car"), 0, 0, s, 0, 0, s, 0, 0, s)
	near(t, "no known word", e.Vector("zebra"), 1, 0, 0, 0, 0, 0, 0, 0, 0)
}

// TestStopWords: the StopWords most frequent words are skipped, the default being
// DefaultStopWords; a text of stop words alone is one with no known word.
func TestStopWords(t *testing.T) {
	e := read(t, tiny, gloveembed.Options{KeepCommon: true, MeanOnly: true, StopWords: 1})
	if e.Words() != 4 {
		t.Fatalf("%d words", e.Words())
	}
	near(t, "the cat", e.Vector("the cat"), 0, 1, 0)
	near(t, "the", e.Vector("the"), 1, 0, 0)
	def := read(t, tiny, gloveembed.Options{KeepCommon: true, MeanOnly: true})
	if gloveembed.DefaultStopWords < 4 {
		t.Fatalf("DefaultStopWords %d", gloveembed.DefaultStopWords)
	}
	near(t, "default: all 4 words are stop words", def.Vector("cat car"), 1, 0, 0)
	if _, err := gloveembed.Read(strings.NewReader(tiny), gloveembed.Options{StopWords: -5}); err != nil {
		t.Fatalf("negative StopWords (none): %v", err)
	}
}

// TestMaxWordsKeepsTheMostFrequent: MaxWords 2 keeps "the" and "cat"; "dog" and "car"
// become unknown.
func TestMaxWordsKeepsTheMostFrequent(t *testing.T) {
	e := read(t, tiny, gloveembed.Options{KeepCommon: true, StopWords: -1, MeanOnly: true, MaxWords: 2})
	if e.Words() != 2 {
		t.Fatalf("%d words", e.Words())
	}
	near(t, "dog", e.Vector("dog"), 1, 0, 0)
	near(t, "cat dog", e.Vector("cat dog"), 0, 1, 0)
}

// TestCommonDirectionRemoved: by default the words' mean (here (10, 0, 0), shared by
// every word) and their first principal component (the second axis) are removed, so
// two words that differ only along the third axis are opposite instead of nearly the
// same; KeepCommon keeps them as the file has them.
func TestCommonDirectionRemoved(t *testing.T) {
	const file = `{"wordIndex":4,"size":4,"dimensions":3,"vectors":{
"a":[10,2,0,0,0],"b":[10,-2,0,0,1],"c":[10,0,1,0,2],"d":[10,0,-1,0,3]}}`
	kept := read(t, file, meanOnly)
	if c := cos(kept.Vector("c"), kept.Vector("d")); c < 0.98 {
		t.Fatalf("kept: cos(c, d) = %f, want the shared mean to dominate", c)
	}
	e := read(t, file, gloveembed.Options{StopWords: -1, MeanOnly: true})
	near(t, "c", e.Vector("c"), 0, 0, 1)
	near(t, "d", e.Vector("d"), 0, 0, -1)
}

// TestReadRefusesBadFiles: what is not a vectors file is refused with its reason.
func TestReadRefusesBadFiles(t *testing.T) {
	for _, c := range []struct{ name, file, want string }{
		{"not an object", `[1,2]`, `found [ where "{" belongs`},
		{"vectors first", `{"vectors":{"a":[1,0]},"dimensions":1,"wordIndex":1,"size":1}`, "vectors before a valid dimensions"},
		{"short vector", `{"dimensions":2,"wordIndex":3,"size":1,"vectors":{"a":[1,0,1]}}`, `the vector of "a" has 3 values`},
		{"rank out of range", `{"dimensions":2,"wordIndex":3,"size":1,"vectors":{"a":[1,0,1,5]}}`, `the rank of "a" is 5`},
		{"truncated", tiny[:len(tiny)/2], "unexpected EOF"},
		{"no vectors", `{"dimensions":2}`, "no word vectors"},
	} {
		_, err := gloveembed.Read(strings.NewReader(c.file), gloveembed.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := gloveembed.Read(strings.NewReader(tiny), gloveembed.Options{MaxWords: -1}); err == nil {
		t.Error("negative MaxWords accepted")
	}
	if _, err := gloveembed.Load("/nonexistent/vectors.json", gloveembed.Options{}); err == nil || !strings.Contains(err.Error(), "open word vectors") {
		t.Errorf("missing file: %v", err)
	}
}
