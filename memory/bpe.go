package memory

import (
	"math/bits"
	"slices"
	"sync"
)

// Byte-pair encoding of one piece, counting tokens only. tiktoken merges, again and again,
// the adjacent pair of parts whose concatenation has the lowest rank (the leftmost such
// pair on a tie) until no adjacent pair is a token. Done by rescanning every pair after
// each merge (tiktoken-go's bytePairMerge) that costs time quadratic in the piece's length,
// and a piece has no length bound: a run of one letter, or a DNA sequence, is one piece.
// Short pieces (nearly all of them) are merged by rescanning (mergeShort), which is the
// fastest for them: in place, without branches on the ranks, which on text without words
// (base64) would be mispredicted at random. Longer ones are counted by backtracking
// (backtrack.go): linear in practice and exact for any length; those of 128 bytes or more
// of a small alphabet (DNA, a run of one letter) by an automaton of the alphabet's tokens
// (bpe_alphabet.go), one table lookup a byte, on the same tables. Where its tables cannot be
// used (an encoding with a token built from one ranked above it) they are merged rank by
// rank (buckets of pairs, mergeLevels) or by a priority queue over the adjacent pairs
// (merge), in exactly the same order, in windows of bounded length (bpeCountHeap):
// O(n log mergeWindow) at worst, exact for pieces up to mergeWindow bytes.

// smallPiece is the longest piece merged by rescanning.
const smallPiece = 64

// noRank marks a part with no mergeable pair after it, and a part merged into its left
// neighbour.
const noRank = -1

// bpeRanks are an encoding's merge ranks: the map of every token's bytes, and tables of
// the one- and two-byte tokens (the first merges of every piece, looked up without
// hashing).
type bpeRanks struct {
	m        map[string]int
	pair     *[1 << 16]int32 // rank of the token of bytes (a, b) at a<<8|b, or noRank
	byteRank [256]int32      // rank of the token of byte b, or noRank
	// tiny holds the tokens of 3 to 5 bytes when ids: an open-addressed table (linear
	// probing from tinySlot) of entries tinyKey<<21 | rank+1, 0 for an empty slot, at
	// most 80% full. One 8-byte load answers most lookups, in a table small enough to
	// stay in a core's cache (1 MiB for o200k_base, a fifth of a map's).
	tiny []uint64
	// short holds the other tokens of 3 to 7 bytes keyed by shortKey: an integer key
	// hashes and compares faster than a string, and needs no second memory access.
	short map[uint64]int32
	// shortSeen has the bit shortBit(k) set for every key k of short: a string whose bit
	// is clear is no token, known without touching the map (most merge candidates of
	// text without words, such as base64, are no token). 256 KiB: it stays in cache.
	shortSeen *[1 << (shortSeenBits - 6)]uint64
	// longSeen is shortSeen for the tokens of 8 bytes or more, keyed by longKey: most
	// long merge candidates are no token, told without hashing the string for the map.
	longSeen *[1 << (shortSeenBits - 6)]uint64
	// prefix3 has the bit prefix3Bit(s) set for the first three bytes of every token
	// of three bytes or more whose first three bytes are ASCII: a merge candidate whose
	// bit is clear is no token. Exact, unhashed and laid out by the candidate's bytes
	// (256 KiB, of which text of a small alphabet touches a few KiB), it answers most
	// lookups of text without words (base64, hex) from the core's cache.
	prefix3 *[1 << 15]uint64
	// ids reports whether every rank is below 1<<18 and every byte a token, which the
	// long merge needs (it keys pairs by rank in 32 bits and caches pair ranks keyed by
	// the ranks of the two tokens, mergeBuf.pairs). True of the four encodings; ranks
	// without it are not used (tiktoken-go counts).
	ids bool
	// back holds the tables of the backtracking count of long pieces (backtrack.go), nil
	// where it cannot be used; built on the first long piece (backOnce), which costs a
	// few hundred milliseconds and a few MiB that most texts never need.
	back     *backRanks
	backOnce sync.Once
	// alphas keeps the automata that count long pieces of small alphabets
	// (bpe_alphabet.go).
	alphas alphaCache
}

