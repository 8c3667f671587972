package memory

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm"
)

// pathological returns texts that byte-pair encoding finds hard, a few thousand bytes
// each: single pieces of the pre-tokenisers thousands of bytes long (runs of one letter,
// DNA, é, CJK), and many short pieces with few merges (base64).
func pathological() map[string]string {
	r := rand.New(rand.NewPCG(5, 6))
	acgt := make([]byte, 3000)
	for i := range acgt {
		acgt[i] = "ACGT"[r.IntN(4)]
	}
	blob := make([]byte, 2200)
	for i := range blob {
		blob[i] = byte(r.IntN(256))
	}
	cjk := []rune("世界和平日本語のテキスト中文字符")
	var han strings.Builder
	for range 1500 {
		han.WriteRune(cjk[r.IntN(len(cjk))])
	}
	return map[string]string{
		"letter":        strings.Repeat("x", 3000),
		"letter-upper":  strings.Repeat("A", 3000),
		"acgt":          string(acgt),
		"acgt-lower":    strings.ToLower(string(acgt)),
		"base64":        base64.StdEncoding.EncodeToString(blob),
		"e-acute":       strings.Repeat("é", 2000),
		"cjk":           han.String(),
		"emoji":         strings.Repeat("🎉", 500),
		"mixed-letters": strings.Repeat("aé", 1000),
		"digits":        strings.Repeat("7", 3000),
		"spaces":        strings.Repeat(" ", 3000) + "x",
		"punctuation":   strings.Repeat("!", 3000),
		"invalid-utf8":  strings.Repeat("a\xff", 1000),
	}
}

// TestPathologicalCountsLikeTiktoken: on text without pre-token splits, where the
// count's merge is not tiktoken-go's quadratic one, every encoding counts exactly as
// tiktoken-go.
func TestPathologicalCountsLikeTiktoken(t *testing.T) {
	for _, enc := range []string{EncodingO200K, EncodingCL100K, EncodingP50K, EncodingR50K} {
		tk, err := GetTokenizer(enc)
		if err != nil {
			t.Fatal(err)
		}
		if tk.ranks == nil {
			t.Fatalf("%s: the ranks were not captured", enc)
		}
		for name, s := range pathological() {
			if n, want := tk.Count(s), len(tk.Encode(s)); n != want {
				t.Errorf("%s: Count(%s) = %d, tiktoken-go says %d", enc, name, n, want)
			}
		}
		for n := 2; n <= 2*smallPiece+2; n++ { // runs either side of the heap's threshold
			s := strings.Repeat("z", n)
			if got, want := tk.Count(s), len(tk.Encode(s)); got != want {
				t.Errorf("%s: Count of %d z's = %d, tiktoken-go says %d", enc, n, got, want)
			}
		}
	}
}

// TestHeapMergesLikeRescanning: the heap merge and the rescanning loop give the same count
// on random pieces of small alphabets, short (both paths) and long (against tiktoken-go).
func TestHeapMergesLikeRescanning(t *testing.T) {
	tk, err := GetTokenizer(EncodingO200K)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	alphabets := []string{"ab", "ACGT", "aeiou", "xyz01", "abcdefghijklmnopqrstuvwxyz"}
	for range 2000 {
		a := alphabets[r.IntN(len(alphabets))]
		b := make([]byte, 2+r.IntN(smallPiece-1))
		for i := range b {
			b[i] = a[r.IntN(len(a))]
		}
		if h, _, _ := bpeCountHeap(nil, string(b), tk.ranks); h != mustCount(string(b), tk.ranks) {
			t.Fatalf("%q: heap %d, rescanning %d", b, h, mustCount(string(b), tk.ranks))
		}
	}
	single := []string{"ab", "ACGT", "aeiou", "abcdefghijklmnopqrstuvwxyz"} // one pre-token each
	for range 100 {
		a := single[r.IntN(len(single))]
		b := make([]byte, smallPiece+1+r.IntN(600))
		for i := range b {
			b[i] = a[r.IntN(len(a))]
		}
		h, _, _ := bpeCountHeap(nil, string(b), tk.ranks)
		if want := len(tk.Encode(string(b))); h != want {
			t.Fatalf("%q: heap %d, tiktoken-go %d", b, h, want)
		}
	}
}

