package memory

import (
	"math"
	"math/bits"
	"sync"
)

// Byte-pair encoding of one piece, counting tokens only. tiktoken merges, again and again,
// the adjacent pair of parts whose concatenation has the lowest rank (the leftmost such
// pair on a tie) until no adjacent pair is a token. Done by rescanning every pair after
// each merge (tiktoken-go's bytePairMerge) that costs time quadratic in the piece's length,
// and a piece has no length bound: a run of one letter, or a DNA sequence, is one piece.
// Short pieces (nearly all of them) are merged by the rescanning loop, which is the
// fastest for them; longer ones by a priority queue over the adjacent pairs, O(n log n)
// and merging in exactly the same order.

// smallPiece is the longest piece merged by rescanning.
const smallPiece = 64

// noRank marks a part with no mergeable pair after it, and a part merged into its left
// neighbour.
const noRank = -1

// bpeRanks are an encoding's merge ranks: the map of every token's bytes, and a table of
// the two-byte tokens (the first merges of every piece, looked up without hashing).
type bpeRanks struct {
	m    map[string]int
	pair *[1 << 16]int32 // rank of the token of bytes (a, b) at a<<8|b, or noRank
}

// newBPERanks indexes ranks.
func newBPERanks(ranks map[string]int) *bpeRanks {
	r := &bpeRanks{m: ranks, pair: new([1 << 16]int32)}
	for i := range r.pair {
		r.pair[i] = noRank
	}
	for tok, rank := range ranks {
		if len(tok) == 2 {
			r.pair[int(tok[0])<<8|int(tok[1])] = int32(rank)
		}
	}
	return r
}

// rank returns the rank of the token of bytes s, or noRank.
func (r *bpeRanks) rank(s string) int32 {
	if len(s) == 2 {
		return r.pair[int(s[0])<<8|int(s[1])]
	}
	if v, ok := r.m[s]; ok {
		return int32(v)
	}
	return noRank
}

// bpeCount returns the number of tokens byte-pair encoding gives piece under ranks. A
// long piece's merge stops early, ok false, once done is closed (nil: never).
func bpeCount(done <-chan struct{}, piece string, ranks *bpeRanks) (n int, ok bool) {
	if len(piece) <= 1 {
		return len(piece), true
	}
	if ranks.rank(piece) != noRank {
		return 1, true
	}
	if len(piece) > smallPiece {
		n, _, ok := bpeCountHeap(done, piece, ranks)
		return n, ok
	}
	// Part k starts at bounds[k] and ends at bounds[k+1]; pr[k] is the rank of merging
	// parts k and k+1, or noRank.
	var boundsBuf [smallPiece + 1]int
	var prBuf [smallPiece]int32
	bounds, pr := boundsBuf[:len(piece)+1], prBuf[:len(piece)-1]
	for i := range bounds {
		bounds[i] = i
	}
	for k := range pr {
		pr[k] = ranks.rank(piece[k : k+2])
	}
	pairRank := func(k int) int32 {
		if k+2 >= len(bounds) {
			return noRank
		}
		return ranks.rank(piece[bounds[k]:bounds[k+2]])
	}
	for len(pr) > 0 {
		at := -1
		for k, r := range pr {
			if r != noRank && (at < 0 || r < pr[at]) {
				at = k
			}
		}
		if at < 0 {
			break
		}
		bounds = append(bounds[:at+1], bounds[at+2:]...)
		pr = append(pr[:at], pr[at+1:]...)
		if at < len(pr) {
			pr[at] = pairRank(at)
		}
		if at > 0 {
			pr[at-1] = pairRank(at - 1)
		}
	}
	return len(bounds) - 1, true
}

// bpeCountHeap is bpeCount for a long piece: the pairs wait in a priority queue keyed by
// (rank, start), so the pair popped first is the lowest-ranked and, among equal ranks,
// the leftmost, exactly the pair the rescanning loop picks. A merge changes the pairs on
// either side of the merged part; their new ranks are pushed and the old entries are
// left in the queue and skipped when popped (a part's rank at a start never comes back:
// the pair's bytes only grow, and ranks are unique per byte string). Each merge does
// O(1) rank lookups and at most O(log n) queue work (pairQueue). work is the number of rank lookups and heap
// pushes done, for tests of the scaling. Every stopCheck pops it checks done, and stops
// (ok false) once it is closed.
func bpeCountHeap(done <-chan struct{}, piece string, ranks *bpeRanks) (parts, work int, ok bool) {
	n := len(piece)
	if n >= math.MaxInt32 {
		// Positions are kept in 32 bits. No message is this long; count its halves (an
		// estimate: a token may span the middle).
		a, w1, ok1 := bpeCountHeap(done, piece[:n/2], ranks)
		b, w2, ok2 := bpeCountHeap(done, piece[n/2:], ranks)
		return a + b, w1 + w2, ok1 && ok2
	}
	// Part i starts at byte i while it is alive; next[i] is the start of the part after it
	// (n for the last), prev[i] the start of the part before it; rank[i] is the rank of
	// merging part i with the next part, noRank if there is none.
	buf := mergeBufs.Get().(*mergeBuf)
	defer buf.put()
	next, prev, rank := buf.arrays(n)
	q := &buf.q
	for i := range n {
		next[i], prev[i] = int32(i+1), int32(i-1)
		rank[i] = noRank
		if i+2 <= n {
			if rank[i] = ranks.rank(piece[i : i+2]); rank[i] != noRank {
				q.push(pairKey(int(rank[i]), i))
			}
		}
	}
	work = n
	pairRank := func(i int32) int32 {
		work++
		j := next[i]
		if int(j) >= n {
			return noRank
		}
		return ranks.rank(piece[i:next[j]])
	}
	parts = n
	for pops := 1; q.len() > 0; pops++ {
		if pops%stopCheck == 0 && stopped(done) {
			return parts, work, false
		}
		r, i := q.pop()
		if rank[i] != r {
			continue // stale: the part was merged away, or its pair changed
		}
		j := next[i]
		k := next[j]
		next[i] = k
		rank[j] = noRank
		if int(k) < n {
			prev[k] = i
		}
		parts--
		if rank[i] = pairRank(i); rank[i] != noRank {
			q.push(pairKey(int(rank[i]), int(i)))
			work++
		}
		if p := prev[i]; p >= 0 {
			if rank[p] = pairRank(p); rank[p] != noRank {
				q.push(pairKey(int(rank[p]), int(p)))
				work++
			}
		}
	}
	return parts, work, true
}