// newBPERanks indexes ranks.
func newBPERanks(ranks map[string]int) *bpeRanks {
	r := &bpeRanks{m: ranks, pair: new([1 << 16]int32), ids: true,
		short: map[uint64]int32{}, prefix3: new([1 << 15]uint64), shortSeen: new([1 << (shortSeenBits - 6)]uint64), longSeen: new([1 << (shortSeenBits - 6)]uint64)}
	for i := range r.pair {
		r.pair[i] = noRank
	}
	for i := range r.byteRank {
		r.byteRank[i] = noRank
	}
	for tok, rank := range ranks {
		switch len(tok) {
		case 1:
			r.byteRank[tok[0]] = int32(rank)
		case 2:
			r.pair[int(tok[0])<<8|int(tok[1])] = int32(rank)
		}
		if len(tok) >= 3 && tok[0]|tok[1]|tok[2] < 0x80 {
			b := prefix3Bit(tok)
			r.prefix3[b>>6] |= 1 << (b & 63)
		}
		if len(tok) >= 8 {
			b := shortBit(longKey(tok))
			r.longSeen[b>>6] |= 1 << (b & 63)
		}
		if rank < 0 || rank >= 1<<18 {
			r.ids = false
		}
	}
	for _, v := range r.byteRank {
		if v == noRank {
			r.ids = false
		}
	}
	tiny := 0
	for tok := range ranks {
		if r.ids && len(tok) >= 3 && len(tok) <= 5 {
			tiny++
		}
	}
	if tiny > 0 {
		size := 1
		for size < tiny+tiny/4 {
			size *= 2
		}
		r.tiny = make([]uint64, size)
	}

	for tok, rank := range ranks {
		switch {
		case len(tok) < 3 || len(tok) > 7:
		case r.tiny != nil && len(tok) <= 5:
			k := tinyKey(tok)
			b := shortBit(k)
			r.shortSeen[b>>6] |= 1 << (b & 63)
			at := r.tinySlot(k)
			for r.tiny[at] != 0 {
				at = (at + 1) & uint64(len(r.tiny)-1)
			}
			r.tiny[at] = k<<21 | uint64(rank+1)
		default:
			k := shortKey(tok)
			r.short[k] = int32(rank)
			b := shortBit(k)
			r.shortSeen[b>>6] |= 1 << (b & 63)
		}
	}
	return r
}

// tinyKey is the key of a string of 3 to 5 bytes in bpeRanks.tiny: its bytes,
// little-endian, and its length above them (43 bits).
func tinyKey(s string) uint64 {
	k := uint64(len(s)) << 40
	for i := range len(s) {
		k |= uint64(s[i]) << (8 * i)
	}
	return k
}

// tinySlot is the first slot of bpeRanks.tiny probed for key k.
func (r *bpeRanks) tinySlot(k uint64) uint64 {
	return (k * 0x9E3779B97F4A7C15) >> (64 - bits.Len(uint(len(r.tiny)-1)))
}

// prefix3Bit is the bit of bpeRanks.prefix3 of s, whose first three bytes are ASCII.
func prefix3Bit(s string) uint { return uint(s[0])<<14 | uint(s[1])<<7 | uint(s[2]) }

// rank returns the rank of the token of bytes s, or noRank.
func (r *bpeRanks) rank(s string) int32 {
	if len(s) >= 3 && s[0]|s[1]|s[2] < 0x80 {
		if b := prefix3Bit(s); r.prefix3[b>>6]&(1<<(b&63)) == 0 {
			return noRank
		}
	}
	switch len(s) {
	case 2:
		return r.pair[int(s[0])<<8|int(s[1])]
	case 3, 4, 5:
		if r.tiny == nil {
			break
		}
		k := tinyKey(s)
		if b := shortBit(k); r.shortSeen[b>>6]&(1<<(b&63)) == 0 {
			return noRank
		}
		for at := r.tinySlot(k); ; at = (at + 1) & uint64(len(r.tiny)-1) {
			e := r.tiny[at]
			if e == 0 {
				return noRank
			}
			if e>>21 == k {
				return int32(e&(1<<21-1)) - 1
			}
		}
	}
	switch len(s) {
	case 3, 4, 5, 6, 7:
		k := shortKey(s)
		if b := shortBit(k); r.shortSeen[b>>6]&(1<<(b&63)) == 0 {
			return noRank
		}
		if v, ok := r.short[k]; ok {
			return v
		}
		return noRank
	}
	if b := shortBit(longKey(s)); r.longSeen[b>>6]&(1<<(b&63)) == 0 {
		return noRank
	}
	if v, ok := r.m[s]; ok {
		return int32(v)
	}
	return noRank
}

// longKey is the filter key of a string of at least 8 bytes (bpeRanks.longSeen): its
// first and last 8 bytes and its length, mixed.
func longKey(s string) uint64 {
	return load64(s, 0) ^ bits.RotateLeft64(load64(s, len(s)-8), 29) ^ uint64(len(s))<<56
}

