// Package fairshare shares a model endpoint's concurrent call slots between tenants by
// weighted fair queuing, so a tenant that floods the endpoint gets its share of the
// slots, not all of them.
//
// Slots holds N slots. A caller takes one with Acquire(ctx, tenant) and gives it back
// with the returned release func. While a slot is free and nobody waits, Acquire
// returns at once. Otherwise the caller waits in its tenant's FIFO queue, and each
// freed slot goes to the head of the queue of a backlogged tenant chosen by:
//
//  1. the smallest share of the slots held for its weight (held/weight): a tenant
//     below its share of the endpoint is served before one above it, so a light
//     tenant's call waits for the next freed slot, not behind a flood;
//  2. then the smallest virtual pass (stride scheduling): every grant advances its
//     tenant's pass by 1/weight, and a tenant that becomes backlogged starts at the
//     current virtual time, so an idle tenant saves up no credit.
//
// While every tenant is backlogged, each holds slots, and gets grants of calls of equal
// length, in proportion to its weight.
//
// Every queue is bounded (Config.QueueBound per tenant): past it, Acquire fails at once
// with a *QueueFullError (errors.Is ErrQueueFull). A waiter whose context ends leaves its
// queue; a slot granted to it in the same instant is handed on, never lost.
//
//	s := fairshare.New(fairshare.Config{Slots: 50, Weight: weights})
//	release, err := s.Acquire(ctx, tenant)
//	if err != nil {
//		return err
//	}
//	defer release()
package fairshare

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultQueueBound is Config.QueueBound's default: callers of one tenant that may
// wait for a slot at once.
const DefaultQueueBound = 10_000

// ErrQueueFull is the class of the error Acquire returns when the tenant's queue is at
// its bound (see QueueFullError).
var ErrQueueFull = errors.New("fair-share queue full")

// QueueFullError is Acquire's error when the tenant already has Bound callers waiting.
type QueueFullError struct {
	// Tenant is the caller's tenant.
	Tenant string
	// Bound is the per-tenant queue bound.
	Bound int
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("fair-share queue of tenant %q full (%d callers waiting)", e.Tenant, e.Bound)
}

// Is makes errors.Is(err, ErrQueueFull) true.
func (e *QueueFullError) Is(target error) bool { return target == ErrQueueFull }

// Observer hears about grants and refusals (metrics). Its methods are called outside
// the Slots' lock and must not block.
type Observer interface {
	// Granted is called once per slot granted to tenant, after waiting d (0 when the
	// slot was free).
	Granted(tenant string, d time.Duration)
	// Refused is called when tenant's queue was full.
	Refused(tenant string)
}

// Config configures Slots.
type Config struct {
	// Slots is the number of concurrent slots; at least 1.
	Slots int
	// QueueBound is the most callers of one tenant that wait at once. Default
	// DefaultQueueBound.
	QueueBound int
	// Weight returns a tenant's weight (at least 1; smaller values count as 1). Nil
	// gives every tenant weight 1.
	Weight func(tenant string) int
	// Observer, when set, hears about every grant and refusal.
	Observer Observer
}

// Validate reports a configuration New cannot use.
func (c Config) Validate() error {
	if c.Slots < 1 {
		return fmt.Errorf("fair-share slots %d: want at least 1", c.Slots)
	}
	if c.QueueBound < 0 {
		return fmt.Errorf("fair-share queue bound %d: want 0 (default) or more", c.QueueBound)
	}
	return nil
}

// stride is one grant's pass for weight 1: a pass grows by stride/weight per grant.
const stride = 1 << 20

// Slots is a set of concurrent slots shared between tenants by weight. It is safe for
// concurrent use.
type Slots struct {
	cfg Config

	mu      sync.Mutex
	inUse   int
	waiting int
	// vtime is the pass of the last grant from a queue: a newly backlogged tenant starts
	// there.
	vtime uint64
	// tenants holds the tenants with waiters or slots held; a tenant leaves when it has
	// neither, so the map is bounded by Slots plus the waiters.
	tenants map[string]*tenantQueue
}

type tenantQueue struct {
	name   string
	weight uint64
	// pass is the virtual time of the tenant's next grant.
	pass  uint64
	held  int // slots the tenant holds
	queue []*waiter
}

type waiter struct {
	ready   chan struct{} // closed when granted
	granted bool          // under Slots.mu
	since   time.Time
}

// New returns Slots configured by cfg; it panics on a configuration Validate refuses.
func New(cfg Config) *Slots {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if cfg.QueueBound == 0 {
		cfg.QueueBound = DefaultQueueBound
	}
	return &Slots{cfg: cfg, tenants: map[string]*tenantQueue{}}
}

// Stats is a snapshot of the slots.
type Stats struct {
	// Slots is the number of slots; InUse how many are held; Waiting the callers queued.
	Slots, InUse, Waiting int
}

