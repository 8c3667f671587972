// Package rendercache keeps the newest renderings of immutable things (an event's frame,
// its stream results), so that a rendering many readers share is done once: the
// gateway's event and delta frames and the A2A server's stream results use it.
package rendercache

import "sync"

// Cache holds the renderings of up to its size keys, the newest ones. A key must name
// its rendering for good (what it names never changes). It is safe for concurrent use.
type Cache[K comparable, V any] struct {
	entries sync.Map // K -> *entry[V]

	mu   sync.Mutex
	ring []K // the keys, oldest at next once full
	n    int // keys inserted so far (the ring is full once n ≥ len(ring))
	next int
}

type entry[V any] struct {
	once sync.Once
	v    V
	err  error
}

// New returns a cache of size keys (at least 1).
func New[K comparable, V any](size int) *Cache[K, V] {
	return &Cache[K, V]{ring: make([]K, max(size, 1))}
}

// Get returns the rendering of k, made with render on first use: concurrent callers of
// one key wait for the one rendering, and an error is kept like a value. The value is
// shared: callers must treat it as read-only. A key evicted while rendered is rendered
// again by its next caller.
func (c *Cache[K, V]) Get(k K, render func() (V, error)) (V, error) {
	v, ok := c.entries.Load(k)
	if !ok {
		var loaded bool
		v, loaded = c.entries.LoadOrStore(k, &entry[V]{})
		if !loaded {
			c.mu.Lock()
			if c.n >= len(c.ring) {
				c.entries.Delete(c.ring[c.next])
			}
			c.ring[c.next] = k
			c.next = (c.next + 1) % len(c.ring)
			c.n++
			c.mu.Unlock()
		}
	}
	e := v.(*entry[V])
	e.once.Do(func() { e.v, e.err = render() })
	return e.v, e.err
}
