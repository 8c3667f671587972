package memory

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// alphabetInputs returns n random pieces of small alphabets (DNA in both cases, two
// letters, punctuation, digits, accented and CJK characters, a few letters mixed into DNA,
// runs of one letter and periodic pieces), minLen to maxLen bytes each.
func alphabetInputs(r *rand.Rand, n, minLen, maxLen int) []string {
	kinds := []func(int) string{
		func(m int) string { return pick(r, "ACGT", m) },
		func(m int) string { return pick(r, "acgt", m) },
		func(m int) string { return pick(r, "ACGTN", m) },
		func(m int) string { return pick(r, "ACGTACGTACGTACGTRY", m) }, // DNA with a few other letters
		func(m int) string { return pick(r, "ab", m) },
		func(m int) string { return pick(r, "xyz", m) },
		func(m int) string { return pick(r, "!?", m) },
		func(m int) string { return pick(r, "=-*#", m) },
		func(m int) string { return pick(r, "0123", m) },
		func(m int) string { return strings.Repeat(string(rune('a'+r.IntN(26))), m) },
		func(m int) string { return strings.Repeat("=", m) },
		func(m int) string { return periodic(r.IntN(8)+2, "ACGTab", r, m) },
		func(m int) string {
			var b strings.Builder
			for b.Len() < m {
				b.WriteString([]string{"é", "è", "ü"}[r.IntN(3)])
			}
			return b.String()
		},
		func(m int) string { return strings.Repeat("世界和平", m/12+1) },
		func(m int) string { return strings.Repeat("aé", m/3+1) },
	}
	// Grouped by kind: the automata of an alphabet are kept from piece to piece, as in
	// a text with many pieces of one alphabet.
	out := make([]string, n)
	for i := range out {
		out[i] = kinds[i*len(kinds)/n](minLen + r.IntN(maxLen-minLen+1))
	}
	return out
}

// periodic returns m bytes repeating a random word of p bytes of alphabet a.
func periodic(p int, a string, r *rand.Rand, m int) string {
	return strings.Repeat(pick(r, a, p), m/p+1)[:m]
}

// TestAlphabetCountsLikeMerge: the automaton's count of a long piece of a small alphabet
// equals byte-pair encoding's merge of the whole piece (exactCount, tiktoken's order) in
// both reference encodings, on random pieces of every kind of alphabetInputs, and the
// automaton counts most of them (the test exercises it, not the backtracking walk it
// falls back to).
func TestAlphabetCountsLikeMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	pieces := alphabetInputs(r, 300, alphaMinPiece, 6000)
	pieces = append(pieces, alphabetInputs(r, 30, 30000, 70000)...)
	for _, enc := range []string{EncodingO200K, EncodingCL100K} {
		tk, err := GetTokenizer(enc)
		if err != nil {
			t.Fatal(err)
		}
		b := tk.ranks.backtracker()
		handled := 0
		for _, p := range pieces {
			want := exactCount(p, tk.ranks)
			got, ok, h := b.countAlphabet(nil, p, tk.ranks)
			if !ok {
				t.Fatalf("%s: %q: stopped", enc, p)
			}
			if h {
				handled++
				if got != want {
					t.Fatalf("%s: %.40q… (%d bytes): automaton %d tokens, whole merge %d", enc, p, len(p), got, want)
				}
			}
			if n, _ := bpeCount(nil, p, tk.ranks); n != want {
				t.Fatalf("%s: %.40q… (%d bytes): bpeCount %d tokens, whole merge %d", enc, p, len(p), n, want)
			}
		}
		if handled < len(pieces)*3/4 {
			t.Fatalf("%s: the automaton counted %d of %d pieces", enc, handled, len(pieces))
		}
	}
}

// TestAlphabetCountsLikeTiktoken: through Count, texts of long pieces of small alphabets,
// mixed with prose and newlines, count exactly as tiktoken-go counts them.
func TestAlphabetCountsLikeTiktoken(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	pieces := alphabetInputs(r, 45, alphaMinPiece, 1500)
	for _, enc := range []string{EncodingO200K, EncodingCL100K} {
		tk, err := GetTokenizer(enc)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range pieces {
			s := p
			if i%3 == 1 {
				s = "The sequence reads " + p + " and ends.\n" + pieces[(i+1)%len(pieces)]
			}
			if n, want := tk.Count(s), len(tk.Encode(s)); n != want {
				t.Fatalf("%s: Count(%.40q…) = %d, tiktoken-go says %d", enc, s, n, want)
			}
		}
	}
}

