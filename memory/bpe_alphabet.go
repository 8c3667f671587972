package memory

import (
	"encoding/binary"
	"math/bits"
	"sync"
)

// Counting a long piece of a small alphabet (DNA, a run of one letter or of one
// punctuation mark, a repeated multi-byte character) with an automaton of the alphabet's
// tokens, one table lookup a byte.
//
// The encoding of every prefix of a text is known from the encodings of the shorter ones
// (the appendable encoder of GitHub's bpe crate): the last token of the encoding of
// text[:i] is the one token t ending at i whose bytes follow a prefix text[:p] such that
// t forms a valid pair with the last token of the encoding of text[:p] (backtrack.go:
// validity of pairs), or that is the whole of text[:i]. Then the encoding of text[:i] is
// that of text[:p] and t, and its number of tokens, depth(i), is depth(p)+1: the count of
// the piece is depth(len(piece)). Going from i to i+1 needs only, for each p ≤ i such
// that text[p:i] is a proper prefix of a token (p = i included), the last token of the
// encoding of text[:p] and depth(p) - depth(i). That is the state of the automaton after
// text[:i], kept as a node of the trie of the tokens of the alphabet for text[p:i], and
// the token and the depth difference for each such p; a byte leads from a state to
// another and adds depth(i+1) - depth(i) to the count.
//
// A small alphabet has few tokens (o200k_base has 39 valid tokens of A, C, G and T), and
// a piece of it few distinct states (737 in a megabyte of random DNA): the states and
// their moves are made when a piece first needs them, and the walk is then a load from a
// table of a few KiB a byte, without the backtracking walk's tries of shorter tokens and
// drops, whose branches random DNA mispredicts. A periodic piece (a
// run of one letter or mark, a repeated character) is walked a period at a time until a
// state comes again, and the cycle between is counted as often as it fits. The automata
// of the last few alphabets are kept (alphaCache: one count uses an automaton at a time)
// with the states their pieces made, and everything is bounded: the trie (alphaMaxNodes,
// and what a piece may build for its length), the states (alphaMaxStates, and what a
// piece may add for its length). A piece whose alphabet has too many tokens, or that
// needs more states than it may add, is counted by backtracking (the states made stay
// for the next piece); so is every piece of an alphabet on which a step meets something
// the method does not expect (no token or two at a position: never on a consistent
// encoding).

const (
	// alphaMinPiece is the shortest piece counted by an automaton.
	alphaMinPiece = 2 * smallPiece
	// alphaMaxBytes is the most distinct bytes of a piece counted by an automaton.
	alphaMaxBytes = 16
	// alphaMaxNodes bounds the trie of an alphabet's tokens, alphaMaxToks its tokens;
	// building the trie for a piece makes at most one node per alphaBytesPerNode bytes
	// of it for each byte of its alphabet (a node costs a rank lookup per byte of the
	// alphabet).
	alphaMaxNodes     = 512
	alphaMaxToks      = 255
	alphaBytesPerNode = 2
	// alphaMaxStates bounds the states of an automaton; a piece adds at most
	// alphaMinBudget of them, or one per alphaBytesPerState bytes of it if more.
	alphaMaxStates     = 1 << 12
	alphaMinBudget     = 64
	alphaBytesPerState = 16
	// alphaMaxPeriod is the longest period of a piece walked as periodic.
	alphaMaxPeriod = 32
	// alphaCached is the number of alphabets whose automata a Tokenizer keeps.
	alphaCached = 8
	// alphaCheckEvery is the number of bytes the automaton walks between checks of done.
	alphaCheckEvery = 1 << 16
)

// alphaEntry is one p of a state (see above): the trie node of text[p:i], the dense id of
// the last token of the encoding of text[:p] (-1 for p = 0: none), depth(p) - depth(i).
type alphaEntry struct {
	node, last int16
	depth      int8
}

// alphaNode is a node of the trie of an alphabet's tokens: its token (dense id, -1 if its
// bytes are no token) and whether it is a proper prefix of a token.
type alphaNode struct {
	tok   int16
	inner bool
}

