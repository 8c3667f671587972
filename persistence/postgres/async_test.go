package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/persistence"
)

// openAsync opens a journal with n committers, closed when t ends.
func openAsync(t *testing.T, n int) *Journal {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := Open(ctx, testenv.PostgresDSN(t), Options{Committers: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j
}

// occupy makes j's only committer run a statement sleeping d: the appends submitted
// after it stay queued until it returns its error on the channel.
func occupy(t *testing.T, j *Journal, d time.Duration) chan error {
	t.Helper()
	r := &testReq{groupReq: groupReq{ctx: context.Background(), sql: fmt.Sprintf("SELECT pg_sleep(%f)", d.Seconds())}, out: make(chan error, 1)}
	r.done = r
	if err := j.group.submit(&r.groupReq); err != nil {
		t.Fatal(err)
	}
	busy := r.out
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		j.group.mu.Lock()
		n := len(j.group.queue)
		j.group.mu.Unlock()
		if n == 0 {
			return busy // taken: running
		}
		if time.Now().After(deadline) {
			t.Fatal("the committer never took the sleeping statement")
		}
	}
}

// testReq is a statement submitted to the committers by a test: its error arrives on out.
type testReq struct {
	groupReq
	out chan error
}

func (r *testReq) complete(_ pgconn.CommandTag, err error) { r.out <- err }

// outcome is one AppendIndexedAsync callback.
type outcome struct {
	last uint64
	err  error
}

// appendAsync starts an indexed append of n records and returns the channel its
// outcomes arrive on (buffered: a second call would be seen, not block).
func appendAsync(ctx context.Context, j *Journal, stream string, expected uint64, n int) chan outcome {
	out := make(chan outcome, 2)
	recs := make([]persistence.Record, n)
	for i := range recs {
		recs[i] = persistence.Record{Type: "x", Data: []byte("d")}
	}
	j.AppendIndexedAsync(ctx, stream, expected, recs, persistence.IndexEntry{SessionID: stream, Status: persistence.StatusRunning},
		func(last uint64, err error) { out <- outcome{last, err} })
	return out
}

// once waits for the one outcome on out and checks that no second one follows.
func once(t *testing.T, out chan outcome) outcome {
	t.Helper()
	var o outcome
	select {
	case o = <-out:
	case <-time.After(20 * time.Second):
		t.Fatal("no callback")
	}
	select {
	case o2 := <-out:
		t.Fatalf("a second callback: %+v after %+v", o2, o)
	case <-time.After(20 * time.Millisecond):
	}
	return o
}

// TestAsyncAppendsChainFromTheirCallbacks: many sessions each make a chain of indexed
// appends, each submitted from its predecessor's callback (on a committer's goroutine,
// as the session grain's appender does), through one committer so that they share
// batches. Every callback comes once with the append's last seq, the journal observes
// every append, and every stream holds exactly its appends, in order.
func TestAsyncAppendsChainFromTheirCallbacks(t *testing.T) {
	j := openAsync(t, 1)
	var observed atomic.Int64
	j.ObserveAppends(func(_ time.Duration, _ int, err error) {
		if err == nil {
			observed.Add(1)
		}
	})
	run := fmt.Sprintf("async-%d", time.Now().UnixNano())
	const streams, chain = 300, 5
	var calls atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, streams*chain)
	var step func(s string, i int, expected uint64)
	step = func(s string, i int, expected uint64) {
		var called atomic.Bool
		recs := []persistence.Record{{Type: "x", Data: []byte("a")}, {Type: "y", Data: []byte("b")}}
		j.AppendIndexedAsync(context.Background(), s, expected, recs, persistence.IndexEntry{SessionID: s, Status: persistence.StatusRunning},
			func(last uint64, err error) {
				calls.Add(1)
				if called.Swap(true) {
					errs <- fmt.Errorf("%s: append %d called back twice", s, i)
					return
				}
				switch {
				case err != nil:
					errs <- fmt.Errorf("%s: append %d: %w", s, i, err)
				case last != expected+2:
					errs <- fmt.Errorf("%s: append %d ended at seq %d, want %d", s, i, last, expected+2)
				case i+1 < chain:
					step(s, i+1, last)
					return
				}
				wg.Done()
			})
	}
	wg.Add(streams)
	for i := range streams {
		step(fmt.Sprintf("%s-%d", run, i), 0, 0)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(time.Minute):
		t.Fatalf("%d of %d callbacks after a minute", calls.Load(), streams*chain)
	}
	time.Sleep(20 * time.Millisecond) // a stray second callback would show
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := calls.Load(); n != streams*chain {
		t.Fatalf("%d callbacks, want %d", n, streams*chain)
	}
	if n := observed.Load(); n != streams*chain {
		t.Fatalf("%d appends observed, want %d", n, streams*chain)
	}
	if j.group.grouped.Load() == 0 {
		t.Fatal("no append shared a batch: the test did not exercise group commit")
	}
	ctx := context.Background()
	for i := range streams {
		s := fmt.Sprintf("%s-%d", run, i)
		var n uint64
		if err := j.Load(ctx, s, 0, func(r persistence.Record) error {
			n++
			if r.Seq != n {
				return fmt.Errorf("seq %d at position %d", r.Seq, n)
			}
			return nil
		}); err != nil {
			t.Fatalf("load %s: %v", s, err)
		}
		if n != 2*chain {
			t.Fatalf("stream %s holds %d events, want %d", s, n, 2*chain)
		}
	}
}

