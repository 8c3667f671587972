package persistence

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// TextSearcher is a VectorStore that also ranks its stream's messages by text: the
// Text of each stored Vector is indexed (Tokenize's terms) beside the embedding, under
// the same tenant and stream keys, and DeleteStream removes it with the vector. Both
// stores of the project implement it: persistence/vectormem with an in-process BM25
// index, persistence/pgvector with PostgreSQL full text (a tsvector column, a GIN
// index, ts_rank_cd).
type TextSearcher interface {
	VectorStore
	// SearchText returns the k messages of tenant's stream whose text best matches
	// query, best first (equal scores in increasing Seq order). A message matches when it
	// shares at least one of the query's terms; Score is the store's text rank (BM25,
	// ts_rank_cd: higher is better, comparable only within one result). A query without
	// terms, or an unknown stream, has no hits.
	SearchText(ctx context.Context, tenant, stream, query string, k int) ([]VectorHit, error)
}

// ValidateTextSearch checks SearchText arguments: a valid tenant, a non-empty stream
// and k ≥ 1.
func ValidateTextSearch(tenant, stream string, k int) error {
	if err := ValidateTenant(tenant); err != nil {
		return err
	}
	if stream == "" {
		return fmt.Errorf("%w: empty stream id", ErrInvalid)
	}
	if k < 1 {
		return fmt.Errorf("%w: k must be at least 1, got %d", ErrInvalid, k)
	}
	return nil
}

// MaxTermLen bounds one term of Tokenize, in bytes: longer runs (a base64 blob) are
// left out of the text index.
const MaxTermLen = 64

// MaxQueryTerms bounds the distinct terms of one text search (QueryTerms): a query is
// a step's description or a user's message, and one of a megabyte would otherwise make
// every store rank each matching message against thousands of terms.
const MaxQueryTerms = 64

// QueryTerms returns the terms of a text-search query: Tokenize's, in order, keeping
// only the first MaxQueryTerms distinct ones (every occurrence of those). Every store
// searches with it, so they rank the same terms.
func QueryTerms(query string) []string {
	terms := Tokenize(query)
	seen := make(map[string]bool, min(len(terms), MaxQueryTerms))
	out := terms[:0]
	for _, t := range terms {
		if !seen[t] {
			if len(seen) == MaxQueryTerms {
				continue
			}
			seen[t] = true
		}
		out = append(out, t)
	}
	return out
}

// Tokenize returns the text-search terms of text, in order, the same for documents and
// queries in every store. It keeps identifiers whole: a run of letters and digits
// joined by '-', '_', '.', '/', ':' or '#' (an order id ORD-2024-0042, an error code
// E_CONN_RESET, a file internal/node/memory.go, a call Store.Search) is one term,
// lower-cased, followed by its parts: the alphanumeric pieces and the words of a
// camelCase or PascalCase name (handleRetry → handle, retry). Plain words lose a common
// English suffix (-s, -es, -ed, -ing) so "failing" finds "failed", and the commonest
// English words are dropped. Terms longer than MaxTermLen bytes are dropped. A term that
// is already lower case is a substring of text (it shares text's memory).
func Tokenize(text string) []string {
	// One term per 8 bytes of text covers prose and identifiers, so the slice rarely
	// grows; the terms are substrings of text or, when it has capitals, of one
	// lower-cased copy of it (ASCII text), or words lower-cased one by one.
	out := make([]string, 0, len(text)/8+1)
	lc := lowerText(text)
	i := 0
	for i < len(text) {
		r, n := rune(text[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(text[i:])
		}
		if !isWordRune(r) {
			i += n
			continue
		}
		// A run of word runes and joiners, trimmed of trailing joiners.
		j, end := i+n, i+n
		for j < len(text) {
			r, n := rune(text[j]), 1
			if r >= utf8.RuneSelf {
				r, n = utf8.DecodeRuneInString(text[j:])
			}
			if isWordRune(r) {
				j += n
				end = j
				continue
			}
			if !isJoiner(r) {
				break
			}
			j += n
		}
		out = lc.appendRun(out, i, end)
		i = j
	}
	return out
}

// lowered is a text being tokenized with, when it is ASCII, its lower-case copy: the
// lower case of text[i:j] is then lower[i:j].
type lowered struct {
	text, lower string
	ascii       bool
}

// lowerText lower-cases text at once when it is ASCII (a copy only when it has
// capitals); other text is lower-cased term by term, since lower-casing can change a
// rune's length.
func lowerText(text string) lowered {
	upper := false
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c >= utf8.RuneSelf {
			return lowered{text: text}
		}
		upper = upper || 'A' <= c && c <= 'Z'
	}
	if !upper {
		return lowered{text: text, lower: text, ascii: true}
	}
	return lowered{text: text, lower: strings.ToLower(text), ascii: true}
}

// toLower is strings.ToLower(text[i:j]).
func (l lowered) toLower(i, j int) string {
	if l.ascii {
		return l.lower[i:j]
	}
	return strings.ToLower(l.text[i:j])
}

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isJoiner(r rune) bool {
	switch r {
	case '-', '_', '.', '/', ':', '#':
		return true
	}
	return false
}