// alphaAutomaton is the automaton of one alphabet, used by one count at a time.
type alphaAutomaton struct {
	r    *bpeRanks
	b    *backRanks
	code [256]uint8 // a byte's index in the alphabet
	sym  []byte     // the alphabet
	// shift is log2 of the width of a row of child and moves (a power of two at least
	// the alphabet's size).
	shift uint
	nodes []alphaNode
	child []int16 // child[n<<shift|c]: the node of node n's bytes and sym[c], 0 if none
	// toks holds the ranks of the tokens by dense id, tokBytes their bytes.
	toks     []int32
	tokBytes []string
	// valid caches the validity of pairs of tokens by dense ids (a*len(toks)+b): 0 not
	// known yet, 1 valid, 2 not.
	valid []uint8
	// states holds each state's entries (state s at states[s-1]), index the state of each
	// key (alphaKey), moves the move of state s on byte code c at s<<shift|c: the next
	// state <<8 | the depth difference as a byte, 0 if not made yet.
	states [][]alphaEntry
	index  map[string]int32
	moves  []int32
	key    []byte
	// start is the state of the empty text (0 until made); budget the number of states
	// beyond which the current count stops adding (and is done by backtracking); full is
	// set when the states reach maxStates (alphaMaxStates: they are then dropped, to be
	// made again by the next pieces); failed is set once the automaton cannot be used:
	// too many tokens, or a step without exactly one token (never on a consistent
	// encoding).
	start             int32
	budget, maxStates int
	full, failed      bool
}

// countAlphabet counts piece with an automaton of its alphabet, taken from r's cache
// (and put back after) or built. ok is false if done was closed first (n is then
// meaningless); handled is false if the piece is not one for an automaton (its alphabet,
// or the automaton, too large): nothing was counted.
func (b *backRanks) countAlphabet(done <-chan struct{}, piece string, r *bpeRanks) (n int, ok, handled bool) {
	// The alphabet of a periodic piece is that of its period.
	p, scan := period(piece), piece
	if p > 0 {
		scan = piece[:p]
	}
	sym, fits := alphabetOf(scan)
	if !fits {
		return 0, true, false
	}
	a := r.alphas.take(string(sym))
	if a == nil {
		a = &alphaAutomaton{r: r, b: b, maxStates: alphaMaxStates}
		a.setAlphabet(sym)
		if !a.buildTrie(len(piece)) {
			if a.failed {
				r.alphas.put(a)
			}
			return 0, true, false
		}
		a.index = map[string]int32{}
		a.moves = make([]int32, 1<<a.shift) // state 0: none
	}
	defer r.alphas.put(a)
	if a.failed {
		return 0, true, false
	}
	// The states this piece may add: each costs a microsecond or so and some checks of
	// pairs; unbounded, a piece of an alphabet with many states would cost far more than
	// its backtracking walk.
	a.budget = min(a.maxStates, len(a.states)+max(alphaMinBudget, len(piece)/alphaBytesPerState))
	if a.start == 0 {
		if a.start = a.intern([]alphaEntry{{node: 0, last: -1}}); a.start == 0 {
			return 0, true, false
		}
	}
	if p > 0 {
		n, ok, handled = a.walkPeriodic(done, piece, p)
	} else {
		n, ok, handled = a.walk(done, piece)
	}
	if a.full {
		a.dropStates()
	}
	return n, ok, handled
}

// dropStates forgets the automaton's states (not its trie and pairs).
func (a *alphaAutomaton) dropStates() {
	a.states, a.start, a.full = nil, 0, false
	clear(a.index)
	a.moves = a.moves[:1<<a.shift]
	clear(a.moves)
}

// walk counts piece from the automaton's start.
func (a *alphaAutomaton) walk(done <-chan struct{}, piece string) (n int, ok, handled bool) {
	st := a.start
	code, moves, shift := &a.code, a.moves, a.shift
	for at := 0; at < len(piece); {
		if at > 0 && stopped(done) {
			return n, false, true
		}
		end := min(len(piece), at+alphaCheckEvery)
		for i := at; i < end; i++ {
			m := moves[int(st)<<shift|int(code[piece[i]])]
			if m == 0 {
				if m = a.move(st, code[piece[i]]); m == 0 {
					return 0, true, false
				}
				moves = a.moves
			}
			st = m >> 8
			n += int(int8(m))
		}
		at = end
	}
	return n, true, true
}

