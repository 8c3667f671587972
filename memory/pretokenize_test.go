package memory

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dlclark/regexp2"
	"github.com/pkoukk/tiktoken-go"
)

var splitters = []struct {
	encoding string
	pattern  *regexp2.Regexp
	split    func(asciiText, func(string))
}{
	{EncodingO200K, regexp2.MustCompile(o200kPattern, regexp2.None), splitO200K},
	{EncodingCL100K, regexp2.MustCompile(cl100kPattern, regexp2.None), splitCL100K},
}

func regexPieces(re *regexp2.Regexp, s string) []string {
	var out []string
	m, _ := re.FindStringMatch(s)
	for m != nil {
		out = append(out, m.String())
		m, _ = re.FindNextMatch(m)
	}
	return out
}

func scannerPieces(split func(asciiText, func(string)), s string) []string {
	var out []string
	split(asciiText(s), func(p string) { out = append(out, p) })
	return out
}

// checkASCII compares the scanner with the regex and the fast count with tiktoken-go's
// on s.
func checkASCII(t *testing.T, s string) {
	t.Helper()
	for _, sp := range splitters {
		want, got := regexPieces(sp.pattern, s), scannerPieces(sp.split, s)
		if strings.Join(want, "\x00") != strings.Join(got, "\x00") {
			t.Fatalf("%s: pieces of %q:\n regex   %q\n scanner %q", sp.encoding, s, want, got)
		}
		tk, err := GetTokenizer(sp.encoding)
		if err != nil {
			t.Fatal(err)
		}
		if tk.split == nil {
			t.Fatalf("%s: the fast path is off (ranks not captured)", sp.encoding)
		}
		if n, ref := tk.Count(s), len(tk.Encode(s)); n != ref {
			t.Fatalf("%s: Count(%q) = %d, tiktoken-go says %d", sp.encoding, s, n, ref)
		}
	}
}

// asciiAlphabet weights the characters where the patterns' alternatives meet.
const asciiAlphabet = "aAbBzZeEsStTrRvVmMlLdD0123456789'''   \t\n\r\v\f!?.,;:/-_\"()[]{}<>@#$%^&*+=|\\~`\x00\x01\x1f\x7f"

func TestASCIISplitMatchesRegex(t *testing.T) {
	for _, s := range []string{
		"hello world", "tiktoken is great!", "Hello, World! I'm here; you're there, they've gone, we'll see, he'd go.",
		"HTTPServer ABCdef aBC Ab's IT'S DON'T", "  leading", "trailing  ", "a  b", "a \n b", "x\r\n\r\ny", "\n\n", " ",
		"1234567 12 1", "!!abc", " !x", "\t!", "'sa", "'abc", "a'S", "foo/bar\n/baz", "  1", "x \t\ny", "a\v\fb",
		"def f(x):\n    return x**2  # square\n", `{"key": [1, 2, 3], "ok": true}`, "",
	} {
		checkASCII(t, s)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = asciiAlphabet[r.IntN(len(asciiAlphabet))]
		}
		checkASCII(t, string(b))
	}
}

// FuzzASCIICountMatchesTiktoken: for any ASCII text the scanner yields the regex's
// pieces and the count tiktoken-go's.
func FuzzASCIICountMatchesTiktoken(f *testing.F) {
	for _, s := range []string{"hello world", "I'm  here\n\n  ok", "ABCdef's 123456 !?/\n", "\t \v\f\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !isASCII(s) {
			return
		}
		checkASCII(t, s)
	})
}

// TestMixedTextCountsLikeTiktoken: text mixing ASCII lines with lines holding other
// characters (counted in chunks, each by the scanner or by tiktoken-go) counts exactly as
// tiktoken-go counts the whole text.
func TestMixedTextCountsLikeTiktoken(t *testing.T) {
	pieces := []string{"héllo", "wörld", "日本語", "🎉", "\u00a0", "\u2028", "\u0085", "naïve", "—", "“q”",
		"abc", "ABC", "don't", "123456", " ", "  ", "\t", "\n", "\r\n", "\n\n", "/", "\n/", "!", "?!", "'s", ".", "\v"}
	r := rand.New(rand.NewPCG(3, 4))
	for _, enc := range []string{EncodingO200K, EncodingCL100K} {
		tk, err := GetTokenizer(enc)
		if err != nil {
			t.Fatal(err)
		}
		for range 3000 {
			var b strings.Builder
			for j := r.IntN(30); j > 0; j-- {
				b.WriteString(pieces[r.IntN(len(pieces))])
			}
			s := b.String()
			if n, want := tk.Count(s), len(tk.Encode(s)); n != want {
				t.Fatalf("%s: Count(%q) = %d, tiktoken-go says %d", enc, s, n, want)
			}
		}
	}
}

