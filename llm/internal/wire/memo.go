package wire

import (
	"bytes"
	"hash/maphash"
	"slices"
	"sync"

	"github.com/fathom-agents/fathom/llm"
)

// Memo keeps the SDK's encoding of request parts that recur from call to call, so the
// SDK encodes each of them once instead of on every call: a session sends its tools on
// every call, and its history only grows at its end, so every call sends the previous
// call's messages again. A part is found by its hash and checked against a copy of it
// (what the memo keeps is exactly what the SDK encoded for an equal part).
//
// It is bounded: two generations of up to limit bytes each (encodings and the parts'
// text). When the newer one is full it becomes the older one and the older one is
// dropped; a part found in the older one moves to the newer one. A Memo is safe for
// concurrent use.
type Memo[T, V any] struct {
	limit int
	seed  maphash.Seed
	hash  func(seed maphash.Seed, part *T) uint64
	equal func(a, b *T) bool
	clone func(part *T) (T, int)

	mu       sync.Mutex
	cur, old map[uint64]*memoEntry[T, V]
	size     int // bytes in cur

	// seen, when admitting (AdmitOnSecondSighting), are the sums of the parts put
	// once and not kept: two generations of up to seenLimit sums.
	seenLimit        int
	seenCur, seenOld map[uint64]struct{}
	// held, when set (HoldFirstSightings), keeps the parts put once with their
	// encodings, for a while, so that a second sighting soon after finds them.
	held *Memo[T, V]
}

// AdmitOnSecondSighting makes Put keep a part only when a part of the same sum was put
// before (within the last n to 2n sums put and not kept), and returns m. A part sent
// once (a session's planning prompt: its goal makes it unique, and it is never sent
// again) then costs the memo nothing, and the room is for the parts that recur (a
// session's history, sent again on every call) at the price of encoding each of those
// once more. Call it before m is used.
func (m *Memo[T, V]) AdmitOnSecondSighting(n int) *Memo[T, V] {
	m.seenLimit, m.seenCur = n, make(map[uint64]struct{})
	return m
}

// HoldFirstSightings makes a memo that admits on the second sighting keep the parts it
// does not admit, with their encodings, in a memo of their own of up to limit bytes
// per generation, and returns m. Get finds such a part there and keeps it from then on
// (its second sighting), so a part that recurs soon after its first sighting (a
// session's newest messages, sent again with its next call) is encoded once, not
// twice; one sent once leaves the held memo within two of its generations. A part
// sighted again after that is admitted as without it. Call it after
// AdmitOnSecondSighting, before m is used.
func (m *Memo[T, V]) HoldFirstSightings(limit int) *Memo[T, V] {
	m.held = NewMemo[T, V](limit, m.hash, m.equal, m.clone)
	m.held.seed = m.seed // the same sums
	return m
}

// admit says whether Put keeps the part of sum (m.mu held): always, unless m admits on
// the second sighting and sum is new, which it then records.
func (m *Memo[T, V]) admit(sum uint64) bool {
	if m.seenLimit == 0 {
		return true
	}
	if _, ok := m.seenCur[sum]; ok {
		delete(m.seenCur, sum)
		return true
	}
	if _, ok := m.seenOld[sum]; ok {
		delete(m.seenOld, sum)
		return true
	}
	if len(m.seenCur) >= m.seenLimit {
		m.seenOld, m.seenCur = m.seenCur, make(map[uint64]struct{}, len(m.seenCur))
	}
	m.seenCur[sum] = struct{}{}
	return false
}

type memoEntry[T, V any] struct {
	part T
	enc  V
	n    int // bytes held
}

// NewMemo returns a memo of up to limit bytes per generation. hash sums the part's
// encoded fields (Mix), equal compares them, and clone copies a part for keeping (no
// slice shared with the caller) and says how many bytes it holds.
func NewMemo[T, V any](limit int, hash func(seed maphash.Seed, part *T) uint64, equal func(a, b *T) bool, clone func(part *T) (T, int)) *Memo[T, V] {
	return &Memo[T, V]{limit: limit, seed: maphash.MakeSeed(), hash: hash, equal: equal, clone: clone, cur: map[uint64]*memoEntry[T, V]{}}
}

// Sum is part's hash, for Get and Put.
func (m *Memo[T, V]) Sum(part *T) uint64 { return m.hash(m.seed, part) }

// Mix adds field s to the hash sum (seed is the memo's), so that a hash function can
// sum a part's fields one by one.
func Mix(sum uint64, seed maphash.Seed, s string) uint64 {
	return (sum^maphash.String(seed, s))*0x9e3779b97f4a7c15 + uint64(len(s))
}

// Get returns the encoding kept for a part equal to part (sum is Sum(part)). What it
// returns is shared: never modify it.
func (m *Memo[T, V]) Get(sum uint64, part *T) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.cur[sum]; ok && m.equal(&e.part, part) {
		return e.enc, true
	}
	e, ok := m.old[sum]
	if ok && m.equal(&e.part, part) {
		delete(m.old, sum)
	} else if e = m.held.take(sum, part); e != nil {
		// Its second sighting: admitted, the sum it was seen by forgotten.
		delete(m.seenCur, sum)
		delete(m.seenOld, sum)
	} else {
		var zero V
		return zero, false
	}
	m.add(sum, e)
	return e.enc, true
}

