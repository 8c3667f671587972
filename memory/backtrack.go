package memory

import "slices"

// Counting a long piece by backtracking, the method of GitHub's bpe crate (rust-gems,
// "So many tokens, so little time"), written for tiktoken's merge rule.
//
// Call a sequence of tokens valid when byte-pair encoding the concatenation of their
// bytes gives that sequence. Every text has exactly one valid sequence (the encoding),
// every run of tokens within a valid sequence is valid, and two valid sequences that
// share a token at their junction join into a valid sequence. So a sequence is valid if
// and only if every token is valid alone (byte-pair encoding its bytes gives the token
// itself) and every adjacent pair of tokens is valid. The encoding of a piece is then
// found left to right: take the longest token that is a prefix of the rest of the piece,
// keep it if it forms a valid pair with the token before, else try the next shorter
// prefix token; when none is left, drop the token before and try its shorter prefixes.
// A position from which no token sequence completes the piece never does (what precedes
// it is the one valid encoding of the text before it), so it is marked and never entered
// again. The walk is linear in practice and exact for any length, where the merge of a
// long piece is exact only within its windows (bpeCountHeap); caches of the tokens that
// four and eight bytes start with, and of the pairs found valid, answer most of its
// steps without a rank lookup.
//
// Whether a pair (a, b) is valid is told without merging: undo the merges that built a
// and b, highest rank first (a token's parts rank below it: backRanks checks this of the
// encoding), and at each step look up the token of the rightmost part of a joined with
// the leftmost part of b, a pair that tiktoken would merge if it ranked below the merge
// that next consumes either part (or equal to it, for a merge on b's side, which stands
// to its right: on equal ranks tiktoken merges the leftmost first). The joined bytes are
// the text's own around the junction: no copy.

// backRanks is what the backtracking count needs of an encoding, built once from its
// ranks.
type backRanks struct {
	// info holds, by rank, the token's length (0 for a rank with no token or a token
	// that byte-pair encoding of its own bytes does not give: never part of an encoding)
	// and the rank of the longest valid token that is a proper prefix of it (noRank for
	// a single byte): together, as the walk reads them.
	info []tokInfo
	// split holds the two tokens whose merge built each token of two bytes or more: the
	// parts of the last merge of byte-pair encoding its bytes; a single byte is its own
	// (split[r] == [2]int32{r, r}).
	split [][2]int32
	// properSeen has bit fnvBit(h) set for the running hash h (fnvStep) of every proper
	// prefix of a valid token, tokSeen for the hash of every valid token: the walk for
	// the longest token at a position stops at the first prefix whose proper bit is
	// clear, and tries only the lengths whose token bit is set.
	properSeen, tokSeen []uint64
	// maxLen is the length of the longest token.
	maxLen int
}

// tokInfo is what the walk reads of a token (backRanks.info).
type tokInfo struct {
	shorter int32
	len     uint16
}

// The running hash of the prefixes (FNV-1a, 64 bits) and the size of its bitmaps.
const (
	fnvOffset   = 0xcbf29ce484222325
	fnvPrime    = 0x100000001b3
	seenBitsLog = 23
)

// fnvStep adds byte c to running hash h.
func fnvStep(h uint64, c byte) uint64 { return (h ^ uint64(c)) * fnvPrime }

// fnvBit is the bit of hash h in backRanks' bitmaps (the hash mixed once more: FNV's low
// bits, and so its high ones after one step, depend on few bytes).
func fnvBit(h uint64) uint64 { return (h * 0x9E3779B97F4A7C15) >> (64 - seenBitsLog) }

// seen reports whether bitmap m has the bit of hash h.
func seen(m []uint64, h uint64) bool {
	b := fnvBit(h)
	return m[b>>6]&(1<<(b&63)) != 0
}