// TestNonASCIIGoesThroughTiktoken: text with any byte ≥ 0x80 (split by the regexp
// pre-tokeniser) counts as tiktoken-go counts it.
func TestNonASCIIGoesThroughTiktoken(t *testing.T) {
	tk, err := GetTokenizer(EncodingO200K)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := tiktoken.GetEncoding(EncodingO200K)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"héllo wörld", "日本語のテキスト", "emoji 🎉 party", "naïve café"} {
		if n, want := tk.Count(s), len(ref.EncodeOrdinary(s)); n != want {
			t.Fatalf("Count(%q) = %d, want %d", s, n, want)
		}
	}
}

// scanPieces is splitO200K without its blocks: piece by piece (endO200K) only.
func scanPieces(s string) []string {
	var out []string
	a := asciiText(s)
	for i := 0; i < len(a); {
		end := a.endO200K(i)
		out = append(out, s[i:end])
		i = end
	}
	return out
}

// blockInputs returns random ASCII texts of the kinds o200kBlock splits: base64, DNA,
// hex, and text of every class where o200k_base's alternatives meet (capitals after
// lowercase letters, digit runs longer than three, punctuation runs before letters, one
// punctuation byte before letters, apostrophes, white space, newlines), with runs longer
// than a block and ends inside one.
func blockInputs(r *rand.Rand, n int) []string {
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	const classes = "aAbBzZsStTlLdDvVeE0123456789" + "+/=-_.,!?#(){}[]\x00\x7f" + "''' \t\n\r\v\f"
	pick := func(a string, m int) string {
		b := make([]byte, m)
		for i := range b {
			b[i] = a[r.IntN(len(a))]
		}
		return string(b)
	}
	var out []string
	for range n {
		m := r.IntN(300)
		switch r.IntN(6) {
		case 0:
			out = append(out, pick(b64, m)+strings.Repeat("=", r.IntN(3)))
		case 1:
			out = append(out, pick("ACGT", m), pick("acgtACGT", m))
		case 2:
			out = append(out, pick("0123456789abcdef", m), pick("0123456789ABCDEF-", m))
		case 3:
			out = append(out, pick(classes, m))
		case 4: // runs: each of one class, of random length
			var b strings.Builder
			for b.Len() < m {
				b.WriteString(strings.Repeat(pick(classes, 1), 1+r.IntN(r.IntN(80)+1)))
			}
			out = append(out, b.String())
		default: // base64 lines broken by white space and words
			var b strings.Builder
			for b.Len() < m {
				b.WriteString(pick(b64, r.IntN(100)))
				b.WriteString([]string{" ", "\n", "'s ", "\r\n", "\"", " don't ", "  "}[r.IntN(7)])
			}
			out = append(out, b.String())
		}
	}
	return out
}

// TestO200KBlocksSplitLikeScanner: the pieces o200kBlock finds a block at a time are
// those of the scanner piece by piece and of the regex, and the counts of text split in
// blocks are tiktoken-go's.
func TestO200KBlocksSplitLikeScanner(t *testing.T) {
	tk, err := GetTokenizer(EncodingO200K)
	if err != nil {
		t.Fatal(err)
	}
	re := splitters[0].pattern
	r := rand.New(rand.NewPCG(31, 32))
	for k, s := range blockInputs(r, 6000) {
		want, got := scanPieces(s), scannerPieces(splitO200K, s)
		if strings.Join(want, "\x00") != strings.Join(got, "\x00") {
			t.Fatalf("pieces of %q:\n scanner %q\n blocks  %q", s, want, got)
		}
		if k%4 != 0 {
			continue
		}
		if re := regexPieces(re, s); strings.Join(re, "\x00") != strings.Join(got, "\x00") {
			t.Fatalf("pieces of %q:\n regex  %q\n blocks %q", s, re, got)
		}
		if n, ref := tk.Count(s), len(tk.Encode(s)); n != ref {
			t.Fatalf("Count(%q) = %d, tiktoken-go says %d", s, n, ref)
		}
	}
}