// TestMergeWorkIsLinear: the long merge's rank lookups, merges and tree updates grow linearly
// with a piece's length (each window costs O(mergeWindow log mergeWindow)): doubling a
// run of one letter or a DNA sequence at most doubles them, where the rescanning merge's
// work quadruples, and no byte costs more than 8 (a byte is merged in up to two windows,
// each merge costs one or two lookups and one merge, or three tree updates where the
// window falls back to the tree). Not timed.
func TestMergeWorkIsLinear(t *testing.T) {
	tk, err := GetTokenizer(EncodingO200K)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 10))
	dna := make([]byte, 1<<18)
	for i := range dna {
		dna[i] = "ACGT"[r.IntN(4)]
	}
	for name, s := range map[string]string{"letter": strings.Repeat("x", 1<<18), "acgt": string(dna)} {
		var prev int
		for n := 1 << 14; n <= 1<<18; n *= 2 {
			_, work, _ := bpeCountHeap(nil, s[:n], tk.ranks)
			if work > 8*n {
				t.Errorf("%s of %d bytes: %d lookups and updates, more than 8 per byte", name, n, work)
			}
			// A run of one letter repeats its windows, which are counted once each (the
			// window cache): its work may jump between sizes, bounded per byte above; DNA's
			// windows never repeat, so its work doubles with the input at most.
			if name == "acgt" && prev > 0 && float64(work) > 2.1*float64(prev) {
				t.Errorf("%s: %d bytes took %d lookups and updates, half as many %d", name, n, work, prev)
			}
			prev = work
		}
	}
	// The count of a megabyte-long run: o200k_base has a token of 8 x's.
	if n := tk.Count(strings.Repeat("x", 1<<20)); n != 1<<17 {
		t.Errorf("Count of 1 MiB of x = %d, want %d", n, 1<<17)
	}
}

// TestLongPieceCountsLikeWholeMerge: a piece longer than mergeWindow, merged in
// windows, counts exactly as the merge of the whole piece in one go (exactCount,
// tiktoken's order) on the benchmark's texts of 1 MiB: a run of one letter, random DNA
// (upper and lower case), and random bytes' base64 (whose pieces are short). The windows
// may in principle differ from the whole merge (bpeCountHeap); here they must not (with a
// cut margin of 2 bytes instead of mergeMargin, DNA counts 9 to 14 tokens high). The
// counts are logged (go test -v).
func TestLongPieceCountsLikeWholeMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	dna := make([]byte, 1<<20)
	for i := range dna {
		dna[i] = "ACGT"[r.IntN(4)]
	}
	blob := make([]byte, 3<<18)
	for i := range blob {
		blob[i] = byte(r.IntN(256))
	}
	for _, enc := range []string{EncodingO200K, EncodingCL100K} {
		tk, err := GetTokenizer(enc)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ name, text string }{
			{"letter", strings.Repeat("x", 1<<20)},
			{"acgt", string(dna)},
			{"acgt-lower", strings.ToLower(string(dna))},
			{"base64", base64.StdEncoding.EncodeToString(blob)},
		} {
			got, want := tk.Count(c.text), 0
			if c.name == "base64" {
				want = len(tk.Encode(c.text))
			} else {
				want = exactCount(c.text, tk.ranks)
			}
			t.Logf("%s %s: %d tokens, whole merge %d", enc, c.name, got, want)
			if got != want {
				t.Errorf("%s %s: %d tokens, the exact merge gives %d", enc, c.name, got, want)
			}
		}
	}
}

