package persistence

import (
	"encoding/json"
	"os"
	"slices"
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
						out = appendWord(out, w)
					}
				}
				continue
			}
			out = appendWord(out, p)
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

// TestTokenizeAllocations: tokenizing a message allocates its result and the
// lower-cased copies of the words that have capitals, nothing per piece or camel word.
func TestTokenizeAllocations(t *testing.T) {
	const text = "handleRetry failed for ord-2024-0042 in internal/node/memory.go while running the steps of the plan"
	// The result (twice: this identifier-dense text has more than a term per 8 bytes),
	// then "handleretry" and "retry" (the words with a capital).
	const want = 4
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
