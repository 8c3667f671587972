package memory

// exactCount is the reference for long pieces: byte-pair encoding of the whole piece in
// one go, the pairs in one priority queue keyed by (rank, start), exactly tiktoken's
// merge order, O(n log n) with no window. It is what bpeCountHeap did before it merged in
// windows; the tests measure the windows against it where tiktoken-go's quadratic merge
// would take hours.
func exactCount(piece string, ranks *bpeRanks) int {
	n := len(piece)
	if n <= 1 {
		return n
	}
	next, prev, rank := make([]int32, n), make([]int32, n), make([]int32, n)
	var h pairHeap
	for i := range n {
		next[i], prev[i], rank[i] = int32(i+1), int32(i-1), noRank
		if i+2 <= n {
			if rank[i] = ranks.rank(piece[i : i+2]); rank[i] != noRank {
				h.push(pairKey(int(rank[i]), i))
			}
		}
	}
	pairRank := func(i int32) int32 {
		j := next[i]
		if int(j) >= n {
			return noRank
		}
		return ranks.rank(piece[i:next[j]])
	}
	parts := n
	for len(h) > 0 {
		r, i := h.pop()
		if rank[i] != r {
			continue
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
			h.push(pairKey(int(rank[i]), int(i)))
		}
		if p := prev[i]; p >= 0 {
			if rank[p] = pairRank(p); rank[p] != noRank {
				h.push(pairKey(int(rank[p]), int(p)))
			}
		}
	}
	return parts
}

// heapArity is the pair heap's number of children per node: four keys fill half a cache
// line, and the heap is half as deep as a binary one.
const heapArity = 4

// pairHeap is a 4-ary min-heap of pair keys: rank in the high 32 bits, the pair's start
// in the low, so keys order by rank, then leftmost first.
type pairHeap []uint64

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
func pairKey(rank, start int) uint64 { return uint64(rank)<<32 | uint64(start) }
