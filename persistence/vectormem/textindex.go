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
// old postings first (forget). The index keeps no list of each row's terms: a session's
// every message is indexed while it is active, and that list cost a third of the
// index; a replacement (rare: a re-embedding of a history whose vectors were not
// dropped) scans the postings instead, once per upsert.
type textIndex struct {
	postings map[string][]posting
	// lens[row] is the row's term count (0: it has no postings).
	lens  []int32
	total int64
	// emptied: forget may have left empty lists (prune drops them).
	emptied bool
}

// posting is one row's count of a term.
type posting struct {
	row int32
	tf  int32
}

// forget removes the postings of rows (which it sorts), in one pass over the index. A
// term's emptied list stays (the row's new text likely has the term again) until prune.
func (x *textIndex) forget(rows []int) {
	n := 0
	for _, row := range rows {
		if row < len(x.lens) && x.lens[row] > 0 {
			x.total -= int64(x.lens[row])
			x.lens[row] = 0
			rows[n] = row
			n++
		}
	}
	if n == 0 {
		return
	}
	rows = rows[:n]
	slices.Sort(rows)
	for t, ps := range x.postings {
		x.postings[t] = slices.DeleteFunc(ps, func(p posting) bool {
			_, found := slices.BinarySearch(rows, int(p.row))
			return found
		})
	}
	x.emptied = true
}

// prune drops the terms whose lists forget emptied and no text filled again.
func (x *textIndex) prune() {
	if !x.emptied {
		return
	}
	x.emptied = false
	for t, ps := range x.postings {
		if len(ps) == 0 {
			delete(x.postings, t)
		}
	}
}

// set indexes text as row's (replacing what the row had; call prune after). counts is a
// scratch map for the terms' counts, empty on entry and left empty (the store's, under
// its write lock).
func (x *textIndex) set(row int, text string, counts map[string]int32) {
	if x.postings == nil {
		x.postings = map[string][]posting{}
	}
	for len(x.lens) <= row {
		x.lens = append(x.lens, 0)
	}
	if x.lens[row] > 0 {
		x.forget([]int{row})
	}
	terms := persistence.Tokenize(text)
	for _, t := range terms {
		counts[t]++
	}
	for t, n := range counts {
		x.postings[t] = append(x.postings[t], posting{row: int32(row), tf: n})
	}
	clear(counts)
	x.lens[row] = int32(len(terms))
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
