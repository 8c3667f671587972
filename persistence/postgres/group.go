package postgres

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Group commit across streams.
//
// Appends of different sessions arriving together are sent as one pipelined batch, which
// PostgreSQL runs as one implicit transaction: one round trip and one WAL flush for all of
// them instead of one each. A fixed set of committers takes appends from a queue; a
// committer that finds more appends waiting takes up to maxGroup of them at once, so an
// append on an idle journal goes out alone at once (no timer, no added latency) and
// batches form only while every committer is busy, which is exactly when they pay.
//
// An append is a request with a completion callback (submit): the committer that ran it
// calls back, and nobody waits on it. The session grains' appends come this way
// (AppendIndexedAsync): a session with an append in flight has no goroutine of its own
// parked on the commit, and its callback may submit the session's next append from the
// committer's goroutine (the session appender hands it to a goroutine of its own). So
// submitting never blocks: the queue is a mutex-guarded slice
// with a wake signal (a condition variable), not a bounded channel whose full buffer
// would park the submitter (and deadlock a committer submitting from a callback). It
// needs no bound of its own: a session grain has at most one append in flight (its
// appender makes them one after the other), so the queue holds at most one append per
// active grain, plus one per goroutine blocked in a synchronous append (exec).
//
// The append statements never fail on a racing append (ON CONFLICT DO NOTHING: a lost
// race inserts nothing and is reported as a conflict by its row count), so one append's
// conflict never aborts the others. A batch that the server refuses as a whole (a
// statement error, a deadlock between two racing activations) committed nothing: each of
// its appends is then run alone, so the error reaches only the append that caused it. A
// batch whose outcome is unknown (the connection broke) reports that error to all its
// appends, as a single append's would.

// maxGroup bounds the appends of one batch.
const maxGroup = 64

// groupTimeout bounds one batch (or one lone append) on the server.
const groupTimeout = 30 * time.Second

// groupReq is one append waiting for a committer.
type groupReq struct {
	ctx  context.Context
	sql  string
	args []any
	// done gets the outcome, exactly once (finish): from the committer that ran the
	// statement, from close, or from the context.AfterFunc of ctx when ctx ends first.
	done    completer
	claimed atomic.Bool
	stop    func() bool // stops the AfterFunc of ctx; nil without one
}

// completer is told the outcome of a groupReq (a struct embedding it, so that an append
// costs one allocation, not a request and a closure). complete must not block: it runs
// on a committer, and may submit.
type completer interface {
	complete(tag pgconn.CommandTag, err error)
}

// finish tells r.done the outcome unless it was told already, and releases the
// AfterFunc watching r.ctx.
func (r *groupReq) finish(tag pgconn.CommandTag, err error) {
	if !r.claimed.CompareAndSwap(false, true) {
		return
	}
	if r.stop != nil {
		r.stop()
	}
	r.done.complete(tag, err)
}

// cancelled is the AfterFunc of r.ctx: the outcome is r.ctx's error, unless the
// committer told it already. It does not read r.stop, which may not be set yet.
func (r *groupReq) cancelled() {
	if r.claimed.CompareAndSwap(false, true) {
		r.done.complete(pgconn.CommandTag{}, r.ctx.Err())
	}
}

// committers owns the group-commit goroutines of a journal.
type committers struct {
	pool *pgxpool.Pool

	mu     sync.Mutex
	wake   sync.Cond   // on mu: signalled when queue grows or closed is set
	queue  []*groupReq // FIFO
	closed bool

	wg sync.WaitGroup
	// grouped counts the appends committed in batches of more than one, and split the
	// batches refused by the server and run one by one (tests read them).
	grouped, split atomic.Uint64
}

// startCommitters starts n committers on pool; close stops them.
func startCommitters(pool *pgxpool.Pool, n int) *committers {
	c := &committers{pool: pool}
	c.wake.L = &c.mu
	for range n {
		c.wg.Add(1)
		go c.loop()
	}
	return c
}

var errClosedCommitters = errors.New("journal closed")

// submit queues r (its ctx, sql, args and done set); r.done is told its command tag or
// error, exactly once, on a committer's goroutine (or on a goroutine of
// context.AfterFunc when r.ctx ends first: r.done is then told r.ctx.Err() at once,
// whether the append was still queued or running; it may still commit, exactly as a
// cancelled single statement may have). submit never blocks and never tells r.done
// itself: it returns errClosedCommitters instead, r.done not told, once close began.
func (c *committers) submit(r *groupReq) error {
	if r.ctx.Done() != nil {
		// Set before r is queued, so that whoever takes r sees it.
		r.stop = context.AfterFunc(r.ctx, r.cancelled)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		if !r.claimed.CompareAndSwap(false, true) {
			return nil // r.ctx ended already: its AfterFunc tells r.done
		}
		if r.stop != nil {
			r.stop()
		}
		return errClosedCommitters
	}
	c.queue = append(c.queue, r)
	c.wake.Signal()
	c.mu.Unlock()
	return nil
}