// TestAsyncAppendConflicts: an async append at a position the stream has passed, and
// the loser of two racing for the same position, get persistence.ErrConflict; the
// winner its last seq.
func TestAsyncAppendConflicts(t *testing.T) {
	j := openAsync(t, 2)
	ctx := context.Background()
	s := fmt.Sprintf("async-conflict-%d", time.Now().UnixNano())
	if o := once(t, appendAsync(ctx, j, s, 0, 2)); o.err != nil || o.last != 2 {
		t.Fatalf("first append: %+v", o)
	}
	if o := once(t, appendAsync(ctx, j, s, 0, 1)); !errors.Is(o.err, persistence.ErrConflict) {
		t.Fatalf("stale append: %+v, want a conflict", o)
	}
	a, b := appendAsync(ctx, j, s, 2, 1), appendAsync(ctx, j, s, 2, 3)
	oa, ob := once(t, a), once(t, b)
	won := 0
	for _, o := range []outcome{oa, ob} {
		switch {
		case o.err == nil:
			won++
		case !errors.Is(o.err, persistence.ErrConflict):
			t.Fatalf("racing append: %v, want a conflict or success", o.err)
		}
	}
	if won != 1 {
		t.Fatalf("racing appends: %+v and %+v; want exactly one stored", oa, ob)
	}
	last, err := j.LastSeq(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[bool]uint64{true: 3, false: 5}[oa.err == nil]; last != want {
		t.Fatalf("stream at seq %d, want %d", last, want)
	}
}

// TestAsyncAppendCancelledWhileQueued: with the only committer busy, an append whose
// context ends while it is queued is called back at once with the context's error, once,
// and is never run.
func TestAsyncAppendCancelledWhileQueued(t *testing.T) {
	j := openAsync(t, 1)
	busy := occupy(t, j, 1500*time.Millisecond)
	s := fmt.Sprintf("async-cancel-%d", time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	out := appendAsync(ctx, j, s, 0, 1)
	timed, cancelTimed := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelTimed()
	outTimed := appendAsync(timed, j, s+"-t", 0, 1)
	time.Sleep(100 * time.Millisecond)
	began := time.Now()
	cancel()
	o := once(t, out)
	if !errors.Is(o.err, context.Canceled) {
		t.Fatalf("cancelled append: %+v, want context.Canceled", o)
	}
	if d := time.Since(began); d > time.Second {
		t.Fatalf("the cancelled append was called back after %s", d)
	}
	if o := once(t, outTimed); !errors.Is(o.err, context.DeadlineExceeded) {
		t.Fatalf("timed-out append: %+v, want context.DeadlineExceeded", o)
	}
	select {
	case err := <-busy:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the sleeping statement never returned")
	}
	// The committer is free: a later append goes through, and the cancelled ones were
	// skipped, not run late.
	if o := once(t, appendAsync(context.Background(), j, s+"-after", 0, 1)); o.err != nil {
		t.Fatalf("append after the cancellations: %v", o.err)
	}
	for _, stream := range []string{s, s + "-t"} {
		if last, err := j.LastSeq(context.Background(), stream); err != nil || last != 0 {
			t.Fatalf("cancelled append to %s was stored: seq %d (%v)", stream, last, err)
		}
	}
}

// TestAsyncAppendErrorsComeBackLater: an append refused before it is queued (an invalid
// entry, a closed journal) is called back with its error on another goroutine: a
// callback that takes a lock the caller holds around the call does not deadlock.
func TestAsyncAppendErrorsComeBackLater(t *testing.T) {
	j := openAsync(t, 1)
	var mu sync.Mutex
	call := func(s string, entry persistence.IndexEntry) error {
		out := make(chan error, 2)
		mu.Lock()
		j.AppendIndexedAsync(context.Background(), s, 0, []persistence.Record{{Type: "x"}}, entry, func(_ uint64, err error) {
			mu.Lock()
			defer mu.Unlock()
			out <- err
		})
		mu.Unlock()
		select {
		case err := <-out:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("no callback")
			return nil
		}
	}
	if err := call("s", persistence.IndexEntry{SessionID: "other", Status: persistence.StatusRunning}); !errors.Is(err, persistence.ErrInvalid) {
		t.Fatalf("entry of another session: %v, want ErrInvalid", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := call("s", persistence.IndexEntry{SessionID: "s", Status: persistence.StatusRunning}); !errors.Is(err, persistence.ErrClosed) {
		t.Fatalf("append after close: %v, want ErrClosed", err)
	}
}

// TestCloseAnswersQueuedAppends: appends still queued when the journal closes are called
// back with an error, once each.
func TestCloseAnswersQueuedAppends(t *testing.T) {
	j := openAsync(t, 1)
	busy := occupy(t, j, 500*time.Millisecond)
	s := fmt.Sprintf("async-close-%d", time.Now().UnixNano())
	outs := make([]chan outcome, 5)
	for i := range outs {
		outs[i] = appendAsync(context.Background(), j, fmt.Sprintf("%s-%d", s, i), 0, 1)
	}
	time.Sleep(100 * time.Millisecond)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for i, out := range outs {
		o := once(t, out)
		if !errors.Is(o.err, errClosedCommitters) {
			t.Fatalf("append %d queued at close: %v, want the journal closed", i, o.err)
		}
	}
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
}