// TestLongPiecesUpToWindowExact: pieces of every length up to mergeWindow (one window) and
// just past it count exactly as the merge of the whole piece, on random small alphabets.
func TestLongPiecesUpToWindowExact(t *testing.T) {
	tk, err := GetTokenizer(EncodingO200K)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(13, 14))
	for _, a := range []string{"ab", "ACGT", "acgt", "aeiou", "abcdefghijklmnopqrstuvwxyz", "0123456789abcdef"} {
		for range 40 {
			b := make([]byte, smallPiece+1+r.IntN(2*mergeWindow))
			for i := range b {
				b[i] = a[r.IntN(len(a))]
			}
			got, _, _ := bpeCountHeap(nil, string(b), tk.ranks)
			if want := exactCount(string(b), tk.ranks); got != want && len(b) <= mergeWindow {
				t.Fatalf("%d bytes of %q: %d tokens, the exact merge gives %d", len(b), a, got, want)
			}
		}
	}
}

// mustCount is bpeCount without a done channel.
func mustCount(piece string, ranks *bpeRanks) int {
	n, _ := bpeCount(nil, piece, ranks)
	return n
}

// TestCountStopsWhenCancelled: a count for a cancelled caller stops at once, however long
// the piece, and a counter bound to a cancelled context falls back to the byte count, an
// upper bound, without tokenising.
func TestCountStopsWhenCancelled(t *testing.T) {
	tk, err := GetTokenizer(EncodingO200K)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := tk.Stats()
	for _, s := range []string{strings.Repeat("x", 1<<22), strings.Repeat("é", 1<<21), strings.Repeat("word ", 1<<20)} {
		if n, err := tk.CountContext(ctx, s); !errors.Is(err, context.Canceled) {
			t.Fatalf("CountContext on a cancelled context: %d, %v", n, err)
		}
	}
	if s := tk.Stats(); s.Stopped < before.Stopped+3 || s.Busy != 0 {
		t.Fatalf("stats after 3 stopped counts: %+v (before: %+v)", s, before)
	}
	// A merge under way stops at its next check: before its next window.
	done := make(chan struct{})
	close(done)
	if _, work, ok := bpeCountHeap(done, strings.Repeat("x", 1<<22), tk.ranks); ok || work > 4*mergeWindow {
		t.Fatalf("stopped merge: ok %v after %d lookups and pushes", ok, work)
	}
	m := llm.Message{Role: "tool", Content: strings.Repeat("x", 1<<22)}
	if n := WithContext(ctx, tk).CountMessage(m); n != (ByteCounter{}).CountMessage(m) {
		t.Fatalf("cancelled counter: %d, want the byte count", n)
	}
	m.Content = strings.Repeat("x", 5000)
	if n, want := WithContext(context.Background(), tk).CountMessage(m), tk.CountMessage(m); n != want {
		t.Fatalf("live counter: %d, want %d", n, want)
	}
	if n, err := tk.CountMessageContext(context.Background(), m); err != nil || n != tk.CountMessage(m) {
		t.Fatalf("CountMessageContext: %d, %v; CountMessage %d", n, err, tk.CountMessage(m))
	}
}