// waiter is a synchronous append's request: exec waits for ready.
type waiter struct {
	groupReq
	tag   pgconn.CommandTag
	err   error
	ready chan struct{}
}

func (w *waiter) complete(tag pgconn.CommandTag, err error) {
	w.tag, w.err = tag, err
	close(w.ready)
}

// exec runs one append statement through a committer and returns its command tag. It
// waits for the outcome unless ctx ends first (the append may then still commit, exactly
// as a cancelled single statement may have).
func (c *committers) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	w := &waiter{groupReq: groupReq{ctx: ctx, sql: sql, args: args}, ready: make(chan struct{})}
	w.done = w
	if err := c.submit(&w.groupReq); err != nil {
		return pgconn.CommandTag{}, err
	}
	<-w.ready // submit watches ctx: a cancelled append's outcome comes at once
	return w.tag, w.err
}

// close stops the committers after the batches in flight; appends still queued get
// errClosedCommitters, and later submits fail with it.
func (c *committers) close() {
	c.mu.Lock()
	c.closed = true
	c.wake.Broadcast()
	c.mu.Unlock()
	c.wg.Wait()
	c.mu.Lock()
	left := c.queue
	c.queue = nil
	c.mu.Unlock()
	for _, r := range left {
		r.finish(pgconn.CommandTag{}, errClosedCommitters)
	}
}

// take waits for queued appends and moves up to maxGroup of them, oldest first, into
// group; false once close began.
func (c *committers) take(group []*groupReq) ([]*groupReq, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queue) == 0 && !c.closed {
		c.wake.Wait()
	}
	if c.closed {
		return group, false
	}
	n := min(len(c.queue), maxGroup)
	group = append(group[:0], c.queue[:n]...)
	// Slide the rest down so that the queue's array is reused, not regrown.
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	return group, true
}

func (c *committers) loop() {
	defer c.wg.Done()
	group := make([]*groupReq, 0, maxGroup)
	for {
		var ok bool
		if group, ok = c.take(group); !ok {
			return
		}
		c.run(group)
		clear(group)
	}
}

// run commits group: alone when it is one append (or all but one left), else as one
// batch, falling back to one by one when the server refused the batch.
func (c *committers) run(group []*groupReq) {
	live := group[:0]
	for _, r := range group {
		if r.claimed.Load() {
			continue // its ctx ended while queued: answered already
		}
		if err := r.ctx.Err(); err != nil {
			r.finish(pgconn.CommandTag{}, err)
			continue
		}
		live = append(live, r)
	}
	switch len(live) {
	case 0:
		return
	case 1:
		c.runOne(live[0])
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	b := &pgx.Batch{}
	for _, r := range live {
		b.Queue(r.sql, r.args...)
	}
	tags, err := c.sendBatch(ctx, b, len(live))
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		c.grouped.Add(uint64(len(live)))
		for i, r := range live {
			r.finish(tags[i], nil)
		}
	case errors.As(err, &pgErr):
		// The server rolled the whole batch back: nothing of it is stored.
		c.split.Add(1)
		for _, r := range live {
			c.runOne(r)
		}
	default:
		for _, r := range live {
			r.finish(pgconn.CommandTag{}, err)
		}
	}
}

// sendBatch sends b and reads its n results; a nil error means the implicit transaction
// committed.
func (c *committers) sendBatch(ctx context.Context, b *pgx.Batch, n int) ([]pgconn.CommandTag, error) {
	br := c.pool.SendBatch(ctx, b)
	tags := make([]pgconn.CommandTag, n)
	var first error
	for i := range n {
		tag, err := br.Exec()
		if err != nil && first == nil {
			first = err
		}
		tags[i] = tag
	}
	if err := br.Close(); err != nil && first == nil {
		first = err
	}
	return tags, first
}

func (c *committers) runOne(r *groupReq) {
	ctx, cancel := context.WithTimeout(r.ctx, groupTimeout)
	tag, err := c.pool.Exec(ctx, r.sql, r.args...)
	cancel()
	r.finish(tag, err)
}