// joiners are isJoiner's runes.
const joiners = "-_./:#"

// appendRun appends the terms of one run, text[i:j] (a word or an identifier). A run
// starts and ends with a word rune, so it is a compound (several parts) when it has a
// joiner.
func (l lowered) appendRun(out []string, i, j int) []string {
	run := l.text[i:j]
	compound := strings.ContainsAny(run, joiners)
	if compound {
		if t := l.toLower(i, j); len(t) <= MaxTermLen {
			out = append(out, t)
		}
	}
	for at := i; at < j; {
		k := strings.IndexAny(l.text[at:j], joiners)
		if k < 0 {
			k = j - at
		}
		pi, pj := at, at+k
		at = pj + 1
		if pi == pj { // joiners in a row
			continue
		}
		p := l.text[pi:pj]
		camel := camelEnd(p, 0) < len(p)
		if camel || compound {
			// An identifier's piece: keep it as it is, and its camel words.
			if t := l.toLower(pi, pj); len(t) <= MaxTermLen {
				out = append(out, t)
			}
			if camel {
				for w := 0; w < len(p); {
					e := camelEnd(p, w)
					out = appendWord(out, l.toLower(pi+w, pi+e))
					w = e
				}
			}
			continue
		}
		out = appendWord(out, l.toLower(pi, pj))
	}
	return out
}

// appendWord appends a plain word's term, t lower-cased: stemmed, unless it is a stop
// word or too long.
func appendWord(out []string, t string) []string {
	if len(t) > MaxTermLen || stopWords[t] {
		return out
	}
	return append(out, stem(t))
}

// camelEnd returns where the camelCase or PascalCase word of s that starts at byte
// start ends: at the next case change (HTTPServer → HTTP, Server), else at len(s).
// s is letters and digits (valid UTF-8).
func camelEnd(s string, start int) int {
	prev, n := utf8.DecodeRuneInString(s[start:])
	for i := start + n; i < len(s); {
		cur, cn := utf8.DecodeRuneInString(s[i:])
		if unicode.IsLower(prev) && unicode.IsUpper(cur) {
			return i
		}
		if i+cn < len(s) && unicode.IsUpper(prev) && unicode.IsUpper(cur) {
			if next, _ := utf8.DecodeRuneInString(s[i+cn:]); unicode.IsLower(next) {
				return i
			}
		}
		prev, i = cur, i+cn
	}
	return len(s)
}

// stem strips one common English suffix from a lower-case word of letters.
func stem(w string) string {
	if len(w) < 5 {
		return w
	}
	for _, r := range w {
		if r < 'a' || r > 'z' {
			return w
		}
	}
	for _, suf := range []string{"ing", "ed", "es", "s"} {
		if strings.HasSuffix(w, suf) && len(w)-len(suf) >= 4 && !strings.HasSuffix(w, "ss") {
			return w[:len(w)-len(suf)]
		}
	}
	return w
}

