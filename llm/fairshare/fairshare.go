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
//     current virtual time, so an idle tenant saves up no credit;
//  3. then the smallest tenant name.
//
// While every tenant is backlogged, each holds slots, and gets grants of calls of equal
// length, in proportion to its weight.
//
// The rule alone, without queues or locks, is Shares: the sandbox pool (actors/sandbox)
// shares its connections by it too.
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

// Slots is a set of concurrent slots shared between tenants by weight. It is safe for
// concurrent use.
type Slots struct {
	cfg Config

	mu      sync.Mutex
	inUse   int
	waiting int
	// shares applies the fair-share rule to the tenants that hold or wait.
	shares Shares
	// queues holds each tenant's waiters, first come first; a tenant's entry goes when
	// its queue empties.
	queues map[string][]*waiter
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
	return &Slots{cfg: cfg, queues: map[string][]*waiter{}}
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
	if s.inUse < s.cfg.Slots && s.waiting == 0 {
		s.inUse++
		s.shares.Take(tenant, s.weight(tenant))
		s.mu.Unlock()
		s.granted(tenant, 0)
		return s.releaser(tenant), nil
	}
	if len(s.queues[tenant]) >= s.cfg.QueueBound {
		s.mu.Unlock()
		if o := s.cfg.Observer; o != nil {
			o.Refused(tenant)
		}
		return nil, &QueueFullError{Tenant: tenant, Bound: s.cfg.QueueBound}
	}
	w := &waiter{ready: make(chan struct{}), since: time.Now()}
	s.shares.Wait(tenant, s.weight(tenant))
	s.queues[tenant] = append(s.queues[tenant], w)
	s.waiting++
	s.dispatch() // a slot may be free (all waiters were waiting for others' releases)
	s.mu.Unlock()

	select {
	case <-w.ready:
		s.granted(tenant, time.Since(w.since))
		return s.releaser(tenant), nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if w.granted { // granted as ctx ended: hand the slot on
		s.put(tenant)
	} else {
		s.remove(tenant, w)
	}
	s.mu.Unlock()
	return nil, fmt.Errorf("wait for a call slot: %w", ctx.Err())
}

func (s *Slots) weight(tenant string) int {
	if s.cfg.Weight == nil {
		return 1
	}
	return s.cfg.Weight(tenant)
}

func (s *Slots) granted(tenant string, d time.Duration) {
	if o := s.cfg.Observer; o != nil {
		o.Granted(tenant, d)
	}
}

// put takes back a slot tenant held and hands it on. Called with s.mu held.
func (s *Slots) put(tenant string) {
	s.inUse--
	s.shares.Release(tenant)
	s.dispatch()
}

// releaser returns the release func of a slot tenant holds.
func (s *Slots) releaser(tenant string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.put(tenant)
			s.mu.Unlock()
		})
	}
}

// dispatch grants free slots to the heads of the queues of the tenants Shares picks.
// Called with s.mu held.
func (s *Slots) dispatch() {
	for s.inUse < s.cfg.Slots && s.waiting > 0 {
		tenant, _ := s.shares.Next()
		q := s.queues[tenant]
		w := q[0]
		q[0] = nil
		s.setQueue(tenant, q[1:])
		s.waiting--
		s.inUse++
		s.shares.Grant(tenant)
		w.granted = true
		close(w.ready)
	}
}

// setQueue stores tenant's queue q, dropping the entry when q is empty. Called with
// s.mu held.
func (s *Slots) setQueue(tenant string, q []*waiter) {
	if len(q) == 0 {
		delete(s.queues, tenant)
		return
	}
	s.queues[tenant] = q
}

// remove takes the ungranted waiter w out of tenant's queue. Called with s.mu held.
func (s *Slots) remove(tenant string, w *waiter) {
	q := s.queues[tenant]
	for i, qw := range q {
		if qw == w {
			s.setQueue(tenant, append(q[:i], q[i+1:]...))
			s.waiting--
			s.shares.Cancel(tenant)
			break
		}
	}
}