// Stats returns the slots' current use.
func (s *Slots) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Slots: s.cfg.Slots, InUse: s.inUse, Waiting: s.waiting}
}

// Acquire takes a slot for tenant, waiting in tenant's queue while none is free or
// others wait. It returns the func that gives the slot back (call it exactly once;
// later calls do nothing), or ctx's error (wrapped) when ctx ends first, or a
// *QueueFullError when tenant's queue is at its bound.
func (s *Slots) Acquire(ctx context.Context, tenant string) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("wait for a call slot: %w", err)
	}
	s.mu.Lock()
	t := s.tenants[tenant]
	if s.inUse < s.cfg.Slots && s.waiting == 0 {
		if t == nil {
			t = s.newTenant(tenant)
		}
		s.grant(t)
		s.mu.Unlock()
		s.granted(tenant, 0)
		return s.releaser(t), nil
	}
	if t != nil && len(t.queue) >= s.cfg.QueueBound {
		s.mu.Unlock()
		if o := s.cfg.Observer; o != nil {
			o.Refused(tenant)
		}
		return nil, &QueueFullError{Tenant: tenant, Bound: s.cfg.QueueBound}
	}
	if t == nil {
		t = s.newTenant(tenant)
	}
	if len(t.queue) == 0 { // newly backlogged: no credit saved while idle
		t.pass = max(t.pass, s.vtime)
	}
	w := &waiter{ready: make(chan struct{}), since: time.Now()}
	t.queue = append(t.queue, w)
	s.waiting++
	s.dispatch() // a slot may be free (all waiters were waiting for others' releases)
	s.mu.Unlock()

	select {
	case <-w.ready:
		s.granted(tenant, time.Since(w.since))
		return s.releaser(t), nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if w.granted { // granted as ctx ended: hand the slot on
		s.put(t)
	} else {
		s.remove(t, w)
	}
	s.mu.Unlock()
	return nil, fmt.Errorf("wait for a call slot: %w", ctx.Err())
}

func (s *Slots) weight(tenant string) int {
	if s.cfg.Weight == nil {
		return 1
	}
	return max(1, s.cfg.Weight(tenant))
}

func (s *Slots) granted(tenant string, d time.Duration) {
	if o := s.cfg.Observer; o != nil {
		o.Granted(tenant, d)
	}
}

// newTenant adds tenant's entry, starting at the current virtual time. Called with s.mu
// held.
func (s *Slots) newTenant(tenant string) *tenantQueue {
	t := &tenantQueue{name: tenant, weight: uint64(s.weight(tenant)), pass: s.vtime}
	s.tenants[tenant] = t
	return t
}

// grant gives t a slot and advances its pass. Called with s.mu held.
func (s *Slots) grant(t *tenantQueue) {
	s.inUse++
	t.held++
	t.pass += stride / t.weight
}

// put takes back a slot t held and hands it on. Called with s.mu held.
func (s *Slots) put(t *tenantQueue) {
	s.inUse--
	t.held--
	s.forget(t)
	s.dispatch()
}

// forget drops t's entry once it neither holds nor waits for a slot. Called with s.mu
// held.
func (s *Slots) forget(t *tenantQueue) {
	if t.held == 0 && len(t.queue) == 0 && s.tenants[t.name] == t {
		delete(s.tenants, t.name)
	}
}

// releaser returns the release func of a slot t holds.
func (s *Slots) releaser(t *tenantQueue) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.put(t)
			s.mu.Unlock()
		})
	}
}

// dispatch grants free slots to the queues' heads, smallest pass first. Called with
// s.mu held.
func (s *Slots) dispatch() {
	for s.inUse < s.cfg.Slots && s.waiting > 0 {
		var next *tenantQueue
		for _, t := range s.tenants {
			if len(t.queue) == 0 {
				continue
			}
			if next == nil || t.before(next) {
				next = t
			}
		}
		w := next.queue[0]
		next.queue[0] = nil
		next.queue = next.queue[1:]
		s.waiting--
		s.vtime = next.pass
		s.grant(next)
		w.granted = true
		close(w.ready)
	}
}

// before reports whether t's next waiter goes before u's: the tenant holding the
// smaller share of slots for its weight first (held/weight), then the smaller pass,
// then the smaller name.
func (t *tenantQueue) before(u *tenantQueue) bool {
	a, b := uint64(t.held)*u.weight, uint64(u.held)*t.weight
	if a != b {
		return a < b
	}
	if t.pass != u.pass {
		return t.pass < u.pass
	}
	return t.name < u.name
}

// remove takes the ungranted waiter w out of t's queue. Called with s.mu held.
func (s *Slots) remove(t *tenantQueue, w *waiter) {
	for i, q := range t.queue {
		if q == w {
			t.queue = append(t.queue[:i], t.queue[i+1:]...)
			s.waiting--
			break
		}
	}
	s.forget(t)
}