// stopWords are dropped from documents and queries: they match everything.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be been but by can could did do does for from had has have he her
		him his how i if in into is it its just me my no not of on or our she so than that the their them then there these
		they this to too us was we were what when where which who why will with would you your yes ok okay please`) {
		m[w] = true
	}
	return m
}()

// The retrieval modes of HybridSearch (config key memory.retrieval).
const (
	// RetrievalHybrid fuses the vector and the text ranking by reciprocal rank fusion.
	RetrievalHybrid = "hybrid"
	// RetrievalVector ranks by embedding similarity only.
	RetrievalVector = "vector"
	// RetrievalText ranks by text only.
	RetrievalText = "text"
)

// Retrieval selects how HybridSearch ranks a stream's messages.
type Retrieval struct {
	// Mode is RetrievalHybrid ("" means it), RetrievalVector or RetrievalText.
	Mode string
	// VectorWeight and TextWeight weigh the two rankings in the fusion; both 0 means 1
	// each. Only for RetrievalHybrid.
	VectorWeight, TextWeight float64
	// RRFK is the rank constant of reciprocal rank fusion (a hit at rank r, from 1,
	// scores weight/(RRFK+r)); 0 means DefaultRRFK.
	RRFK int
	// Depth is how many hits of each ranking the fusion considers; 0 means max(4k, 20).
	Depth int
}

// DefaultRRFK is the rank constant of reciprocal rank fusion. It is lower than the 60
// of web search: a session is a small corpus whose one exact match of a rare identifier
// (text rank 1, absent from the vector ranking: 1/11) must outrank messages that are
// middling in both rankings (two ranks of 12 or worse: at most 2/22), so that an order
// id or an error code asked for is found whatever the embedding makes of it. On the
// evaluation set (vectortest.LoadEval) 10 and 60 score the same.
const DefaultRRFK = 10

// Validate reports a mode or weights that cannot work.
func (r Retrieval) Validate() error {
	switch r.Mode {
	case "", RetrievalHybrid, RetrievalVector, RetrievalText:
	default:
		return fmt.Errorf("%w: retrieval %q: want hybrid, vector or text", ErrInvalid, r.Mode)
	}
	if r.VectorWeight < 0 || r.TextWeight < 0 || r.RRFK < 0 || r.Depth < 0 {
		return fmt.Errorf("%w: retrieval weights, rank constant and depth must not be negative", ErrInvalid)
	}
	return nil
}

// HybridSearch ranks tenant's stream's messages for a query given as text and as its
// embedding, as r selects: by vector similarity, by text (the store must be a
// TextSearcher; a store that is not falls back to the vectors), or both fused by
// reciprocal rank fusion (Fuse; vector hits of similarity ≤ 0 are left out). Hits of a fused ranking carry the fused score.
func HybridSearch(ctx context.Context, s VectorStore, r Retrieval, tenant, stream, text string, vec []float32, k int) ([]VectorHit, error) {
	ts, ok := s.(TextSearcher)
	mode := r.Mode
	if mode == "" {
		mode = RetrievalHybrid
	}
	if !ok {
		mode = RetrievalVector
	}
	switch mode {
	case RetrievalVector:
		return s.Search(ctx, tenant, stream, vec, k)
	case RetrievalText:
		return ts.SearchText(ctx, tenant, stream, text, k)
	}
	depth := r.Depth
	if depth == 0 {
		depth = max(4*k, 20)
	}
	// The two rankings are independent: the text one runs on a goroutine of its own
	// (a round trip of its own on PostgreSQL), awaited before returning.
	var th []VectorHit
	var terr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		th, terr = ts.SearchText(ctx, tenant, stream, text, depth)
	}()
	vh, err := s.Search(ctx, tenant, stream, vec, depth)
	<-done
	if err != nil {
		return nil, err
	}
	if terr != nil {
		return nil, terr
	}
	// A vector at a right angle to the query, or further, is unrelated: no rank for it.
	vh = slices.DeleteFunc(vh, func(h VectorHit) bool { return h.Score <= 0 })
	vw, tw := r.VectorWeight, r.TextWeight
	if vw == 0 && tw == 0 {
		vw, tw = 1, 1
	}
	return Fuse(k, r.RRFK, []float64{vw, tw}, vh, th), nil
}

// fuseScanMax is the most hits Fuse merges by scanning; longer rankings use a map.
const fuseScanMax = 128

// Fuse merges rankings by reciprocal rank fusion: a hit at rank r (from 1) of ranking i
// adds weights[i]/(rrfK+r) to its message's score (rrfK 0 means DefaultRRFK). It
// returns the k best, best first (ties by Seq), each with its fused score and the meta
// of its first ranking that has it.
func Fuse(k, rrfK int, weights []float64, rankings ...[]VectorHit) []VectorHit {
	if rrfK <= 0 {
		rrfK = DefaultRRFK
	}
	// The rankings are short (a few times k): the fused hits are found by a scan of
	// those so far, with a map beside them only for long rankings.
	total := 0
	for _, hits := range rankings {
		total += len(hits)
	}
	type fused struct {
		hit   VectorHit
		score float64
	}
	acc := make([]fused, 0, total)
	var at map[uint64]int
	if total > fuseScanMax {
		at = make(map[uint64]int, total)
	}
	for i, hits := range rankings {
		w := 1.0
		if i < len(weights) {
			w = weights[i]
		}
		for r, h := range hits {
			j := -1
			if at != nil {
				if k, ok := at[h.Seq]; ok {
					j = k
				}
			} else {
				for k := range acc {
					if acc[k].hit.Seq == h.Seq {
						j = k
						break
					}
				}
			}
			if j < 0 {
				j = len(acc)
				acc = append(acc, fused{hit: VectorHit{Seq: h.Seq, Meta: h.Meta}})
				if at != nil {
					at[h.Seq] = j
				}
			}
			acc[j].score += w / float64(rrfK+r+1)
		}
	}
	out := make([]VectorHit, 0, len(acc))
	for _, f := range acc {
		if f.score > 0 {
			f.hit.Score = float32(f.score)
			out = append(out, f.hit)
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

// ParseRetrievalWeights reads the fusion weights "VECTOR/TEXT", e.g. "1/1" or "1/2"
// (non-negative numbers, not both 0): --memory-retrieval-weights and the config key
// memory.retrieval_weights.
func ParseRetrievalWeights(s string) (vector, text float64, err error) {
	v, t, ok := strings.Cut(s, "/")
	if ok {
		vector, err = strconv.ParseFloat(strings.TrimSpace(v), 64)
	}
	if ok && err == nil {
		text, err = strconv.ParseFloat(strings.TrimSpace(t), 64)
	}
	if !ok || err != nil || vector < 0 || text < 0 || math.IsNaN(vector) || math.IsNaN(text) || math.IsInf(vector, 0) || math.IsInf(text, 0) || vector+text == 0 {
		return 0, 0, fmt.Errorf("%w: retrieval weights %q: want VECTOR/TEXT, two non-negative numbers not both 0, e.g. 1/1", ErrInvalid, s)
	}
	return vector, text, nil
}