// newBackRanks builds the backtracking count's tables of r, or returns nil if the
// encoding has a token whose last merge joins a part ranked above it (the pair check
// assumes none does; the encodings have none): its long pieces are then merged.
func newBackRanks(r *bpeRanks) *backRanks {
	top := 0
	for _, rank := range r.m {
		top = max(top, rank+1)
	}
	toks := make([]string, top)
	for tok, rank := range r.m {
		toks[rank] = tok
	}
	b := &backRanks{info: make([]tokInfo, top), split: make([][2]int32, top),
		properSeen: make([]uint64, 1<<(seenBitsLog-6)), tokSeen: make([]uint64, 1<<(seenBitsLog-6))}
	var parts []int32
	for rank, tok := range toks {
		b.split[rank], b.info[rank].shorter = [2]int32{int32(rank), int32(rank)}, noRank
		switch {
		case tok == "" || len(tok) > 1<<16-1:
			continue
		case len(tok) == 1:
			b.info[rank].len = 1
			continue
		}
		// The last merge of byte-pair encoding tok joins two valid tokens x and y ranked
		// below it that form a valid pair but for the merges of rank rank and above; no
		// other two do (the encoding of tok's bytes with the tokens below rank is
		// unique). Tried in order of the length of x, longest first.
		x, y := int32(noRank), int32(noRank)
		for l := len(tok) - 1; l >= 1; l-- {
			a, c := r.rankOf(tok[:l]), r.rankOf(tok[l:])
			if a != noRank && c != noRank && a < int32(rank) && c < int32(rank) && b.info[a].len != 0 && b.info[c].len != 0 &&
				b.checkPair(tok, l, a, c, int32(rank), r, nil) {
				x, y = a, c
				break
			}
		}
		if x == noRank {
			// Not valid alone (never part of an encoding), or its last merge joins a part
			// ranked above it: told apart by merging it.
			if parts, _, _ = lastMerge(tok, r, parts); len(parts) == 1 {
				return nil
			}
			continue
		}
		b.info[rank].len, b.split[rank] = uint16(len(tok)), [2]int32{x, y}
	}
	for rank, tok := range toks {
		if b.info[rank].len == 0 {
			continue
		}
		b.maxLen = max(b.maxLen, len(tok))
		h := fnvStep(fnvOffset, tok[0])
		for l := 1; l < len(tok); l++ {
			setBit(b.properSeen, h)
			h = fnvStep(h, tok[l])
		}
		setBit(b.tokSeen, h)
		for l := len(tok) - 1; l >= 1; l-- {
			if s := r.rankOf(tok[:l]); s != noRank && b.info[s].len != 0 {
				b.info[rank].shorter = s
				break
			}
		}
	}
	return b
}

// backtracker returns the tables of the backtracking count of r, built on the first
// call, or nil where it cannot be used.
func (r *bpeRanks) backtracker() *backRanks {
	r.backOnce.Do(func() {
		if r.ids {
			r.back = newBackRanks(r)
		}
	})
	return r.back
}

// setBit sets the bit of hash h in bitmap m.
func setBit(m []uint64, h uint64) {
	b := fnvBit(h)
	m[b>>6] |= 1 << (b & 63)
}

// rankOf is rank for a string of any length.
func (r *bpeRanks) rankOf(s string) int32 {
	if len(s) == 1 {
		return r.byteRank[s[0]]
	}
	return r.rank(s)
}