// TestCorpusCountsLikeTiktoken: prose, Go code and JSON (with long strings: a hex digest
// run, a base64 field, a minified object, a long URL) count exactly as tiktoken-go counts
// them, in every encoding.
func TestCorpusCountsLikeTiktoken(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	hex := make([]byte, 1500)
	for i := range hex {
		hex[i] = "0123456789abcdef"[r.IntN(16)]
	}
	blob := make([]byte, 900)
	for i := range blob {
		blob[i] = byte(r.IntN(256))
	}
	var obj strings.Builder
	obj.WriteString(`{"items":[`)
	for i := range 60 {
		fmt.Fprintf(&obj, `{"id":%d,"name":"item-%d","ok":true,"tags":["a","b"]},`, i, i*7)
	}
	obj.WriteString(`{}]}`)
	texts := []string{
		"The committee met on Tuesday to review the proposal, and after a long discussion it agreed\n" +
			"that the work should begin in the spring. \"We should have asked them sooner,\" she said.\n\n",
		"func (s *Store) Append(ctx context.Context, events ...Event) error {\n\tfor i, e := range events {\n" +
			"\t\tif err := s.put(ctx, e); err != nil {\n\t\t\treturn fmt.Errorf(\"append %d: %w\", i, err)\n\t\t}\n\t}\n\treturn nil\n}\n",
		`{"sha":"` + string(hex) + `","data":"` + base64.StdEncoding.EncodeToString(blob) + `"}`,
		obj.String(),
		"see https://example.org/" + strings.Repeat("path/segment-", 80) + "end?q=1&r=2",
		strings.Repeat("=", 700) + "\n" + strings.Repeat("-", 2000) + "\n",
		"{\n  \"nested\": {\n    \"list\": [1, 2, 3],\n    \"text\": \"naïve café — “quoted” 世界\"\n  }\n}\n",
	}
	for _, enc := range []string{EncodingO200K, EncodingCL100K, EncodingP50K, EncodingR50K} {
		tk, err := GetTokenizer(enc)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range texts {
			if n, want := tk.Count(s), len(tk.Encode(s)); n != want {
				t.Errorf("%s: Count of text %d = %d, tiktoken-go says %d", enc, i, n, want)
			}
		}
	}
}

// TestLevelMergeFallsBackOnRankInversion: with ranks where a merge creates a pair ranked
// below it (the encodings nearly never do), the rank-by-rank merge gives up and the window
// is merged by the tree: counts stay exact.
func TestLevelMergeFallsBackOnRankInversion(t *testing.T) {
	m := map[string]int{}
	for c := range 256 {
		m[string(rune(c))] = 1000 + c
	}
	for c := 128; c < 256; c++ { // the bytes ≥ 0x80 themselves, not their UTF-8
		delete(m, string(rune(c)))
		m[string([]byte{byte(c)})] = 1000 + c
	}
	m["ab"], m["abc"], m["bc"], m["ca"], m["cab"], m["aa"], m["aab"] = 500, 400, 600, 450, 700, 550, 300
	ranks := newBPERanks(m)
	if !ranks.ids {
		t.Fatal("test ranks not usable by the long merge")
	}
	b := mergeBufs.Get().(*mergeBuf)
	defer mergeBufs.Put(b)
	b.use(ranks)
	var work int
	if _, ok := b.mergeLevels("xabcx", ranks, &work); ok {
		t.Fatal("the rank-by-rank merge did not detect the inversion of ab (500) and abc (400)")
	}
	r := rand.New(rand.NewPCG(21, 22))
	for _, size := range []int{smallPiece + 1, 300, mergeWindow, 3 * mergeWindow} {
		for range 20 {
			p := make([]byte, size)
			for i := range p {
				p[i] = "abcx"[r.IntN(4)]
			}
			got, _, _ := bpeCountHeap(nil, string(p), ranks)
			if want := exactCount(string(p), ranks); got != want && size <= mergeWindow {
				t.Fatalf("%d bytes: %d tokens, the exact merge gives %d", size, got, want)
			}
		}
	}
}

// TestShortPiecesCountLikeTiktoken: pieces of 3 to 64 bytes, each one piece of the
// pre-tokenisers (lowercase runs, capitals then lowercase, runs of punctuation), count as
// tiktoken-go counts them in every encoding: the in-place merges of short pieces
// (mergeShort8, mergeShort) and the three-byte prefix bitmap in front of the rank tables,
// against an implementation that shares neither.
func TestShortPiecesCountLikeTiktoken(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const lower, upper, punct = "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "!#$%&()*+,-.:;<=>?@[]^_{|}~"
	pick := func(a string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = a[r.IntN(len(a))]
		}
		return string(b)
	}
	var pieces []string
	for range 1500 {
		n := 3 + r.IntN(62)
		if r.IntN(2) == 0 {
			n = 3 + r.IntN(6) // most pieces of text without words are short
		}
		up := r.IntN(n)
		pieces = append(pieces, pick(lower, n), pick(upper, up)+pick(lower, n-up), pick(punct, n))
	}
	for _, enc := range []string{EncodingO200K, EncodingCL100K, EncodingP50K, EncodingR50K} {
		tk, err := GetTokenizer(enc)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pieces {
			if n, want := tk.Count(p), len(tk.Encode(p)); n != want {
				t.Fatalf("%s: Count(%q) = %d, tiktoken-go says %d", enc, p, n, want)
			}
		}
	}
}