// load64 is the little-endian uint64 of s[i:i+8].
func load64(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// shortKey is the key of a string of at most 7 bytes: its bytes, little-endian, and its
// length in the top byte.
func shortKey(s string) uint64 {
	k := uint64(len(s)) << 56
	for i := range len(s) {
		k |= uint64(s[i]) << (8 * i)
	}
	return k
}

// shortSeenBits is the log2 of the number of bits of bpeRanks.shortSeen.
const shortSeenBits = 21

// shortBit is the bit of bpeRanks.shortSeen of key k.
func shortBit(k uint64) uint64 { return (k * 0x9E3779B97F4A7C15) >> (64 - shortSeenBits) }

// bpeCount returns the number of tokens byte-pair encoding gives piece under ranks. A
// long piece's merge stops early, ok false, once done is closed (nil: never).
func bpeCount(done <-chan struct{}, piece string, ranks *bpeRanks) (n int, ok bool) {
	switch len(piece) {
	case 0, 1:
		return len(piece), true
	case 2: // every byte is a token (bpeRanks.ids, or tiktoken-go counts)
		if ranks.pair[int(piece[0])<<8|int(piece[1])] != noRank {
			return 1, true
		}
		return 2, true
	}
	if ranks.rank(piece) != noRank {
		return 1, true
	}
	if len(piece) == 3 {
		// Not one token: two if either pair merges (what remains is the whole piece, no
		// token), else three; both pairs noRank (-1) when the and of their ranks is.
		x := ranks.pair[int(piece[0])<<8|int(piece[1])] & ranks.pair[int(piece[1])<<8|int(piece[2])]
		return 2 + int(uint32(x)>>31), true
	}
	if len(piece) > smallPiece {
		if back := ranks.backtracker(); back != nil {
			if len(piece) >= alphaMinPiece {
				if n, ok, handled := back.countAlphabet(done, piece, ranks); handled {
					return n, ok
				}
			}
			return back.countBacktrack(done, piece, ranks)
		}
		n, _, ok := bpeCountHeap(done, piece, ranks)
		return n, ok
	}
	// Buffers of three sizes (Go zeroes them on every call), scanned whole.
	switch {
	case len(piece) <= 8:
		return mergeShort8(piece, ranks), true
	case len(piece) <= 16:
		var key [16]uint64
		var next, prev [16]uint8
		return mergeShort(piece, ranks, key[:], next[:], prev[:]), true
	}
	var key [smallPiece]uint64
	var next, prev [smallPiece]uint8
	return mergeShort(piece, ranks, key[:], next[:], prev[:]), true
}

// mergeShort8 is mergeShort for a piece of at most 8 bytes, its buffers local arrays and
// its scan for the least key a tree of seven minimums.
func mergeShort8(piece string, ranks *bpeRanks) int {
	m := len(piece)
	var key [8]uint64
	var next, prev [8]uint8
	pair := ranks.pair
	for k := range 7 {
		r := uint64(uint32(pair[uint16(piece[min(k, m-1)])<<8|uint16(piece[min(k+1, m-1)])])) << 8
		if k+1 >= m {
			r = noPairKey
		}
		key[k] = r | uint64(k)
		next[k], prev[k] = uint8(k+1), uint8(k-1)
	}
	next[7] = 8
	for parts := m; ; parts-- {
		best := minKey(minKey(minKey(key[0], key[1]), minKey(key[2], key[3])), minKey(minKey(key[4], key[5]), key[6]))
		if best >= noPairKey {
			return parts
		}
		at := best & 7
		j := next[at] & 7
		k := int(next[j])
		next[at], key[j] = uint8(k), noPairKey|uint64(j)
		r := noPairKey
		if k < m {
			prev[k&7] = uint8(at)
			if e := int(next[k&7]); at > 0 || e < m { // else the pair is the whole piece: no token
				r = uint64(uint32(ranks.rank(piece[at:e]))) << 8
			}
		}
		key[at] = r | at
		if at > 0 {
			p := prev[at] & 7
			r := noPairKey
			if p > 0 || k < m {
				r = uint64(uint32(ranks.rank(piece[p:k]))) << 8
			}
			key[p] = r | uint64(p)
		}
	}
}

// countPairsWord returns the tokens of a piece of 3 to 8 ASCII bytes, the low m bytes of
// x (little-endian; the bytes above are ignored), in which no token longer than two bytes
// can start, or 0 if one may: bpeRanks.prefix3 has none of its three-byte windows. Then
// every merge is of two bytes into a token of two, after which the pairs it overlaps are
// gone (each would be three bytes or more): the pairs merged are those BPE takes lowest
// key first (rank, then leftmost), each dropping its neighbours (greedyPairs). Most
// pieces of 3 to 8 bytes of base64 are such (nine in ten of three bytes, three in four
// of 4 to 8); on them this costs less than half of the merge (rank and mergeShort8),
// whose rank lookups and merges branch at random on text without words. Without a
// branch but the answer's.
func countPairsWord(x uint64, m int, ranks *bpeRanks) int {
	// The bytes above the piece zeroed: the windows and pairs past its end (computed,
	// not counted) then look up fewer distinct rows of the tables.
	x &= 1<<(8*m) - 1
	pre := ranks.prefix3
	may := uint64(0)
	for j := range 6 { // the windows at bytes 0 to 5, of which the first m-2 are the piece's
		t := x >> (8 * j)
		w := t&0x7f<<14 | t>>8&0x7f<<7 | t>>16&0x7f // prefix3Bit of the window
		may |= pre[w>>6] >> (w & 63) & 1 << j
	}
	if may&(1<<(m-2)-1) != 0 {
		return 0
	}
	// The pairs' table indices (first byte high): lane j of even holds the pair at
	// byte 2j, lane j of odd the pair at byte 2j+1.
	const lanes = 0x00ff00ff00ff00ff
	even := x&lanes<<8 | x>>8&lanes
	odd := x>>8&lanes<<8 | x>>16&lanes
	pair := ranks.pair
	k0 := uint64(uint32(pair[uint16(even)])) << 8
	k1 := uint64(uint32(pair[uint16(odd)]))<<8 | 1
	k2 := uint64(uint32(pair[uint16(even>>16)]))<<8 | 2
	k3 := uint64(uint32(pair[uint16(odd>>16)]))<<8 | 3
	k4 := uint64(uint32(pair[uint16(even>>32)]))<<8 | 4
	k5 := uint64(uint32(pair[uint16(odd>>32)]))<<8 | 5
	k6 := uint64(uint32(pair[uint16(even>>48)]))<<8 | 6
	// valid: the pairs of the piece (at bytes 0 to m-2) that are tokens (noRank's key
	// has bit 39 set, a rank's not); lt bit j: the pair at j has a lower key than the
	// one at j+1.
	valid := (uint64(1)<<(m-1) - 1) &^ (k0>>39&1 | k1>>39&1<<1 | k2>>39&1<<2 | k3>>39&1<<3 |
		k4>>39&1<<4 | k5>>39&1<<5 | k6>>39&1<<6)
	lt := (k0-k1)>>63 | (k1-k2)>>63<<1 | (k2-k3)>>63<<2 | (k3-k4)>>63<<3 | (k4-k5)>>63<<4 | (k5-k6)>>63<<5
	return m - bits.OnesCount64(greedyPairs(valid, lt))
}

// greedyPairs returns the pairs that merging pairs lowest key first takes, each taking
// away its neighbours, among the valid ones of seven in a row (bit j: the pair at j); lt
// bit j tells that the pair at j has a lower key than the one at j+1. A pair is taken if
// and only if no neighbour with a lower key is: the rounds settle that for a pair after as
// many rounds as the longest run of pairs of falling keys that ends at it (six at most),
// with a fixed number of shifts and masks.
func greedyPairs(valid, lt uint64) uint64 {
	lowerLeft, lowerRight := lt<<1, ^lt&0x3f
	taken := valid
	for range 6 {
		taken = valid &^ (taken << 1 & lowerLeft) &^ (taken >> 1 & lowerRight)
	}
	return taken
}

// minKey is the lesser of keys a and b (below 1<<63), found without a branch.
func minKey(a, b uint64) uint64 {
	d := a - b
	return b + d&uint64(int64(d)>>63)
}

// noPairKey is the rank part of a key of mergeShort without a pair: above every rank.
const noPairKey = uint64(^uint32(0)) << 8

// mergeShort returns the number of parts byte-pair encoding leaves of piece (4 to
// smallPiece bytes, no token), merging by rescanning with buffers key, next and prev of
// at least len(piece) entries. Part k starts at byte k while it is alive; next[k] is the
// start of the part after it (len(piece) for the last), prev[k] the start of the one
// before it, and key[k] the rank of merging it with the next part, shifted left by 8 and
// or-ed with k (noPairKey|k if none, or once merged away): the least key is the pair to
// merge, the leftmost on a tie. The parts stay where they are (no copying), and every
// merge scans the whole of key, a fixed number of entries, without a branch on the
// ranks: on text such as base64 a branch per comparison, or on the piece's length, is
// mispredicted at random.
func mergeShort(piece string, ranks *bpeRanks, key []uint64, next, prev []uint8) int {
	m := len(piece)
	pair := ranks.pair
	for k := range key {
		r := uint64(uint32(pair[int(piece[min(k, m-1)])<<8|int(piece[min(k+1, m-1)])])) << 8
		if k+1 >= m {
			r = noPairKey
		}
		key[k] = r | uint64(k)
		next[k], prev[k] = uint8(k+1), uint8(k-1)
	}
	for parts := m; ; parts-- {
		best := key[0]
		for _, x := range key[1:] {
			best = minKey(best, x)
		}
		if best >= noPairKey {
			return parts
		}
		at := int(best & 0xff)
		j := int(next[at])
		k := int(next[j])
		next[at], key[j] = uint8(k), noPairKey|uint64(j)
		r := noPairKey
		if k < m {
			prev[k] = uint8(at)
			if e := int(next[k]); at > 0 || e < m { // else the pair is the whole piece: no token
				r = uint64(uint32(ranks.rank(piece[at:e]))) << 8
			}
		}
		key[at] = r | uint64(at)
		if at > 0 {
			p := int(prev[at])
			r := noPairKey
			if p > 0 || k < m {
				r = uint64(uint32(ranks.rank(piece[p:k]))) << 8
			}
			key[p] = r | uint64(p)
		}
	}
}

// bpeCountHeap is bpeCount for a long piece where backtracking cannot be used. Merging a piece in one go, with a priority
// queue over its adjacent pairs, is O(n log n) but touches megabytes of working memory at
// random for a megabyte-long piece, and hashes a byte string for every merge: it cost
// 5–19× as much as English prose per byte. So a long piece is merged in windows of
// mergeWindow bytes: each window is merged exactly (mergeOne), its parts ending in the
// window's first mergeWindow-mergeMargin bytes are counted, and the next window starts
// where the last of them ends. A piece of at most mergeWindow bytes is one window: exact.
// A longer piece is exact whenever each cut falls on a part boundary of the whole piece's
// merge (no merge ever spans a boundary, so the merges either side of it are those of
// each side alone), which fails only if a chain of merges reaches back more than
// mergeMargin bytes from a window's end: on 1 MiB of one letter, of random DNA and of
// base64 the counts are exact (TestLongPieceCountsLikeWholeMerge). Each window
// is O(mergeWindow log mergeWindow) at worst in memory that stays in cache, and a window
// identical to the previous one (a run of one letter) is counted once. work is the number
// of rank lookups, merges and tree updates done, for tests of the scaling. Between windows the merge
// checks done and stops (ok false) once it is closed.
func bpeCountHeap(done <-chan struct{}, piece string, ranks *bpeRanks) (parts, work int, ok bool) {
	b := mergeBufs.Get().(*mergeBuf)
	defer mergeBufs.Put(b)
	b.use(ranks)
	// The last window counted (not the final one): its start, the number of its parts
	// counted and their length (0: none). Compared in place, not copied: most windows
	// differ from the last at their first bytes.
	lastStart, lastParts, lastLen := 0, 0, 0
	for s := 0; s < len(piece); {
		if stopped(done) {
			return parts, work, false
		}
		w := piece[s:min(len(piece), s+mergeWindow)]
		if s+len(w) == len(piece) {
			return parts + len(w) - b.mergeOne(w, ranks, &work), work, true
		}
		if lastLen > 0 && piece[lastStart:lastStart+len(w)] == w {
			parts, s = parts+lastParts, s+lastLen
			continue
		}
		b.mergeOne(w, ranks, &work)
		// Count the parts ending at or before cut (at least one), stopping at the first
		// that ends after it.
		n, end, cut := 0, 0, int32(len(w)-mergeMargin)
		for i := int32(0); ; i = int32(b.parts[i].next) {
			e := int32(b.parts[i].next)
			if e > cut && n > 0 {
				break
			}
			n, end = n+1, int(e)
		}
		lastStart, lastParts, lastLen = s, n, end
		parts, s = parts+n, s+end
	}
	return parts, work, true
}

const (
	// mergeWindow is the length of the windows a long piece is merged in: the longest
	// piece counted exactly in all cases. Pre-tokens of ordinary text (words, numbers,
	// runs of punctuation or white space) are far shorter. A power of 4 (merge's tree),
	// at most 1<<12 (treeKey).
	mergeWindow = 4096
	// mergeMargin is the tail of a window whose parts are merged again with the next
	// window rather than counted: a merge chain must reach back further than this from
	// the window's end to change a count. It is longer than any token of the encodings.
	mergeMargin = 192
)

// pairCacheBits is the log2 of the number of entries of a merge's pair cache.
const pairCacheBits = 12

// mergeBuf is the working memory of one long piece's merge (~1.3 MiB, of which a few
// KiB are touched per window: head is indexed by rank), reused: the arrays of one window,
// its buckets and tree, and a cache of the ranks of pairs of tokens.
type mergeBuf struct {
	// Part i of the window starts at byte i while it is alive (part, kept together: a
	// merge reads and writes the fields of three neighbouring parts). tree is the pairs'
	// tournament tree (merge, treeInner).
	parts [mergeWindow]part
	tree  [treeInner + mergeWindow]uint32
	// The buckets of mergeLevels: key[i] is the rank of the pair at part i (noRank if
	// none: apart from parts, so that the scans of the buckets, which read it at every
	// entry, stay in the core's cache); head[r] is one more than the index in lv of the
	// bucket of rank r (0: none;
	// all 0 between windows); init holds the starts of a window's first pairs, grouped
	// by rank; ents the pairs made since, as lists (a part's start and one more than the
	// index of the next entry, 0 at the end); levels is the heap of the ranks of the
	// buckets not yet merged; order a bucket's starts, sorted.
	key    [mergeWindow]int32
	head   *[1 << 18]int32
	ents   [2 * mergeWindow][2]int32
	levels []int32
	order  []int32
	init   [mergeWindow]int32
	lv     []level
	// pairs caches the rank of the concatenation of two tokens, keyed by their ranks (a
	// direct-mapped cache: an entry is pairTag(a, b)<<20 | rank+1, or 0): far cheaper
	// than hashing the bytes, and a piece's pairs repeat. Valid for owner's ranks.
	owner *bpeRanks
	pairs [1 << pairCacheBits]uint64
	// valid caches whether two tokens form a valid pair (backRanks.fillValid): an entry
	// is pairTag(a, b)<<1 | 1 if they do, or 0; prefixes the longest valid token that
	// four bytes start with, prefixes8 eight (backRanks.longest). All valid for owner's
	// ranks. ring and dead are backRanks.backtrack's.
	valid     [1 << validCacheBits][2]uint64
	prefixes  [1 << prefixCacheBits][2]uint64
	prefixes8 [1 << prefix8CacheBits][2]uint64
	ring      [backRing]int32
	dead      []uint64
}

// part is a part of a window being merged: next is the start of the part after it (the
// window's length for the last), prev the start of the part before it (-1 for the
// first), tok the rank of the part's own bytes. Eight bytes: a window's parts (32 KiB)
// stay in a core's first-level cache with its pairs' ranks.
type part struct {
	tok        int32
	next, prev int16
}

var mergeBufs = sync.Pool{New: func() any {
	return &mergeBuf{head: new([1 << 18]int32),
		levels: make([]int32, 0, 256), order: make([]int32, 0, mergeWindow), lv: make([]level, 0, mergeWindow)}
}}

// use readies the buffer for a merge under ranks.
func (b *mergeBuf) use(ranks *bpeRanks) {
	if b.owner != ranks {
		b.owner = ranks
		clear(b.pairs[:])
		clear(b.valid[:])
		clear(b.prefixes[:])
		clear(b.prefixes8[:])
	}
}

// pairTag is the cache key of the pair of tokens of ranks a and b (each < 1<<18), with a
// bit set so that no key is 0.
func pairTag(a, b int32) uint64 { return 1<<36 | uint64(a)<<18 | uint64(b) }

// pairHash multiplies a pair cache key into its slot (Fibonacci hashing).
const pairHash = 0x9E3779B97F4A7C15

// fillPair looks up the rank of s, the bytes of a pair missing from the pair cache, and
// stores it in the cache's slot under tag.
func fillPair(ranks *bpeRanks, slot *uint64, tag uint64, s string) int32 {
	r := ranks.rank(s)
	*slot = tag<<20 | uint64(r+1)
	return r
}

// merge merges window w (at most mergeWindow bytes) exactly, leaving its parts in b, and
// returns the number of merges made. It adds its rank lookups and tree updates to work.
//
// The pairs wait in a 4-ary tournament tree: leaf i holds the key (rank, i) of merging
// part i with the next one (noKey if none), every inner node the least key of its four
// children, so the root is the pair to merge: the lowest-ranked, the leftmost on a tie.
// A merge updates three neighbouring leaves and their ancestors, each once: a walk of
// log4(mergeWindow) levels without branches on the keys.
func (b *mergeBuf) merge(w string, ranks *bpeRanks, work *int) (merges int) {
	n := int32(len(w))
	ps := b.parts[:n]
	t := &b.tree
	leaves := t[treeInner:]
	for i := range n {
		ps[i].next, ps[i].prev = int16(i+1), int16(i-1)
		ps[i].tok = ranks.byteRank[w[i]]
		leaves[i] = noKey
		if i+1 < n {
			if r := ranks.pair[int(w[i])<<8|int(w[i+1])]; r != noRank {
				leaves[i] = treeKey(r, i)
			}
		}
	}
	// Build the nodes over leaves [0, n) only, level by level (a short window costs
	// O(n), not O(mergeWindow)); the other children of those nodes hold noKey.
	cnt := int(n)
	for i := cnt; i < (cnt+3)&^3; i++ {
		leaves[i] = noKey
	}
	for size := mergeWindow / 4; size >= 1; size /= 4 {
		off := (size - 1) / 3 // the first node of the level
		cnt = (cnt + 3) / 4
		for m := off; m < off+cnt; m++ {
			t[m] = min4(t, m)
		}
		for m := off + cnt; size > 1 && m < off+(cnt+3)&^3; m++ {
			t[m] = noKey
		}
	}
	lookups := int(n)
	for t[0] < noPair {
		i := int32(t[0] & (1<<12 - 1))
		j := int32(ps[i].next)
		k := int32(ps[j].next)
		ps[i].next, ps[i].tok = int16(k), int32(t[0]>>12)
		merges++
		leaves[j], leaves[i] = noKey, noKey
		if k < n {
			ps[k].prev = int16(i)
			// The rank of the pair (i, k), through the pair cache (written out: a call
			// costs more than the lookup).
			tag := pairTag(ps[i].tok, ps[k].tok)
			slot := &b.pairs[(tag*pairHash)>>(64-pairCacheBits)]
			r := int32(*slot&(1<<20-1)) - 1
			if *slot>>20 != tag {
				r = fillPair(ranks, slot, tag, w[i:int32(ps[k].next)])
			}
			leaves[i] = treeKey(r, i)
			lookups++
		}
		p := int32(ps[i].prev)
		if p >= 0 {
			tag := pairTag(ps[p].tok, ps[i].tok)
			slot := &b.pairs[(tag*pairHash)>>(64-pairCacheBits)]
			r := int32(*slot&(1<<20-1)) - 1
			if *slot>>20 != tag {
				r = fillPair(ranks, slot, tag, w[p:k])
			}
			leaves[p] = treeKey(r, p)
			lookups++
		} else {
			p = i
		}
		// Recompute the ancestors of leaves p ≤ i < j, once each: their paths join.
		a, c, d := (treeInner+int(p)-1)>>2, (treeInner+int(i)-1)>>2, (treeInner+int(j)-1)>>2
		for {
			t[a] = min4(t, a)
			if c != a {
				t[c] = min4(t, c)
			}
			if d != c {
				t[d] = min4(t, d)
			}
			if a == 0 {
				break
			}
			a, c, d = (a-1)>>2, (c-1)>>2, (d-1)>>2
		}
	}
	*work += lookups + 3*merges
	return merges
}

// treeInner is the number of inner nodes of mergeBuf.tree: node 0 is the root, node m's
// children are 4m+1 to 4m+4, and leaf i is node treeInner+i.
const treeInner = (mergeWindow - 1) / 3

// min4 is the least key of node m's children.
func min4(t *[treeInner + mergeWindow]uint32, m int) uint32 {
	c := t[4*m+1 : 4*m+5 : 4*m+5]
	return min(min(c[0], c[1]), min(c[2], c[3]))
}

// noKey is the key of no pair: above every pair's.
const noKey = ^uint32(0)

// noPair is above every key of a pair, and at most the key of noRank (treeKey).
const noPair = 1 << 30

// A window's positions fit the 12 bits treeKey keeps for them.
const _ = uint(1<<12 - mergeWindow)

// treeKey is the key of the pair of rank (below 1<<18) starting at byte start of a
// window: ordered by rank, then leftmost first. The key of noRank is at least noPair.
func treeKey(rank, start int32) uint32 { return uint32(rank)<<12 | uint32(start) }

// mergeOne merges window w exactly (mergeLevels, or merge where it cannot) and returns
// the number of merges made.
func (b *mergeBuf) mergeOne(w string, ranks *bpeRanks, work *int) int {
	if m, ok := b.mergeLevels(w, ranks, work); ok {
		return m
	}
	return b.merge(w, ranks, work)
}

// mergeLevels is merge done rank by rank, without the tree. BPE merges the pairs in the
// order of (rank, start); a merge of rank r creates pairs whose tokens contain the token
// of rank r, which in the encodings rank above r (no window of the tests' texts breaks
// this). While that holds no pair of rank r appears once the first is merged, so every
// pair waits in the bucket of its rank, the buckets' ranks in a small heap, and the
// bucket of the least rank is merged in order of start, skipping the pairs merged away or
// changed since they were added: the order of merge, at O(1) a merge plus the sort of the
// pairs added to a bucket after the window's first pairs (those are counting-sorted by
// rank into init, already in order), where the tree walks to its root on each merge.
// A merge creating a pair of rank r or below stops it: ok false, and the window must be
// merged again by merge (the parts are left in any state, the buckets empty). It adds its
// rank lookups and merges to work.
func (b *mergeBuf) mergeLevels(w string, ranks *bpeRanks, work *int) (merges int, ok bool) {
	n := int32(len(w))
	b.initLevels(w, ranks)
	ps, key, head, init, ents := b.parts[:n], b.key[:n], b.head, b.init[:n], &b.ents
	// ne is the number of entries of ents in use: at most two per merge.
	lookups, ne := int(n), int32(0)
	for len(b.levels) > 0 {
		r := b.popLevel()
		l := b.lv[head[r]-1]
		head[r] = 0
		order := init[l.beg:l.end]
		if l.list != 0 {
			order = b.sortLevel(order, l.list)
		}
		// Drop the pairs merged away, or changed, since they were added (most of them
		// where every pair is a token, as in DNA), without a branch on each: the loop
		// below then mostly merges, its test rarely failing.
		live := 0
		for _, i := range order {
			order[live] = i
			if key[i] == r {
				live++
			}
		}
		for _, i := range order[:live] {
			if key[i] != r {
				continue // merged away by a merge of this rank to its left
			}
			j := int32(ps[i].next)
			k := int32(ps[j].next)
			ps[i].next, ps[i].tok, key[i], key[j] = int16(k), r, noRank, noRank
			merges++
			// The pairs (i, k) and (p, i), through the pair cache, each added to the
			// bucket of its rank (written out: calls cost more than the rest).
			if k < n {
				ps[k].prev = int16(i)
				tag := pairTag(r, ps[k].tok)
				slot := &b.pairs[(tag*pairHash)>>(64-pairCacheBits)]
				nr := int32(*slot&(1<<20-1)) - 1
				if *slot>>20 != tag {
					nr = fillPair(ranks, slot, tag, w[i:int32(ps[k].next)])
				}
				lookups++
				if nr != noRank {
					if nr <= r {
						b.drop()
						return merges, false
					}
					key[i] = nr
					h := head[nr]
					if h == 0 {
						h = b.addLevel(nr)
					}
					ents[ne] = [2]int32{i, b.lv[h-1].list}
					ne++
					b.lv[h-1].list = ne
				}
			}
			if p := int32(ps[i].prev); p >= 0 {
				tag := pairTag(ps[p].tok, r)
				slot := &b.pairs[(tag*pairHash)>>(64-pairCacheBits)]
				nr := int32(*slot&(1<<20-1)) - 1
				if *slot>>20 != tag {
					nr = fillPair(ranks, slot, tag, w[p:k])
				}
				lookups++
				key[p] = nr
				if nr != noRank {
					if nr <= r {
						b.drop()
						return merges, false
					}
					h := head[nr]
					if h == 0 {
						h = b.addLevel(nr)
					}
					ents[ne] = [2]int32{p, b.lv[h-1].list}
					ne++
					b.lv[h-1].list = ne
				}
			}
		}
	}
	*work += lookups + merges
	return merges, true
}

// initLevels readies window w for mergeLevels: its parts (one a byte), their pairs'
// ranks (key), and the starts of the pairs grouped by rank in init, ascending in each
// group (a counting sort: head[r] counts them, then holds one more than the rank's index
// in lv), each rank in the heap. A function of its own: the merge's loop is too large for
// the compiler to keep this one's variables in registers.
func (b *mergeBuf) initLevels(w string, ranks *bpeRanks) {
	n := len(w)
	ps, key, head, init := b.parts[:n], b.key[:n], b.head, &b.init
	lv := b.lv[:0]
	b.levels = b.levels[:0]
	pair, byteRank := ranks.pair, &ranks.byteRank
	for i := 0; i < n-1; i++ {
		r := pair[uint16(w[i])<<8|uint16(w[i+1])]
		ps[i] = part{next: int16(i + 1), prev: int16(i - 1), tok: byteRank[w[i]]}
		key[i] = r
		if r != noRank {
			h := &head[r&(1<<18-1)] // ranks are below 1<<18 (bpeRanks.ids)
			if *h == 0 {
				// No call in the loop (append's would spill its variables): lv has
				// room for a bucket per pair.
				lv = lv[:len(lv)+1]
				lv[len(lv)-1] = level{rank: r}
			}
			*h++
		}
	}
	ps[n-1] = part{next: int16(n), prev: int16(n - 2), tok: byteRank[w[n-1]]}
	key[n-1] = noRank
	at := int32(0)
	for x := range lv {
		l := &lv[x]
		l.beg, l.end = at, at
		at += head[l.rank]
		head[l.rank] = int32(x + 1)
		b.pushLevel(l.rank)
	}
	for i, r := range key[:n-1] {
		if r != noRank {
			l := &lv[head[r&(1<<18-1)]-1]
			init[l.end&(mergeWindow-1)] = int32(i)
			l.end++
		}
	}
	b.lv = lv
}

// sortLevel returns the starts of a bucket's pairs in order: its first pairs (first,
// ascending) and those of its list (one more than the index in ents of the list's first
// entry).
func (b *mergeBuf) sortLevel(first []int32, list int32) []int32 {
	o := append(b.order[:0], first...)
	for e := list; e != 0; e = b.ents[e-1][1] {
		o = append(o, b.ents[e-1][0])
	}
	slices.Sort(o)
	b.order = o
	return o
}

// addLevel adds an empty bucket of rank r and returns one more than its index in lv.
func (b *mergeBuf) addLevel(r int32) int32 {
	b.lv = append(b.lv, level{rank: r})
	h := int32(len(b.lv))
	b.head[r] = h
	b.pushLevel(r)
	return h
}

// level is a bucket of mergeLevels: the starts init[beg:end] of the first pairs of its
// rank, ascending, and the list of the pairs made since (one more than the index of its
// first entry in ents, 0 if none).
type level struct {
	rank, beg, end, list int32
}

// drop empties every bucket.
func (b *mergeBuf) drop() {
	for _, l := range b.lv {
		b.head[l.rank] = 0
	}
	b.levels = b.levels[:0]
}

// pushLevel adds rank r to the heap of ranks.
func (b *mergeBuf) pushLevel(r int32) {
	h := append(b.levels, r)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	b.levels = h
}

// popLevel removes and returns the least rank of the heap.
func (b *mergeBuf) popLevel() int32 {
	h := b.levels
	r := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && h[c+1] < h[c] {
			c++
		}
		if h[i] <= h[c] {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	b.levels = h
	return r
}