// walkPeriodic is walk for a piece of period p (piece[i] == piece[i+p]): the state at
// the start of each period is remembered, and once one comes again the walk between
// the two is the same as often as it fits in the rest of the piece, counted at once.
func (a *alphaAutomaton) walkPeriodic(done <-chan struct{}, piece string, p int) (n int, ok, handled bool) {
	// at[s] is one more than the start of the period the walk began in state s, and
	// count[s] the count there.
	at := make([]int, len(a.states)+1)
	count := make([]int, len(a.states)+1)
	st := a.start
	for i := 0; i < len(piece); i++ {
		if i%p == 0 {
			if int(st) < len(at) && at[st] > 0 {
				cycle, gain := i-(at[st]-1), n-count[st]
				reps := (len(piece) - i) / cycle
				i, n = i+reps*cycle, n+reps*gain
				clear(at) // the rest is shorter than a cycle
				if i == len(piece) {
					break
				}
			}
			if int(st) < len(at) {
				at[st], count[st] = i+1, n
			}
			if i%alphaCheckEvery < p && i > 0 && stopped(done) {
				return n, false, true
			}
		}
		c := a.code[piece[i]]
		m := a.moves[int(st)<<a.shift|int(c)]
		if m == 0 {
			if m = a.move(st, c); m == 0 {
				return 0, true, false
			}
			for len(at) <= len(a.states) {
				at, count = append(at, 0), append(count, 0)
			}
		}
		st = m >> 8
		n += int(int8(m))
	}
	return n, true, true
}

// period returns the least p ≤ alphaMaxPeriod such that piece[i] == piece[i+p] for every
// i, or 0 if none.
func period(piece string) int {
	for p := 1; p <= alphaMaxPeriod && 2*p <= len(piece); p++ {
		if piece[p:2*p] == piece[:p] && piece[p:] == piece[:len(piece)-p] {
			return p
		}
	}
	return 0
}

// alphabetOf returns the distinct bytes of piece, ascending, and false if there are more
// than alphaMaxBytes. It marks the bytes seen a block at a time, without a branch per
// byte, and counts them after each block.
func alphabetOf(piece string) ([]byte, bool) {
	var seen [256]bool
	for at := 0; at < len(piece); at += alphaScanBlock {
		for _, c := range []byte(piece[at:min(len(piece), at+alphaScanBlock)]) {
			seen[c] = true
		}
		n := 0
		for _, s := range seen {
			if s {
				n++
			}
		}
		if n > alphaMaxBytes {
			return nil, false
		}
	}
	var sym []byte
	for c, s := range seen {
		if s {
			sym = append(sym, byte(c))
		}
	}
	return sym, true
}

// alphaScanBlock is the number of bytes alphabetOf marks between counts.
const alphaScanBlock = 4 << 10

// setAlphabet readies a new automaton for the bytes sym (ascending).
func (a *alphaAutomaton) setAlphabet(sym []byte) {
	a.sym = sym
	for i, c := range sym {
		a.code[c] = uint8(i)
	}
	a.shift = uint(bits.Len(uint(len(sym) - 1)))
}

// alphaCache keeps the automata of the last alphabets counted (at most alphaCached), each
// with the states its pieces made: an automaton is taken out while a count uses it, so
// that it has one user (two counts of one alphabet at once build one each).
type alphaCache struct {
	mu sync.Mutex
	m  map[string]*alphaAutomaton
}

// take removes and returns the automaton of alphabet, nil if none.
func (c *alphaCache) take(alphabet string) *alphaAutomaton {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.m[alphabet]
	delete(c.m, alphabet)
	return a
}

// put keeps a (replacing the automaton of its alphabet, and another if the cache is
// full).
func (c *alphaCache) put(a *alphaAutomaton) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*alphaAutomaton{}
	}
	if len(c.m) >= alphaCached {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[string(a.sym)] = a
}