// TestPairsOnlyCountsLikeMerge: countPairsWord, the count of pieces of 3 to 8 ASCII
// bytes in which no token longer than two bytes can start, gives the merge's count
// (exactCount, which shares none of its shortcuts) whenever it answers, in every
// encoding, on random pieces of base64, DNA, hex, letters and punctuation, the bytes
// above the piece random; and it answers for most pieces of base64.
func TestPairsOnlyCountsLikeMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	alphabets := []string{b64, "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz", "ACGT", "acgt",
		"0123456789abcdef", "!#$%&()*+,-.:;<=>?@[]^_{|}~", "xyzXYZ\x00\x7f"}
	for _, enc := range []string{EncodingO200K, EncodingCL100K, EncodingP50K, EncodingR50K} {
		tk, err := GetTokenizer(enc)
		if err != nil {
			t.Fatal(err)
		}
		answered, base64 := 0, 0
		for k := range 40000 {
			a := alphabets[r.IntN(len(alphabets))]
			if k%2 == 0 {
				a = b64
			}
			b := make([]byte, 8)
			for i := range b {
				b[i] = a[r.IntN(len(a))]
			}
			m := 3 + r.IntN(6)
			n := countPairsWord(load64(string(b), 0), m, tk.ranks)
			if n == 0 {
				continue
			}
			answered++
			if k%2 == 0 {
				base64++
			}
			if want := exactCount(string(b[:m]), tk.ranks); n != want {
				t.Fatalf("%s: %q: countPairsWord %d, the merge %d", enc, b[:m], n, want)
			}
		}
		if enc == EncodingO200K && base64 < 20000/2 {
			t.Errorf("%s: countPairsWord answered %d of 20000 pieces of base64, want most", enc, base64)
		}
		t.Logf("%s: countPairsWord answered %d of 40000 (%d of 20000 of base64)", enc, answered, base64)
	}
}

// TestGreedyPairsTakesAsMerging: for every order of the keys of seven pairs in a row and
// every set of them that are tokens, greedyPairs takes the pairs that merging them one
// by one, lowest key first, takes.
func TestGreedyPairsTakesAsMerging(t *testing.T) {
	perm := []int{0, 1, 2, 3, 4, 5, 6}
	var permute func(k int)
	checked := 0
	permute = func(k int) {
		if k < len(perm) {
			for i := k; i < len(perm); i++ {
				perm[k], perm[i] = perm[i], perm[k]
				permute(k + 1)
				perm[k], perm[i] = perm[i], perm[k]
			}
			return
		}
		// perm[j] is the key of the pair at j.
		lt := uint64(0)
		for j := range 6 {
			if perm[j] < perm[j+1] {
				lt |= 1 << j
			}
		}
		for valid := range uint64(1 << 7) {
			want, gone := uint64(0), ^valid
			for key := range 7 {
				for j := range 7 {
					if perm[j] == key && gone&(1<<j) == 0 {
						want |= 1 << j
						gone |= 7 << j >> 1 // the pair and its neighbours
					}
				}
			}
			if got := greedyPairs(valid, lt); got != want&0x7f {
				t.Fatalf("keys %v, valid %07b: greedyPairs %07b, merging takes %07b", perm, valid, got, want)
			}
			checked++
		}
	}
	permute(0)
	if checked != 5040*128 {
		t.Fatalf("checked %d cases", checked)
	}
}