// take removes and returns the entry of a part equal to part (sum is Sum(part)), or nil;
// m may be nil.
func (m *Memo[T, V]) take(sum uint64, part *T) *memoEntry[T, V] {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.cur[sum]; ok && m.equal(&e.part, part) {
		delete(m.cur, sum)
		m.size -= e.n
		return e
	}
	if e, ok := m.old[sum]; ok && m.equal(&e.part, part) {
		delete(m.old, sum)
		return e
	}
	return nil
}

// Put keeps enc, of size bytes, as the encoding of part (sum is Sum(part)); the memo
// owns enc from now on. A part larger than a generation is not kept, nor, when m admits
// on the second sighting, a part whose sum was not put before (held instead, when m
// holds first sightings).
func (m *Memo[T, V]) Put(sum uint64, part *T, enc V, size int) {
	m.mu.Lock()
	admit := m.admit(sum)
	m.mu.Unlock()
	if !admit && m.held == nil {
		return
	}
	kept, n := m.clone(part)
	n += size
	if !admit {
		m = m.held
	}
	if n > m.limit {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.add(sum, &memoEntry[T, V]{part: kept, enc: enc, n: n})
}

// add puts e in the newer generation (m.mu held), turning it over when full.
func (m *Memo[T, V]) add(sum uint64, e *memoEntry[T, V]) {
	if m.size+e.n > m.limit {
		m.old, m.cur, m.size = m.cur, make(map[uint64]*memoEntry[T, V], len(m.cur)), 0
	}
	if prev, dup := m.cur[sum]; dup {
		m.size -= prev.n
	}
	m.size += e.n
	m.cur[sum] = e
}

// Len is how many parts the memo keeps (both generations).
func (m *Memo[T, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.cur) + len(m.old)
}

// Held is how many parts put once the memo holds (HoldFirstSightings), and the bytes
// they take (encodings and the parts' text).
func (m *Memo[T, V]) Held() (parts, bytes int) {
	if m.held == nil {
		return 0, 0
	}
	m.held.mu.Lock()
	defer m.held.mu.Unlock()
	for _, gen := range []map[uint64]*memoEntry[T, V]{m.held.cur, m.held.old} {
		for _, e := range gen {
			parts, bytes = parts+1, bytes+e.n
		}
	}
	return parts, bytes
}

// MessageMemo returns a memo of message encodings. withThinking says whether the
// encoding carries the messages' thinking blocks (Anthropic's does, OpenAI's not).
func MessageMemo[V any](limit int, withThinking bool) *Memo[llm.Message, V] {
	return NewMemo[llm.Message, V](limit,
		func(seed maphash.Seed, m *llm.Message) uint64 {
			h := Mix(0, seed, m.Role)
			h = Mix(h, seed, m.Content)
			h = Mix(h, seed, m.ToolCallID)
			for _, tc := range m.ToolCalls {
				h = Mix(h, seed, tc.ID)
				h = Mix(h, seed, tc.Name)
				h = Mix(h, seed, tc.Arguments)
			}
			if withThinking {
				for _, b := range m.Thinking {
					h = Mix(h, seed, b.Thinking)
					h = Mix(h, seed, b.Signature)
					h = Mix(h, seed, b.RedactedData)
				}
			}
			return h
		},
		func(a, b *llm.Message) bool {
			return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID &&
				slices.Equal(a.ToolCalls, b.ToolCalls) && (!withThinking || slices.Equal(a.Thinking, b.Thinking))
		},
		func(m *llm.Message) (llm.Message, int) {
			k := llm.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, ToolCalls: slices.Clone(m.ToolCalls)}
			n := len(m.Role) + len(m.Content) + len(m.ToolCallID)
			for _, tc := range m.ToolCalls {
				n += len(tc.ID) + len(tc.Name) + len(tc.Arguments)
			}
			if withThinking {
				k.Thinking = slices.Clone(m.Thinking)
				for _, b := range m.Thinking {
					n += len(b.Thinking) + len(b.Signature) + len(b.RedactedData)
				}
			}
			return k, n
		})
}

// ToolMemo returns a memo of tool encodings.
func ToolMemo[V any](limit int) *Memo[llm.ToolSpec, V] {
	return NewMemo[llm.ToolSpec, V](limit,
		func(seed maphash.Seed, t *llm.ToolSpec) uint64 {
			h := Mix(0, seed, t.Name)
			h = Mix(h, seed, t.Description)
			return (h ^ maphash.Bytes(seed, t.Parameters)) * 0x9e3779b97f4a7c15
		},
		func(a, b *llm.ToolSpec) bool {
			return a.Name == b.Name && a.Description == b.Description && bytes.Equal(a.Parameters, b.Parameters)
		},
		func(t *llm.ToolSpec) (llm.ToolSpec, int) {
			return llm.ToolSpec{Name: t.Name, Description: t.Description, Parameters: bytes.Clone(t.Parameters)},
				len(t.Name) + len(t.Description) + len(t.Parameters)
		})
}
