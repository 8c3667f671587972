package persistence

import (
	"cmp"
	"encoding/json"
	"maps"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// tokenizeReference is Tokenize as it was first written (FieldsFunc, a []rune per piece,
// a string per camel word): the single-pass Tokenize must give exactly its terms.
func tokenizeReference(text string) []string {
	var out []string
	i := 0
	for i < len(text) {
		r, n := utf8.DecodeRuneInString(text[i:])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			i += n
			continue
		}
		j := i
		for j < len(text) {
			r, n := utf8.DecodeRuneInString(text[j:])
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !isJoiner(r) {
				break
			}
			j += n
		}
		run := strings.TrimRightFunc(text[i:j], isJoiner)
		i = j
		parts := strings.FieldsFunc(run, isJoiner)
		compound := len(parts) > 1
		if compound {
			if t := strings.ToLower(run); len(t) <= MaxTermLen {
				out = append(out, t)
			}
		}
		for _, p := range parts {
			var words []string
			start := 0
			rs := []rune(p)
			for i := 1; i < len(rs); i++ {
				lowerToUpper := unicode.IsLower(rs[i-1]) && unicode.IsUpper(rs[i])
				acronymEnd := i+1 < len(rs) && unicode.IsUpper(rs[i-1]) && unicode.IsUpper(rs[i]) && unicode.IsLower(rs[i+1])
				if lowerToUpper || acronymEnd {
					words = append(words, string(rs[start:i]))
					start = i
				}
			}
			words = append(words, string(rs[start:]))
			if len(words) > 1 || compound {
				if t := strings.ToLower(p); len(t) <= MaxTermLen {
					out = append(out, t)
				}
				if len(words) > 1 {
					for _, w := range words {
						out = appendWord(out, strings.ToLower(w))
					}
				}
				continue
			}
			out = appendWord(out, strings.ToLower(p))
		}
	}
	return out
}

// tokenizeCorpus is hard text for a tokenizer: identifiers of every shape, camel and
// acronym names, non-ASCII letters and digits, joiners in a row and at the edges,
// invalid UTF-8, long runs.
var tokenizeCorpus = []string{
	"",
	"handleRetry failed for ORD-2024-0042 in internal/node/memory.go while running the steps",
	"HTTPServer XMLHttpRequest getHTTPResponseCode parseJSON2Struct iOS macOSVersion ABC",
	"E_CONN_RESET at Store.Search: retry #3 of 5 (a::b --c-- __init__ ./x/ #tag: 12:30)",
	"Ünïcödé WörterBuch ÄrgerNis straße İstanbul ΣίσυφοςΠέτρα 日本語テキスト ٣٤٥ x²",
	"invalid \xff\xfe bytes \xc3 in\xe2\x82 words caf\xc3\xa9 done",
	"a-b_c.d/e:f#g a--b a..b a/:b -lead trail- #x y#",
	strings.Repeat("base64QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo", 4) + " short " + strings.Repeat("x", 70) + "-y",
	"The customers' orders were shipped; boxes, classes and passes. Running, tested, fixes.",
	"\u00a0nbsp\u2009thin\tTAB\nNEW\r\nline\u200bzero",
}

func evalTexts(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("vectortest/testdata/retrieval-eval.json")
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// TestTokenizeSameTerms: Tokenize gives exactly the terms of its first implementation
// on hard text and on every text of the retrieval evaluation set.
func TestTokenizeSameTerms(t *testing.T) {
	for _, text := range append(slices.Clone(tokenizeCorpus), evalTexts(t)...) {
		if got, want := Tokenize(text), tokenizeReference(text); !slices.Equal(got, want) {
			t.Errorf("Tokenize(%q)\n got %q\nwant %q", text, got, want)
		}
	}
}

// FuzzTokenize: Tokenize and its first implementation agree on any text.
func FuzzTokenize(f *testing.F) {
	for _, s := range tokenizeCorpus {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if got, want := Tokenize(text), tokenizeReference(text); !slices.Equal(got, want) {
			t.Fatalf("Tokenize(%q)\n got %q\nwant %q", text, got, want)
		}
	})
}

// TestTokenizeAllocations: tokenizing an ASCII message allocates its result and, when
// it has capitals, one lower-cased copy of it: nothing per piece, word or camel word.
func TestTokenizeAllocations(t *testing.T) {
	const text = "handleRetry failed for ord-2024-0042 in internal/node/memory.go while running the steps of the plan"
	// The result (twice: this identifier-dense text has more than a term per 8 bytes),
	// then the lower-cased text ("handleRetry" has a capital).
	const want = 3
	if got := testing.AllocsPerRun(100, func() { _ = Tokenize(text) }); got > want {
		t.Errorf("Tokenize allocates %v times per call, want at most %d", got, want)
	}
}

func BenchmarkTokenize(b *testing.B) {
	texts := tokenizeCorpus
	var n int
	for _, t := range texts {
		n += len(t)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		for _, t := range texts {
			_ = Tokenize(t)
		}
	}
}

// fuseReference is Fuse as it was first written (a map of scores and one of metas).
func fuseReference(k, rrfK int, weights []float64, rankings ...[]VectorHit) []VectorHit {
	if rrfK <= 0 {
		rrfK = DefaultRRFK
	}
	scores := map[uint64]float64{}
	meta := map[uint64]map[string]string{}
	for i, hits := range rankings {
		w := 1.0
		if i < len(weights) {
			w = weights[i]
		}
		for r, h := range hits {
			scores[h.Seq] += w / float64(rrfK+r+1)
			if _, ok := meta[h.Seq]; !ok {
				meta[h.Seq] = h.Meta
			}
		}
	}
	out := make([]VectorHit, 0, len(scores))
	for seq, sc := range scores {
		if sc > 0 {
			out = append(out, VectorHit{Seq: seq, Score: float32(sc), Meta: meta[seq]})
		}
	}
	slices.SortFunc(out, func(a, b VectorHit) int {
		if a.Score != b.Score {
			return cmp.Compare(b.Score, a.Score)
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	if len(out) > k {
		out = out[:k]
	}
	return out
}

// TestFuseSameRanking: Fuse ranks exactly as its first implementation, with the same
// scores and metas, for short rankings (merged by a scan) and long ones (by a map),
// overlapping or not, weighted, with a zero weight.
func TestFuseSameRanking(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	ranking := func(n, seqs int) []VectorHit {
		var hs []VectorHit
		seen := map[uint64]bool{}
		for len(hs) < n {
			seq := uint64(r.Intn(seqs))
			if !seen[seq] {
				seen[seq] = true
				hs = append(hs, VectorHit{Seq: seq, Meta: map[string]string{"from": strconv.Itoa(len(hs))}})
			}
		}
		return hs
	}
	for i := range 300 {
		n := []int{0, 1, 5, 20, 40, 100, 300}[i%7]
		seqs := n + r.Intn(2*n+1)
		weights := [][]float64{{1, 1}, {1, 2}, {0, 1}, {0.3}}[i%4]
		a, b := ranking(n, seqs), ranking(r.Intn(n+1), seqs)
		k := 1 + r.Intn(n+5)
		got, want := Fuse(k, i%3*5, weights, a, b), fuseReference(k, i%3*5, weights, a, b)
		if !slices.EqualFunc(got, want, func(x, y VectorHit) bool {
			return x.Seq == y.Seq && x.Score == y.Score && maps.Equal(x.Meta, y.Meta)
		}) {
			t.Fatalf("case %d: Fuse = %v, want %v", i, got, want)
		}
	}
}
