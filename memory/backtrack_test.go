package memory

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// TestBacktrackTablesMatchMerge: in the reference encodings every token is valid alone
// (byte-pair encoding its bytes gives the token) and the split the backtracking count
// keeps for it is the last merge of that encoding (lastMerge, tiktoken's rule), each part
// ranked below the token: what the pair check assumes of every token.
func TestBacktrackTablesMatchMerge(t *testing.T) {
	for _, enc := range []string{EncodingO200K, EncodingCL100K} {
		tk, err := GetTokenizer(enc)
		if err != nil {
			t.Fatal(err)
		}
		b := tk.ranks.backtracker()
		if b == nil {
			t.Fatalf("%s: no backtracking tables", enc)
		}
		var parts []int32
		for tok, rank := range tk.ranks.m {
			if int(b.info[rank].len) != len(tok) {
				t.Fatalf("%s: token %q (%d) has length %d in the tables", enc, tok, rank, b.info[rank].len)
			}
			if len(tok) < 2 {
				continue
			}
			var x, y int32
			if parts, x, y = lastMerge(tok, tk.ranks, parts); len(parts) != 1 || b.split[rank] != [2]int32{x, y} {
				t.Fatalf("%s: token %q: split %v, merging its bytes gives parts %v, last merge %d+%d", enc, tok, b.split[rank], parts, x, y)
			}
			if x >= int32(rank) || y >= int32(rank) {
				t.Fatalf("%s: token %q (%d) is a merge of %d and %d", enc, tok, rank, x, y)
			}
		}
	}
}

