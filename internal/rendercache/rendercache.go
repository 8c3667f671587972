// Package rendercache keeps the newest renderings of immutable things (an event's frame,
// its stream results), so that a rendering many readers share is done once: the
// gateway's event and delta frames and the A2A server's stream results use it.
package rendercache

import "sync"

// Cache holds the renderings of up to its size keys, the newest ones. A key must name
// its rendering for good (what it names never changes). It is safe for concurrent use.
//
// Its index is a map under a read-write lock: a key taken by many readers (the
// subscribers of one event) is found under the read lock, a new key costs one
// insertion (and the oldest key's deletion). A sync.Map cost about three times as
// much per new key (a lookup, an insertion and a deletion in its trie, the key boxed
// into an interface, trie nodes allocated), which is the cost of every event of a
// stream with one subscriber.
type Cache[K comparable, V any] struct {
	mu      sync.RWMutex
	entries map[K]*entry[V]
	ring    []K // the keys, oldest at next once full
	n       int // keys inserted so far (the ring is full once n ≥ len(ring))
	next    int
}

type entry[V any] struct {
	once sync.Once
	v    V
	err  error
}

// New returns a cache of size keys (at least 1).
func New[K comparable, V any](size int) *Cache[K, V] {
	size = max(size, 1)
	return &Cache[K, V]{entries: make(map[K]*entry[V], size), ring: make([]K, size)}
}

// Get returns the rendering of k, made with render on first use: concurrent callers of
// one key wait for the one rendering, and an error is kept like a value. The value is
// shared: callers must treat it as read-only. A key evicted while rendered is rendered
// again by its next caller.
func (c *Cache[K, V]) Get(k K, render func() (V, error)) (V, error) {
	c.mu.RLock()
	e := c.entries[k]
	c.mu.RUnlock()
	if e == nil {
		c.mu.Lock()
		if e = c.entries[k]; e == nil {
			e = &entry[V]{}
			if c.n >= len(c.ring) {
				delete(c.entries, c.ring[c.next])
			}
			c.entries[k] = e
			c.ring[c.next] = k
			c.next = (c.next + 1) % len(c.ring)
			c.n++
		}
		c.mu.Unlock()
	}
	e.once.Do(func() { e.v, e.err = render() })
	return e.v, e.err
}