// buildTrie builds the trie of the valid tokens whose bytes are all of the alphabet,
// false if it has more than alphaMaxNodes nodes or alphaMaxToks tokens (failed is then
// set) or than a piece of size bytes may build. Strings are extended while
// backRanks.properSeen says they may be a proper prefix of a token, and the nodes that
// lead to no token are dropped.
func (a *alphaAutomaton) buildTrie(size int) bool {
	budget := size / (alphaBytesPerNode * len(a.sym))
	w := 1 << a.shift
	type item struct {
		s string
		h uint64
	}
	items := []item{{}}
	a.nodes = []alphaNode{{tok: -1}}
	a.child = make([]int16, w)
	for n := 0; n < len(items); n++ {
		it := items[n]
		if n > 0 && !seen(a.b.properSeen, it.h) {
			continue
		}
		if len(it.s) >= a.b.maxLen {
			continue
		}
		for c, sym := range a.sym {
			s := it.s + string([]byte{sym})
			h := fnvStep(it.h, sym)
			if n == 0 {
				h = fnvStep(fnvOffset, sym)
			}
			tok := int16(-1)
			if rk := a.r.rankOf(s); rk != noRank && a.b.info[rk].len != 0 {
				if len(a.toks) == alphaMaxToks {
					a.failed = true
					return false
				}
				tok = int16(len(a.toks))
				a.toks = append(a.toks, rk)
				a.tokBytes = append(a.tokBytes, s)
			}
			if tok < 0 && !seen(a.b.properSeen, h) {
				continue
			}
			if len(a.nodes) == alphaMaxNodes {
				a.failed = true
				return false
			}
			if len(a.nodes) >= budget {
				return false
			}
			id := int16(len(a.nodes))
			a.nodes = append(a.nodes, alphaNode{tok: tok})
			a.child = append(a.child, make([]int16, w)...)
			a.child[n<<a.shift|c] = id
			items = append(items, item{s, h})
		}
	}
	// A node is inner if a token lies below it; children below which no token lies are
	// dropped (their bytes only looked like a prefix). Children come after their parent.
	any := make([]bool, len(a.nodes))
	for n := len(a.nodes) - 1; n >= 0; n-- {
		for c := range w {
			ch := a.child[n<<a.shift|c]
			if ch == 0 {
				continue
			}
			if !any[ch] {
				a.child[n<<a.shift|c] = 0
				continue
			}
			a.nodes[n].inner = true
		}
		any[n] = a.nodes[n].inner || a.nodes[n].tok >= 0
	}
	a.valid = make([]uint8, len(a.toks)*len(a.toks))
	return len(a.toks) > 0
}

// isValid reports whether tokens x and y (dense ids) form a valid pair.
func (a *alphaAutomaton) isValid(x, y int16) bool {
	v := &a.valid[int(x)*len(a.toks)+int(y)]
	if *v == 0 {
		s := a.tokBytes[x] + a.tokBytes[y]
		*v = 2
		if a.b.checkPair(s, len(a.tokBytes[x]), a.toks[x], a.toks[y], 1<<31-1, a.r, nil) {
			*v = 1
		}
	}
	return *v == 1
}

// intern returns the state of entries, made if new (0 if there would be more than
// alphaMaxStates).
func (a *alphaAutomaton) intern(entries []alphaEntry) int32 {
	k := a.key[:0]
	for _, e := range entries {
		k = binary.LittleEndian.AppendUint16(k, uint16(e.node))
		k = binary.LittleEndian.AppendUint16(k, uint16(e.last))
		k = append(k, byte(e.depth))
	}
	a.key = k
	if s, ok := a.index[string(k)]; ok {
		return s
	}
	if len(a.states) >= a.budget {
		a.full = len(a.states) >= a.maxStates
		return 0
	}
	a.states = append(a.states, entries)
	s := int32(len(a.states))
	a.index[string(k)] = s
	a.moves = append(a.moves, make([]int32, 1<<a.shift)...)
	return s
}

// move makes the move of state st on byte code c and returns it (0 if the automaton
// cannot: too many states, a depth difference out of bounds, or not exactly one token).
func (a *alphaAutomaton) move(st int32, c uint8) int32 {
	entries := a.states[st-1]
	found := -1
	var tok int16
	for x, e := range entries {
		ch := a.child[int(e.node)<<a.shift|int(c)]
		if ch == 0 {
			continue
		}
		if t := a.nodes[ch].tok; t >= 0 && (e.last < 0 || a.isValid(e.last, t)) {
			if found >= 0 {
				a.failed = true
				return 0
			}
			found, tok = x, t
		}
	}
	if found < 0 {
		a.failed = true
		return 0
	}
	delta := int(entries[found].depth) + 1
	next := []alphaEntry{{node: 0, last: tok}}
	for _, e := range entries {
		ch := a.child[int(e.node)<<a.shift|int(c)]
		if ch == 0 || !a.nodes[ch].inner {
			continue
		}
		d := int(e.depth) - delta
		if d < -100 || d > 100 {
			a.failed = true
			return 0
		}
		next = append(next, alphaEntry{node: ch, last: e.last, depth: int8(d)})
	}
	ns := a.intern(next)
	if ns == 0 {
		return 0
	}
	m := ns<<8 | int32(uint8(int8(delta)))
	a.moves[int(st)<<a.shift|int(c)] = m
	return m
}