// mergeBuf is the working memory of one long merge, reused: a megabyte-long piece needs
// ~20 MB of it, which would otherwise be allocated, zeroed and collected every time.
type mergeBuf struct {
	next, prev, rank []int32
	q                pairQueue
}

var mergeBufs = sync.Pool{New: func() any { return new(mergeBuf) }}

// arrays returns the buffer's three arrays of length n (contents undefined).
func (b *mergeBuf) arrays(n int) (next, prev, rank []int32) {
	if cap(b.next) < n {
		b.next, b.prev, b.rank = make([]int32, n), make([]int32, n), make([]int32, n)
	}
	return b.next[:n], b.prev[:n], b.rank[:n]
}

// put empties the queue and returns the buffer to the pool, unless it grew past
// maxPooledMerge (kept only for ordinary pieces).
func (b *mergeBuf) put() {
	if cap(b.next) > maxPooledMerge {
		return
	}
	b.q.reset()
	mergeBufs.Put(b)
}

// maxPooledMerge is the longest piece whose merge buffer is kept for reuse.
const maxPooledMerge = 4 << 20

func (q *pairQueue) reset() {
	q.last, q.n = 0, 0
	for i := range q.buckets {
		q.buckets[i] = q.buckets[i][:0]
	}
	q.low = q.low[:0]
}

// pairQueue is the merge's priority queue of pair keys: a radix heap (O(1) push, pops
// amortised over the key's bits, memory touched in order) for keys at or above the last
// key popped, and a heap for the rare keys below it (a merge whose new pair has a lower
// rank than the merge itself). Keys are popped in increasing order.
type pairQueue struct {
	last    uint64
	n       int
	buckets [65][]uint64 // bucket b holds keys whose highest bit differing from last is bit b-1
	low     pairHeap
}

func (q *pairQueue) len() int { return q.n + len(q.low) }

func (q *pairQueue) push(k uint64) {
	if k < q.last {
		q.low.push(k)
		return
	}
	b := bits.Len64(k ^ q.last)
	q.buckets[b] = append(q.buckets[b], k)
	q.n++
}

// pop removes the smallest key and returns its rank and start.
func (q *pairQueue) pop() (rank, start int32) {
	if len(q.low) > 0 {
		return q.low.pop()
	}
	if len(q.buckets[0]) == 0 {
		b := 1
		for len(q.buckets[b]) == 0 {
			b++
		}
		keys := q.buckets[b]
		m := keys[0]
		for _, k := range keys[1:] {
			m = min(m, k)
		}
		q.last = m
		for _, k := range keys {
			c := bits.Len64(k ^ m)
			q.buckets[c] = append(q.buckets[c], k)
		}
		q.buckets[b] = keys[:0]
	}
	z := q.buckets[0]
	k := z[len(z)-1]
	q.buckets[0] = z[:len(z)-1]
	q.n--
	return int32(k >> 32), int32(uint32(k))
}

// stopCheck is how many heap pops a long merge makes between checks of its done channel:
// well under a millisecond of work.
const stopCheck = 4096

// heapArity is the pair heap's number of children per node: four keys fill half a cache
// line, and the heap is half as deep as a binary one.
const heapArity = 4

// pairHeap is a 4-ary min-heap of pair keys: rank in the high 32 bits, the pair's start
// in the low, so keys order by rank, then leftmost first.
type pairHeap []uint64

func pairKey(rank, start int) uint64 { return uint64(rank)<<32 | uint64(start) }

func (h *pairHeap) push(k uint64) {
	*h = append(*h, k)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / heapArity
		if s[p] <= k {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = k
}

// pop removes the smallest key and returns its rank and start.
func (h *pairHeap) pop() (rank, start int32) {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	*h = s[:last]
	if last > 0 {
		h.down(0)
	}
	return int32(top >> 32), int32(uint32(top))
}

func (h pairHeap) down(i int) {
	n := len(h)
	k := h[i]
	for {
		first := heapArity*i + 1
		if first >= n {
			break
		}
		c := first
		for d := first + 1; d < min(first+heapArity, n); d++ {
			if h[d] < h[c] {
				c = d
			}
		}
		if k <= h[c] {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = k
}
