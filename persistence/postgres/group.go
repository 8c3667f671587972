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
// them instead of one each. A fixed set of committers takes appends from a bounded queue;
// a committer that finds more appends waiting takes up to maxGroup of them at once, so an
// append on an idle journal goes out alone at once (no timer, no added latency) and
// batches form only while every committer is busy, which is exactly when they pay.
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
	done chan groupRes // buffered: the committer never blocks on a caller that left
}

type groupRes struct {
	tag pgconn.CommandTag
	err error
}

// committers owns the group-commit goroutines of a journal.
type committers struct {
	pool *pgxpool.Pool
	reqs chan *groupReq
	stop chan struct{}
	wg   sync.WaitGroup
	// grouped counts the appends committed in batches of more than one, and split the
	// batches refused by the server and run one by one (tests read them).
	grouped, split atomic.Uint64
}

// startCommitters starts n committers on pool; close stops them.
func startCommitters(pool *pgxpool.Pool, n int) *committers {
	c := &committers{pool: pool, reqs: make(chan *groupReq, 4*maxGroup), stop: make(chan struct{})}
	for range n {
		c.wg.Add(1)
		go c.loop()
	}
	return c
}

// exec runs one append statement through a committer and returns its command tag. It
// waits for the outcome unless ctx ends first (the append may then still commit, exactly
// as a cancelled single statement may have).
func (c *committers) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r := &groupReq{ctx: ctx, sql: sql, args: args, done: make(chan groupRes, 1)}
	select {
	case c.reqs <- r:
	case <-ctx.Done():
		return pgconn.CommandTag{}, ctx.Err()
	case <-c.stop:
		return pgconn.CommandTag{}, errClosedCommitters
	}
	select {
	case res := <-r.done:
		return res.tag, res.err
	case <-ctx.Done():
		return pgconn.CommandTag{}, ctx.Err()
	}
}

var errClosedCommitters = errors.New("journal closed")

// close stops the committers after the batches in flight; appends still queued get an
// error.
func (c *committers) close() {
	close(c.stop)
	c.wg.Wait()
	for {
		select {
		case r := <-c.reqs:
			r.done <- groupRes{err: errClosedCommitters}
		default:
			return
		}
	}
}

func (c *committers) loop() {
	defer c.wg.Done()
	group := make([]*groupReq, 0, maxGroup)
	for {
		select {
		case <-c.stop:
			return
		case r := <-c.reqs:
			group = append(group[:0], r)
		}
	more:
		for len(group) < maxGroup {
			select {
			case r := <-c.reqs:
				group = append(group, r)
			default:
				break more
			}
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
		if err := r.ctx.Err(); err != nil {
			r.done <- groupRes{err: err}
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
			r.done <- groupRes{tag: tags[i]}
		}
	case errors.As(err, &pgErr):
		// The server rolled the whole batch back: nothing of it is stored.
		c.split.Add(1)
		for _, r := range live {
			c.runOne(r)
		}
	default:
		for _, r := range live {
			r.done <- groupRes{err: err}
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
	defer cancel()
	tag, err := c.pool.Exec(ctx, r.sql, r.args...)
	r.done <- groupRes{tag: tag, err: err}
}