// backtrackInputs returns n random pieces of the kinds the differential tests compare:
// DNA (upper and lower case), base64, runs of letters of small and large alphabets,
// digits, mixed Unicode (letters, accents, CJK, emoji, invalid UTF-8) and prose with its
// spaces and punctuation, each as one piece of 2 to maxLen bytes.
func backtrackInputs(r *rand.Rand, n, maxLen int) []string {
	words := strings.Fields(`the committee met on Tuesday to review the proposal , and after a long discussion
		about the budget it agreed that the work should begin in the spring . "We should have asked
		them sooner ," she said ; 42 of the 150 members voted against it`)
	unicode := []string{"é", "ü", "ß", "世", "界", "和", "平", "の", "テ", "🎉", "👍🏽", "a", "e", " ", "\xff", "\u0301", "Ж"}
	kinds := []func(int) string{
		func(m int) string { return pick(r, "ACGT", m) },
		func(m int) string { return pick(r, "acgt", m) },
		func(m int) string {
			blob := make([]byte, m)
			for i := range blob {
				blob[i] = byte(r.IntN(256))
			}
			return base64.StdEncoding.EncodeToString(blob)[:m]
		},
		func(m int) string { return pick(r, "ab", m) },
		func(m int) string { return pick(r, "abcdefghijklmnopqrstuvwxyz", m) },
		func(m int) string { return pick(r, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", m) },
		func(m int) string { return pick(r, "0123456789", m) },
		func(m int) string { return strings.Repeat(string(rune('a'+r.IntN(26))), m) },
		func(m int) string {
			var b strings.Builder
			for b.Len() < m {
				b.WriteString(unicode[r.IntN(len(unicode))])
			}
			return b.String()
		},
		func(m int) string {
			var b strings.Builder
			for b.Len() < m {
				b.WriteString(words[r.IntN(len(words))])
				b.WriteByte(" \n"[r.IntN(2)])
			}
			return b.String()
		},
	}
	out := make([]string, n)
	for i := range out {
		out[i] = kinds[i%len(kinds)](2 + r.IntN(maxLen-1))
	}
	return out
}

// pick returns m bytes drawn from alphabet a.
func pick(r *rand.Rand, a string, m int) string {
	b := make([]byte, m)
	for i := range b {
		b[i] = a[r.IntN(len(a))]
	}
	return string(b)
}

// TestBacktrackCountsLikeMerge: the backtracking count of a piece equals byte-pair
// encoding's merge of the whole piece (exactCount, tiktoken's order) and the merge the
// count used before it (bpeCountHeap, exact up to mergeWindow bytes; mergeShort below
// smallPiece), on a bounded number of random pieces of every kind in both reference
// encodings, from 2 bytes to a few windows long.
func TestBacktrackCountsLikeMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	short, long := backtrackInputs(r, 600, 3*smallPiece), backtrackInputs(r, 60, 3*mergeWindow)
	for _, enc := range []string{EncodingO200K, EncodingCL100K} {
		tk, err := GetTokenizer(enc)
		if err != nil {
			t.Fatal(err)
		}
		b := tk.ranks.backtracker()
		for _, p := range append(short, long...) {
			got, ok := b.countBacktrack(nil, p, tk.ranks)
			if !ok {
				t.Fatalf("%s: %q: stopped", enc, p)
			}
			if want := exactCount(p, tk.ranks); got != want {
				t.Fatalf("%s: %q: backtracking %d tokens, whole merge %d", enc, p, got, want)
			}
			var merged int
			switch {
			case len(p) <= smallPiece:
				merged = mustCount(p, tk.ranks)
			case len(p) <= mergeWindow:
				merged, _, _ = bpeCountHeap(nil, p, tk.ranks)
			default:
				continue
			}
			if got != merged {
				t.Fatalf("%s: %q: backtracking %d tokens, merge %d", enc, p, got, merged)
			}
		}
	}
}

// TestLongCountsLikeTiktoken: through Count, texts made of long pieces of every kind count
// exactly as tiktoken-go (whose quadratic merge bounds their length here).
func TestLongCountsLikeTiktoken(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	texts := backtrackInputs(r, 40, 1500)
	for _, enc := range []string{EncodingO200K, EncodingCL100K} {
		tk, err := GetTokenizer(enc)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range texts {
			if n, want := tk.Count(s), len(tk.Encode(s)); n != want {
				t.Fatalf("%s: Count(%q) = %d, tiktoken-go says %d", enc, s, n, want)
			}
		}
	}
}

// TestBacktrackBeyondRing: a walk that must drop a token it no longer keeps (a ring of two
// here) says so, and the count walks again keeping them all: the same count.
func TestBacktrackBeyondRing(t *testing.T) {
	tk, err := GetTokenizer(EncodingO200K)
	if err != nil {
		t.Fatal(err)
	}
	b := tk.ranks.backtracker()
	buf := mergeBufs.Get().(*mergeBuf)
	defer mergeBufs.Put(buf)
	buf.use(tk.ranks)
	r := rand.New(rand.NewPCG(35, 36))
	dropped := 0
	for range 20 {
		p := pick(r, "ACGT", 2000)
		n, _, all := b.backtrack(nil, p, tk.ranks, buf, make([]int32, 2), make([]uint64, len(p)/64+1))
		if !all {
			dropped++
			n, _ = b.countBacktrack(nil, p, tk.ranks)
		}
		if want := exactCount(p, tk.ranks); n != want {
			t.Fatalf("%q: %d tokens, whole merge %d", p, n, want)
		}
	}
	if dropped == 0 {
		t.Fatal("no walk had to drop a token beyond a ring of two")
	}
}

// FuzzBacktrackCountsLikeMerge: on any piece, the backtracking count equals the merge of
// the whole piece in both reference encodings. The seeds are one piece of each kind of
// backtrackInputs.
func FuzzBacktrackCountsLikeMerge(f *testing.F) {
	r := rand.New(rand.NewPCG(37, 38))
	for _, s := range backtrackInputs(r, 10, 300) {
		f.Add(s)
	}
	f.Add(strings.Repeat("x", 200))
	f.Add("ab")
	var tables []*Tokenizer
	for _, enc := range []string{EncodingO200K, EncodingCL100K} {
		tk, err := GetTokenizer(enc)
		if err != nil {
			f.Fatal(err)
		}
		tables = append(tables, tk)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if len(p) < 2 || len(p) > 1<<14 {
			return
		}
		for _, tk := range tables {
			got, _ := tk.ranks.backtracker().countBacktrack(nil, p, tk.ranks)
			if want := exactCount(p, tk.ranks); got != want {
				t.Fatalf("%s: %q (valid UTF-8: %v): backtracking %d tokens, whole merge %d", tk.name, p, utf8.ValidString(p), got, want)
			}
		}
	})
}