// TestAlphabetSmallVocabularies: on vocabularies of a few dozen tokens over the letters a
// and b (rank ties at junctions, as in TestBacktrackSmallVocabularies), the automaton's
// count equals the merge of the whole piece.
func TestAlphabetSmallVocabularies(t *testing.T) {
	r := rand.New(rand.NewPCG(55, 56))
	tried, handled := 0, 0
	for range 40 {
		ranks, merges := abVocabulary(r)
		b := ranks.backtracker()
		if b == nil {
			continue
		}
		tried++
		for k := range 30 {
			p := pick(r, "ab", alphaMinPiece+r.IntN(600))
			if k%5 == 0 {
				p = periodic(1+r.IntN(5), "ab", r, len(p))
			}
			got, _, h := b.countAlphabet(nil, p, ranks)
			if h {
				handled++
			}
			if want := exactCount(p, ranks); h && got != want {
				t.Fatalf("vocabulary %v: %q: automaton %d tokens, whole merge %d", merges, p, got, want)
			}
		}
	}
	if tried < 10 || handled < tried*30*3/4 {
		t.Fatalf("%d of 40 vocabularies usable, the automaton counted %d of their %d pieces", tried, handled, tried*30)
	}
}

// TestAlphabetConcurrent: counts of pieces of one alphabet at once (each takes the
// cached automaton or builds its own) all count exactly (run it with -race).
func TestAlphabetConcurrent(t *testing.T) {
	countConcurrently(t, EncodingO200K, rand.New(rand.NewPCG(57, 58)), 8, 3000, 3)
}

// TestAlphabetStopsWhenCancelled: the automaton's walk of a long piece stops, ok false,
// once done is closed.
func TestAlphabetStopsWhenCancelled(t *testing.T) {
	tk, err := GetTokenizer(EncodingO200K)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	close(done)
	r := rand.New(rand.NewPCG(59, 60))
	for _, p := range []string{pick(r, "ACGT", 1<<20), pick(r, "ab", 1<<20)} {
		if _, ok, h := tk.ranks.backtracker().countAlphabet(done, p, tk.ranks); ok || !h {
			t.Fatalf("%.20q…: ok %v, counted %v after done", p, ok, h)
		}
	}
}

// TestAlphabetDropsStatesWhenFull: an automaton whose states reach its bound drops them,
// the piece counted by backtracking, and the next piece makes them again: every count
// exact.
func TestAlphabetDropsStatesWhenFull(t *testing.T) {
	tk, err := GetTokenizer(EncodingO200K)
	if err != nil {
		t.Fatal(err)
	}
	ranks := newBPERanks(tk.ranks.m)
	b := ranks.backtracker()
	r := rand.New(rand.NewPCG(61, 62))
	if _, _, h := b.countAlphabet(nil, pick(r, "ACGT", 1<<16), ranks); !h {
		t.Fatal("not counted by the automaton")
	}
	a := ranks.alphas.take("ACGT")
	if a == nil || len(a.states) < 20 {
		t.Fatalf("automaton kept: %v", a)
	}
	a.maxStates = len(a.states) + 5
	ranks.alphas.put(a)
	drops := 0
	for range 10 {
		p := pick(r, "ACGT", 4000)
		n, _, h := b.countAlphabet(nil, p, ranks)
		if a := ranks.alphas.take("ACGT"); a != nil {
			if len(a.states) < 5 {
				drops++
			}
			ranks.alphas.put(a)
		}
		if want := exactCount(p, ranks); h && n != want {
			t.Fatalf("%q: automaton %d tokens, whole merge %d", p, n, want)
		}
		if n, _ := bpeCount(nil, p, ranks); n != exactCount(p, ranks) {
			t.Fatalf("%q: bpeCount %d tokens, whole merge %d", p, n, exactCount(p, ranks))
		}
	}
	if drops == 0 {
		t.Fatal("the automaton never dropped its states")
	}
}

// FuzzAlphabetCountsLikeMerge: on any piece the automaton counts, its count equals the
// merge of the whole piece in both reference encodings. The seeds are pieces of
// alphabetInputs.
func FuzzAlphabetCountsLikeMerge(f *testing.F) {
	r := rand.New(rand.NewPCG(63, 64))
	for _, s := range alphabetInputs(r, 15, alphaMinPiece, 600) {
		f.Add(s)
	}
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
			got, _, h := tk.ranks.backtracker().countAlphabet(nil, p, tk.ranks)
			if want := exactCount(p, tk.ranks); h && got != want {
				t.Fatalf("%s: %q: automaton %d tokens, whole merge %d", tk.name, p, got, want)
			}
		}
	})
}