// lastMerge byte-pair encodes tok (two bytes or more) by tiktoken's rule and returns the
// ranks of its parts (reusing buf) and, when one part is left, the ranks x and y of the
// two parts its last merge joined.
func lastMerge(tok string, r *bpeRanks, buf []int32) (parts []int32, x, y int32) {
	// starts[i] is the start of part i; pr[i] the rank of merging parts i and i+1.
	starts := make([]int, 0, len(tok)+1)
	for i := range len(tok) {
		starts = append(starts, i)
	}
	starts = append(starts, len(tok))
	pr := make([]int32, len(tok)-1)
	for i := range pr {
		pr[i] = r.rankOf(tok[i : i+2])
	}
	for len(pr) > 0 {
		best := -1
		for i, v := range pr {
			if v != noRank && (best < 0 || v < pr[best]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		x = r.rankOf(tok[starts[best]:starts[best+1]])
		y = r.rankOf(tok[starts[best+1]:starts[best+2]])
		starts = slices.Delete(starts, best+1, best+2)
		pr = slices.Delete(pr, best, best+1)
		if best < len(pr) {
			pr[best] = r.rankOf(tok[starts[best]:starts[best+2]])
		}
		if best > 0 {
			pr[best-1] = r.rankOf(tok[starts[best-1]:starts[best+1]])
		}
	}
	parts = buf[:0]
	for i := 0; i+1 < len(starts); i++ {
		parts = append(parts, r.rankOf(tok[starts[i]:starts[i+1]]))
	}
	return parts, x, y
}

// longest returns the rank of the longest valid token that is a prefix of s (not
// empty), through buf's caches of the longest tokens of at most four and eight bytes.
func (b *backRanks) longest(s string, r *bpeRanks, buf *mergeBuf) int32 {
	if len(s) < 4 {
		t, _ := b.walk(s, r)
		return t
	}
	k := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
	set := &buf.prefixes[(k*pairHash)>>(64-prefixCacheBits)]
	e := set[0]
	if e>>32 != k {
		e = set[1]
	}
	if e>>32 != k || e&prefixFilled == 0 {
		t, more := b.walk(s[:4], r)
		e = k<<32 | prefixFilled | uint64(t)
		if more {
			e |= prefixLonger
		}
		set[0], set[1] = e, set[0]
	}
	if e&prefixLonger == 0 || len(s) == 4 {
		return int32(e & (prefixLonger - 1))
	}
	if len(s) < 8 {
		t, _ := b.walk(s, r)
		return t
	}
	// Four bytes that start a longer token: the same for eight.
	k = load64(s, 0)
	slot8 := &buf.prefixes8[(k*pairHash)>>(64-prefix8CacheBits)]
	if slot8[0] != k || slot8[1]&prefixFilled == 0 {
		t, more := b.walk(s[:8], r)
		slot8[0], slot8[1] = k, prefixFilled|uint64(t)
		if more {
			slot8[1] |= prefixLonger
		}
	}
	if slot8[1]&prefixLonger == 0 || len(s) == 8 {
		return int32(slot8[1] & (prefixLonger - 1))
	}
	t, _ := b.walk(s, r)
	return t
}

// The entries of mergeBuf.prefixes (in sets of two, the newest first, so that two keys
// of one set do not evict each other, as a few of the 256 keys of DNA would): four
// bytes, above the flags and the rank of the longest valid token of at most four bytes
// they start with. prefixLonger marks four bytes that start a longer token. Those of
// mergeBuf.prefixes8 are eight bytes, and the flags and rank in a word of their own.
const (
	prefixCacheBits  = 11 // sets of mergeBuf.prefixes
	prefix8CacheBits = 12 // entries of mergeBuf.prefixes8
	prefixFilled     = 1 << 30
	prefixLonger     = 1 << 29
)

// walk is longest without the cache. more reports that s is a proper prefix of a token
// (by backRanks.properSeen: perhaps): a longer text might start with a longer token.
func (b *backRanks) walk(s string, r *bpeRanks) (t int32, more bool) {
	// hs[k] are the lengths whose token bit is set, ascending (the last eight).
	var hs [8]int
	n := 0
	h := fnvStep(fnvOffset, s[0])
	end := min(len(s), b.maxLen)
	l := 1
	for ; seen(b.properSeen, h); l++ {
		if l == end {
			more = true
			break
		}
		h = fnvStep(h, s[l])
		if seen(b.tokSeen, h) {
			hs[n&7] = l + 1
			n++
		}
	}
	// The candidates, longest first (the eight longest; below them, every length).
	for k := n - 1; k >= max(0, n-8); k-- {
		if t := r.rankOf(s[:hs[k&7]]); t != noRank && b.info[t].len != 0 {
			return t, more
		}
	}
	if n > 8 {
		for l := hs[(n-8)&7] - 1; l >= 2; l-- {
			if t := r.rank(s[:l]); t != noRank && b.info[t].len != 0 {
				return t, more
			}
		}
	}
	return r.byteRank[s[0]], more
}

// validCacheBits is the log2 of the number of sets of the cache of pair validity
// (mergeBuf.valid), of two entries each, the newest first.
const validCacheBits = 13

// fillValid checks whether tokens a and c, a ending and c starting at byte at of s, are a
// valid pair (the package comment above) and stores the answer in the validity cache's
// set under tag.
func (b *backRanks) fillValid(set *[2]uint64, tag uint64, s string, at int, a, c int32, r *bpeRanks, buf *mergeBuf) bool {
	ok := b.checkPair(s, at, a, c, 1<<31-1, r, buf)
	v := uint64(0)
	if ok {
		v = 1
	}
	set[0], set[1] = tag<<1|v, set[0]
	return ok
}

// checkPair is fillValid's check, counting only the merges ranked below limit, through
// buf's pair cache (nil: none).
func (b *backRanks) checkPair(s string, at int, a, c, limit int32, r *bpeRanks, buf *mergeBuf) bool {
	for {
		// The token of a's rightmost part joined with c's leftmost.
		var j int32
		if buf == nil {
			j = r.rank(s[at-int(b.info[a].len) : at+int(b.info[c].len)])
		} else {
			tag := pairTag(a, c)
			slot := &buf.pairs[(tag*pairHash)>>(64-pairCacheBits)]
			j = int32(*slot&(1<<20-1)) - 1
			if *slot>>20 != tag {
				j = fillPair(r, slot, tag, s[at-int(b.info[a].len):at+int(b.info[c].len)])
			}
		}
		if j != noRank && j < limit {
			return false
		}
		// Undo the later of the merges that made a and c.
		if a > c {
			limit = a
			if x := b.split[a][1]; x != a {
				a = x
				continue
			}
			limit = c + 1
			if y := b.split[c][0]; y != c {
				c = y
				continue
			}
			return true
		}
		limit = c + 1
		if y := b.split[c][0]; y != c {
			c = y
			continue
		}
		limit = a
		if x := b.split[a][1]; x != a {
			a = x
			continue
		}
		return true
	}
}

// backCheckEvery is the number of tokens the backtracking count takes between checks
// of its done channel.
const backCheckEvery = 1 << 12

// backRing is the number of the last tokens taken that the backtracking count keeps
// (mergeBuf.ring): a walk that must drop more than that to backtrack is walked again,
// keeping them all.
const backRing = 1 << 14

// countBacktrack returns the number of tokens of piece (two bytes or more) by
// backtracking. It stops, ok false, once done is closed.
func (b *backRanks) countBacktrack(done <-chan struct{}, piece string, r *bpeRanks) (n int, ok bool) {
	buf := mergeBufs.Get().(*mergeBuf)
	defer mergeBufs.Put(buf)
	buf.use(r)
	words := len(piece)/64 + 1
	dead := buf.dead
	if cap(dead) < words {
		if dead = make([]uint64, words); words <= maxPooledDead {
			buf.dead = dead
		}
	}
	dead = dead[:words]
	if n, ok, all := b.backtrack(done, piece, r, buf, buf.ring[:], dead); all {
		return n, ok
	}
	size := 1
	for size <= len(piece) {
		size *= 2
	}
	n, ok, _ = b.backtrack(done, piece, r, buf, make([]int32, size), dead)
	return n, ok
}

// maxPooledDead is the most words of the bitmap of dead positions a pooled mergeBuf
// keeps: that of a 4 MiB piece.
const maxPooledDead = 1 << 16

// backtrack is countBacktrack keeping the last len(ring) (a power of 2) tokens taken in
// ring, and in dead (len(piece)/64+1 words) the bit of every position from which no
// token sequence completes the piece. all is false if it had to drop a token it no
// longer kept (n and ok are then meaningless).
func (b *backRanks) backtrack(done <-chan struct{}, piece string, r *bpeRanks, buf *mergeBuf, ring []int32, dead []uint64) (n int, ok, all bool) {
	// top is the number of tokens taken; those below floor are no longer kept.
	clear(dead)
	mask := len(ring) - 1
	top, floor := 0, 0
	info := b.info
	pos := 0
	tok := b.longest(piece, r, buf)
	for next := backCheckEvery; ; {
		end := pos + int(info[tok].len)
		if dead[end>>6]&(1<<(end&63)) == 0 {
			ok := true
			if top > 0 {
				// Whether the pair with the token before is valid, through the cache.
				prev := ring[(top-1)&mask]
				tag := pairTag(prev, tok)
				set := &buf.valid[(tag*pairHash)>>(64-validCacheBits)]
				if e := set[0]; e>>1 == tag {
					ok = e&1 != 0
				} else if e := set[1]; e>>1 == tag {
					ok = e&1 != 0
				} else {
					ok = b.fillValid(set, tag, piece, pos, prev, tok, r, buf)
				}
			}
			if ok {
				ring[top&mask] = tok
				if top++; top-floor > len(ring) {
					floor++
				}
				if pos = end; pos == len(piece) {
					return top, true, true
				}
				if top >= next {
					if stopped(done) {
						return top, false, true
					}
					next += backCheckEvery
				}
				// The next token: the cache of longest's first answer, written out.
				if pos+4 < len(piece) {
					w := piece[pos : pos+4]
					k := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24
					set := &buf.prefixes[(k*pairHash)>>(64-prefixCacheBits)]
					e := set[0]
					if e>>32 != k {
						e = set[1]
					}
					if e>>32 == k && e&prefixFilled != 0 {
						if e&prefixLonger == 0 {
							tok = int32(e & (prefixLonger - 1))
							continue
						}
						// Four bytes that start a longer token (a run of one letter):
						// the cache of eight bytes, written out too.
						if pos+8 < len(piece) {
							k := load64(piece, pos)
							if e := &buf.prefixes8[(k*pairHash)>>(64-prefix8CacheBits)]; e[0] == k && e[1]&(prefixFilled|prefixLonger) == prefixFilled {
								tok = int32(e[1] & (prefixLonger - 1))
								continue
							}
						}
					}
				}
				tok = b.longest(piece[pos:], r, buf)
				continue
			}
		}
		if s := info[tok].shorter; s != noRank {
			tok = s
			continue
		}
		// No token from pos completes the piece: drop the one before, and try its
		// shorter prefixes (its end is now dead).
		if top == floor {
			return 0, false, false
		}
		dead[pos>>6] |= 1 << (pos & 63)
		top--
		tok = ring[top&mask]
		pos -= int(info[tok].len)
	}
}