// TestBacktrackSmallVocabularies: on vocabularies of a few dozen tokens over the letters a
// and b (each a merge of two earlier ones, as byte-pair training makes them), where runs
// such as aaaa make a pair at a junction rank equal to a merge beside it (tiktoken then
// merges the leftmost first), the backtracking count equals the merge of the whole piece.
func TestBacktrackSmallVocabularies(t *testing.T) {
	r := rand.New(rand.NewPCG(39, 40))
	tried := 0
	for range 40 {
		ranks, merges := abVocabulary(r)
		b := ranks.backtracker()
		if b == nil {
			continue // a token built from one ranked above it under tiktoken's rule
		}
		tried++
		for range 100 {
			p := pick(r, "ab", 2+r.IntN(120))
			got, _ := b.countBacktrack(nil, p, ranks)
			if want := exactCount(p, ranks); got != want {
				t.Fatalf("vocabulary %v: %q: backtracking %d tokens, whole merge %d", merges, p, got, want)
			}
		}
	}
	if tried < 10 {
		t.Fatalf("only %d of 40 vocabularies usable", tried)
	}
}

// TestBacktrackConcurrentFirstUse: counts of long pieces started together on ranks whose
// backtracking tables are not built yet build them once and all count exactly (run it
// with -race).
func TestBacktrackConcurrentFirstUse(t *testing.T) {
	countConcurrently(t, EncodingCL100K, rand.New(rand.NewPCG(41, 42)), 4, 500, 1)
}

// countConcurrently counts n random ACGT pieces of size to 2×size bytes at once on fresh
// ranks of encoding enc, each repeats times, and checks every count against the merge of
// the whole piece.
func countConcurrently(t *testing.T, enc string, r *rand.Rand, n, size, repeats int) {
	t.Helper()
	tk, err := GetTokenizer(enc)
	if err != nil {
		t.Fatal(err)
	}
	ranks := newBPERanks(tk.ranks.m)
	pieces := make([]string, n)
	for i := range pieces {
		pieces[i] = pick(r, "ACGT", size+r.IntN(size))
	}
	got := make([]int, len(pieces))
	var wg sync.WaitGroup
	for i, p := range pieces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range repeats {
				got[i], _ = bpeCount(nil, p, ranks)
			}
		}()
	}
	wg.Wait()
	for i, p := range pieces {
		if want := exactCount(p, ranks); got[i] != want {
			t.Errorf("piece %d: %d tokens, whole merge %d", i, got[i], want)
		}
	}
}

// abVocabulary is a random vocabulary of the 256 bytes and 24 tokens over the letters a
// and b, each a merge of two earlier ones (as byte-pair training makes them) and at most
// 6 bytes long: runs such as aaaa make a pair at a junction rank equal to a merge beside
// it. merges are those 24 tokens.
func abVocabulary(r *rand.Rand) (ranks *bpeRanks, merges []string) {
	m := map[string]int{}
	for c := range 256 {
		m[string([]byte{byte(c)})] = c
	}
	toks := []string{"a", "b"}
	for rank := 256; len(m) < 256+24; rank++ {
		tok := toks[r.IntN(len(toks))] + toks[r.IntN(len(toks))]
		if _, ok := m[tok]; ok || len(tok) > 6 {
			rank--
			continue
		}
		m[tok] = rank
		toks = append(toks, tok)
	}
	return newBPERanks(m), toks[2:]
}
