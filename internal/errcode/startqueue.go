package errcode

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fathom-agents/fathom/messages"
)

// StartRetryEvery is how often the first start of a tenant's queue is tried again.
const StartRetryEvery = 250 * time.Millisecond

// Bounds of a StartQueue.
const (
	// MaxStartWaiters bounds each tenant's queue: a start that finds it full is refused
	// at once (the refusal, RESOURCE_EXHAUSTED with its retry delay).
	MaxStartWaiters = 1024
	// maxStartTenants bounds the tenants with waiting starts.
	maxStartTenants = 4096
)

// StartQueueObserver is told each change of a tenant's count of waiting starts
// (internal/metrics.Quota: fathom_start_queue_waiting).
type StartQueueObserver interface {
	StartWaiting(tenant string, delta int)
}

// StartQueue is a node's queues of starts that wait, for the tenant's start_queue_timeout,
// for one of the tenant's max_running_sessions to end: one queue per tenant, first come
// first served. Only the first start of a tenant's queue is tried again (every
// StartRetryEvery, and at once when Kick says a session of the tenant ended); a start of
// a tenant whose queue is not empty joins its end without being tried, so no later start
// overtakes an earlier one. A start leaves its queue when it is admitted, when its
// caller's context ends (a gone client: nothing is started for it), or when its queue
// time is up. The queues are the node's: starts through other nodes are not ordered with
// them. The zero value is not usable: NewStartQueue. It is safe for concurrent use.
type StartQueue struct {
	obs StartQueueObserver

	mu      sync.Mutex
	tenants map[string]*tenantStarts
}

// tenantStarts is one tenant's queue.
type tenantStarts struct {
	waiters []*startWaiter // in arrival order; waiters[0] is tried again
	// refusal and ms are the last refusal of a start of the tenant and its queue time:
	// what a start that joined the queue without being tried waits for, and is answered
	// with when the time is up.
	refusal error
	ms      int64
}

// startWaiter is one waiting start.
type startWaiter struct {
	turn chan struct{} // buffer 1: try now (it became the first, or a session ended)
}

// NewStartQueue returns an empty StartQueue; obs (nil: none) is told its lengths.
func NewStartQueue(obs StartQueueObserver) *StartQueue {
	return &StartQueue{obs: obs, tenants: map[string]*tenantStarts{}}
}

// Wait runs start (one Start request to a session grain for a principal of tenant)
// and, while the grain refuses it because the tenant runs its max_running_sessions and
// the tenant has a start queue (the refusal's messages.StartQueueKey: its
// start_queue_timeout), waits in the tenant's queue and runs it again when its turn
// comes, until it is admitted, ctx ends, or the queue time has passed. It returns the
// last answer: a start still refused when the queue time is up (or ctx ended, or the
// queue is full) is answered with the refusal (RESOURCE_EXHAUSTED, with its retry
// delay). A refused start stored nothing, so running the same request again (same
// session id, same command id) is safe. A nil q waits in no queue: it runs start once.
func (q *StartQueue) Wait(ctx context.Context, tenant string, start func() error) error {
	if q == nil {
		return start()
	}
	q.mu.Lock()
	ts := q.tenants[tenant]
	tried := ts == nil || len(ts.waiters) == 0
	var err error
	if tried { // nobody waits: try at once
		q.mu.Unlock()
		err = start()
		ms, queued := startQueue(err)
		if !queued {
			return err
		}
		q.mu.Lock()
		if ts = q.tenants[tenant]; ts == nil {
			if len(q.tenants) >= maxStartTenants {
				q.mu.Unlock()
				return err
			}
			ts = &tenantStarts{}
			q.tenants[tenant] = ts
		}
		ts.refusal, ts.ms = err, ms
	}
	if len(ts.waiters) >= MaxStartWaiters {
		q.mu.Unlock()
		return ts.refusal
	}
	err = ts.refusal
	w := &startWaiter{turn: make(chan struct{}, 1)}
	ts.waiters = append(ts.waiters, w)
	deadline := time.NewTimer(time.Duration(ts.ms) * time.Millisecond)
	q.mu.Unlock()
	q.observe(tenant, 1)
	defer deadline.Stop()
	defer q.leave(tenant, w)

	// retry ticks while w is first; it is nil until w's first try.
	var retry *time.Timer
	var retryC <-chan time.Time
	if tried && q.first(tenant, w) {
		retry = time.NewTimer(StartRetryEvery)
		retryC = retry.C
	}
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return err
		case <-deadline.C:
			return err
		case <-w.turn:
		case <-retryC:
		}
		if ctx.Err() != nil { // gone while its turn came: nothing is started for it
			return err
		}
		if err = start(); Of(err) != ResourceExhausted {
			return err
		}
		q.mu.Lock()
		ts.refusal = err
		q.mu.Unlock()
		if retry == nil {
			retry = time.NewTimer(StartRetryEvery)
			retryC = retry.C
		} else {
			retry.Reset(StartRetryEvery)
		}
	}
}

// first reports whether w is the first of tenant's queue.
func (q *StartQueue) first(tenant string, w *startWaiter) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	ts := q.tenants[tenant]
	return ts != nil && len(ts.waiters) > 0 && ts.waiters[0] == w
}

// leave takes w off tenant's queue; when w was first, the next start is tried at once.
func (q *StartQueue) leave(tenant string, w *startWaiter) {
	q.mu.Lock()
	ts := q.tenants[tenant]
	i := -1
	if ts != nil {
		i = slices.Index(ts.waiters, w)
	}
	if i < 0 {
		q.mu.Unlock()
		return
	}
	ts.waiters = slices.Delete(ts.waiters, i, i+1)
	switch {
	case len(ts.waiters) == 0:
		delete(q.tenants, tenant)
	case i == 0:
		signal(ts.waiters[0].turn)
	}
	q.mu.Unlock()
	q.observe(tenant, -1)
}

// Kick tries the first start of tenant's queue at once (a session of the tenant just
// ended on this node), instead of at its next retry.
func (q *StartQueue) Kick(tenant string) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if ts := q.tenants[tenant]; ts != nil && len(ts.waiters) > 0 {
		signal(ts.waiters[0].turn)
	}
}

// Len returns how many starts of tenant wait.
func (q *StartQueue) Len(tenant string) int {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if ts := q.tenants[tenant]; ts != nil {
		return len(ts.waiters)
	}
	return 0
}

func (q *StartQueue) observe(tenant string, delta int) {
	if q.obs != nil {
		q.obs.StartWaiting(tenant, delta)
	}
}

// signal sends on a buffer-1 channel unless a signal is already pending.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// startQueue returns the start queue time (ms) of a refusal by max_running_sessions.
func startQueue(err error) (int64, bool) {
	ge, ok := Grain(err)
	if !ok || Of(err) != ResourceExhausted {
		return 0, false
	}
	ms, perr := strconv.ParseInt(ge.GetMetadata()[messages.StartQueueKey], 10, 64)
	return ms, perr == nil && ms > 0
}
