package vectormem

import (
	"math"
	"slices"

	"github.com/fathom-agents/fathom/persistence"
)

// The BM25 parameters of SearchText: the usual term-frequency saturation and length
// normalisation.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// textIndex is one stream's inverted index: for each term the rows that have it and how
// often. Rows are the stream's rows (stream.seqs); a row replaced by an upsert loses its
// old postings first.
type textIndex struct {
	postings map[string][]posting
	// terms[row] are the row's distinct terms (to remove its postings), lens[row] its
	// term count.
	terms [][]string
	lens  []int32
	total int64
}

// posting is one row's count of a term.
type posting struct {
	row int32
	tf  int32
}

// set indexes text as row's (replacing what the row had). counts is a scratch map for
// the terms' counts, empty on entry and left empty (the store's, under its write lock).
func (x *textIndex) set(row int, text string, counts map[string]int32) {
	if x.postings == nil {
		x.postings = map[string][]posting{}
	}
	for len(x.terms) <= row {
		x.terms = append(x.terms, nil)
		x.lens = append(x.lens, 0)
	}
	// The row's old postings go; a term's emptied list stays until the new text is
	// indexed (a message replaced by itself reuses its lists), then goes if still empty.
	old := x.terms[row]
	for _, t := range old {
		x.postings[t] = slices.DeleteFunc(x.postings[t], func(p posting) bool { return p.row == int32(row) })
	}
	x.total -= int64(x.lens[row])
	terms := persistence.Tokenize(text)
	for _, t := range terms {
		counts[t]++
	}
	distinct := make([]string, 0, len(counts))
	for t, n := range counts {
		distinct = append(distinct, t)
		x.postings[t] = append(x.postings[t], posting{row: int32(row), tf: n})
	}
	clear(counts)
	for _, t := range old {
		if len(x.postings[t]) == 0 {
			delete(x.postings, t)
		}
	}
	x.terms[row], x.lens[row] = distinct, int32(len(terms))
	x.total += int64(len(terms))
}

// search returns the k best rows for the query's terms by BM25, best first.
func (x *textIndex) search(terms []string, k int) []Hit {
	n := len(x.lens)
	if n == 0 || x.total == 0 {
		return nil
	}
	avg := float64(x.total) / float64(n)
	scores := make([]float32, n)
	var touched []int32
	var seen map[string]bool // a long query's terms seen; a short one's are scanned
	if len(terms) > 32 {
		seen = make(map[string]bool, len(terms))
	}
	for i, t := range terms {
		if seen != nil && seen[t] || seen == nil && slices.Contains(terms[:i], t) {
			continue
		}
		if seen != nil {
			seen[t] = true
		}
		ps := x.postings[t]
		if len(ps) == 0 {
			continue
		}
		df := float64(len(ps))
		idf := math.Log(1 + (float64(n)-df+0.5)/(df+0.5))
		for _, p := range ps {
			tf := float64(p.tf)
			norm := bm25K1 * (1 - bm25B + bm25B*float64(x.lens[p.row])/avg)
			if scores[p.row] == 0 {
				touched = append(touched, p.row)
			}
			scores[p.row] += float32(idf * tf * (bm25K1 + 1) / (tf + norm))
		}
	}
	slices.Sort(touched)
	h := make(minHeap, 0, min(k, len(touched)))
	for _, row := range touched {
		h.offer(int(row), scores[row])
	}
	return h.sorted()
}
