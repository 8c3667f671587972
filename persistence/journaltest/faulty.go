package journaltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fathom-agents/fathom/persistence"
)

// ErrDown is the error of every call to a Faulty made down with Down(nil).
var ErrDown = errors.New("journaltest: journal down (injected)")

// Faulty wraps any persistence.SessionStore for tests and injects faults on demand: it
// can be made down (every call fails), slow (every append waits first), panicking (the
// next append panics) or conflicting (the next append fails with an expected-sequence
// conflict and stores nothing); it can fail the n-th append, report each append's
// outcome, and keep the wrapped journal open when closed (several nodes sharing one).
// With no fault set it is the wrapped journal, capabilities and all: a node runs on it
// as on the journal itself. All methods are safe for concurrent use.
//
//	f := journaltest.NewFaulty(memjournal.New(memjournal.Options{}))
//	f.Down(nil) // appends, loads and index calls fail with ErrDown
//	f.Up()
type Faulty struct {
	j persistence.SessionStore

	down         atomic.Pointer[error]
	delay        atomic.Int64 // time.Duration
	panicNext    atomic.Bool
	conflictNext atomic.Bool
	keepOpen     atomic.Bool
	appends      atomic.Int64

	mu       sync.Mutex
	failAt   int64 // the append (1-based, over the wrapper's life) that fails with failErr
	failErr  error
	onAppend func(stream string, recs []persistence.Record, last uint64, err error)
}

var _ persistence.SessionStore = (*Faulty)(nil)

// NewFaulty wraps j, with no fault set.
func NewFaulty(j persistence.SessionStore) *Faulty { return &Faulty{j: j} }

// Inner returns the wrapped journal.
func (f *Faulty) Inner() persistence.SessionStore { return f.j }

// Down makes every later call but Close and ObserveAppends fail with err (ErrDown when
// nil), like a database that went away, until Up.
func (f *Faulty) Down(err error) {
	if err == nil {
		err = ErrDown
	}
	f.down.Store(&err)
}

// Up ends Down.
func (f *Faulty) Up() { f.down.Store(nil) }

// Slow makes every later append (Append, AppendIndexed) wait d before it runs (0: no
// wait); a context that ends first ends the append with its error, storing nothing.
func (f *Faulty) Slow(d time.Duration) { f.delay.Store(int64(d)) }

// PanicNextAppend makes the next append panic, storing nothing.
func (f *Faulty) PanicNextAppend() { f.panicNext.Store(true) }

// ConflictNextAppend makes the next append fail with an error wrapping
// persistence.ErrConflict, storing nothing (another writer won, as far as the caller
// can tell).
func (f *Faulty) ConflictNextAppend() { f.conflictNext.Store(true) }

// FailAppend makes append number n (1-based, counted over the wrapper's life; see
// Appends) fail with err, storing nothing. n = 0 fails none.
func (f *Faulty) FailAppend(n int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failAt, f.failErr = n, err
}

// OnAppend makes fn the reporter of every append's outcome: its stream, records, last
// seq and error (nil when stored). fn runs on the appending goroutine and must be fast.
func (f *Faulty) OnAppend(fn func(stream string, recs []persistence.Record, last uint64, err error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onAppend = fn
}

// KeepOpen makes Close leave the wrapped journal open (the test closes it), so several
// nodes can share it. It returns f.
func (f *Faulty) KeepOpen() *Faulty { f.keepOpen.Store(true); return f }

// Appends returns how many appends were made through f, failed ones included.
func (f *Faulty) Appends() int64 { return f.appends.Load() }

// fault returns the error of a call made while down.
func (f *Faulty) fault() error {
	if e := f.down.Load(); e != nil {
		return *e
	}
	return nil
}

// append runs one append through the faults, then do.
func (f *Faulty) append(ctx context.Context, stream string, expected uint64, recs []persistence.Record, do func() (uint64, error)) (last uint64, err error) {
	n := f.appends.Add(1)
	f.mu.Lock()
	failAt, failErr, report := f.failAt, f.failErr, f.onAppend
	f.mu.Unlock()
	if report != nil {
		defer func() { report(stream, recs, last, err) }()
	}
	if err := f.fault(); err != nil {
		return 0, err
	}
	if f.panicNext.CompareAndSwap(true, false) {
		panic(fmt.Sprintf("journaltest: injected journal panic in the append to %s", stream))
	}
	if d := time.Duration(f.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		}
	}
	if n == failAt {
		return 0, failErr
	}
	if f.conflictNext.CompareAndSwap(true, false) {
		return 0, fmt.Errorf("append to %s after seq %d (injected): %w", stream, expected, persistence.ErrConflict)
	}
	return do()
}

// Append implements persistence.Journal.
func (f *Faulty) Append(ctx context.Context, stream string, expected uint64, recs []persistence.Record) (uint64, error) {
	return f.append(ctx, stream, expected, recs, func() (uint64, error) { return f.j.Append(ctx, stream, expected, recs) })
}

// AppendIndexed implements persistence.SessionIndex.
func (f *Faulty) AppendIndexed(ctx context.Context, stream string, expected uint64, recs []persistence.Record, e persistence.IndexEntry) (uint64, error) {
	return f.append(ctx, stream, expected, recs, func() (uint64, error) { return f.j.AppendIndexed(ctx, stream, expected, recs, e) })
}

// Load implements persistence.Journal.
func (f *Faulty) Load(ctx context.Context, stream string, after uint64, fn func(persistence.Record) error) error {
	if err := f.fault(); err != nil {
		return err
	}
	return f.j.Load(ctx, stream, after, fn)
}

// LastSeq implements persistence.Journal.
func (f *Faulty) LastSeq(ctx context.Context, stream string) (uint64, error) {
	if err := f.fault(); err != nil {
		return 0, err
	}
	return f.j.LastSeq(ctx, stream)
}

// SaveSnapshot implements persistence.Journal.
func (f *Faulty) SaveSnapshot(ctx context.Context, stream string, snap persistence.Snapshot) error {
	if err := f.fault(); err != nil {
		return err
	}
	return f.j.SaveSnapshot(ctx, stream, snap)
}

// LoadSnapshot implements persistence.Journal.
func (f *Faulty) LoadSnapshot(ctx context.Context, stream string, maxSeq uint64) (persistence.Snapshot, bool, error) {
	if err := f.fault(); err != nil {
		return persistence.Snapshot{}, false, err
	}
	return f.j.LoadSnapshot(ctx, stream, maxSeq)
}

// ListStreams implements persistence.Journal.
func (f *Faulty) ListStreams(ctx context.Context, prefix string) ([]persistence.StreamInfo, error) {
	if err := f.fault(); err != nil {
		return nil, err
	}
	return f.j.ListStreams(ctx, prefix)
}

// Close implements persistence.Journal: it closes the wrapped journal unless KeepOpen.
func (f *Faulty) Close() error {
	if f.keepOpen.Load() {
		return nil
	}
	return f.j.Close()
}

// RenewLease implements persistence.SessionIndex.
func (f *Faulty) RenewLease(ctx context.Context, id, owner string, ttl time.Duration) error {
	if err := f.fault(); err != nil {
		return err
	}
	return f.j.RenewLease(ctx, id, owner, ttl)
}

// ReleaseLease implements persistence.SessionIndex.
func (f *Faulty) ReleaseLease(ctx context.Context, id, owner string) error {
	if err := f.fault(); err != nil {
		return err
	}
	return f.j.ReleaseLease(ctx, id, owner)
}

// LeaseHolder implements persistence.SessionIndex.
func (f *Faulty) LeaseHolder(ctx context.Context, id string) (string, error) {
	if err := f.fault(); err != nil {
		return "", err
	}
	return f.j.LeaseHolder(ctx, id)
}

// BreakLeases implements persistence.SessionIndex.
func (f *Faulty) BreakLeases(ctx context.Context, owner string) (int, error) {
	if err := f.fault(); err != nil {
		return 0, err
	}
	return f.j.BreakLeases(ctx, owner)
}

// Due implements persistence.SessionIndex.
func (f *Faulty) Due(ctx context.Context, limit int) ([]persistence.IndexEntry, error) {
	if err := f.fault(); err != nil {
		return nil, err
	}
	return f.j.Due(ctx, limit)
}

// ListSessions implements persistence.SessionIndex.
func (f *Faulty) ListSessions(ctx context.Context, q persistence.ListQuery) ([]persistence.IndexEntry, error) {
	if err := f.fault(); err != nil {
		return nil, err
	}
	return f.j.ListSessions(ctx, q)
}

// LeaseCounts implements persistence.LeaseCounter.
func (f *Faulty) LeaseCounts(ctx context.Context) (map[string]persistence.LeaseCount, error) {
	if err := f.fault(); err != nil {
		return nil, err
	}
	return f.j.LeaseCounts(ctx)
}

// SessionStatus implements persistence.SessionDeleter.
func (f *Faulty) SessionStatus(ctx context.Context, id string) (string, string, bool, error) {
	if err := f.fault(); err != nil {
		return "", "", false, err
	}
	return f.j.SessionStatus(ctx, id)
}

// DeleteSession implements persistence.SessionDeleter.
func (f *Faulty) DeleteSession(ctx context.Context, id, by string) error {
	if err := f.fault(); err != nil {
		return err
	}
	return f.j.DeleteSession(ctx, id, by)
}

// Tombstone implements persistence.SessionDeleter.
func (f *Faulty) Tombstone(ctx context.Context, id string) (persistence.Tombstone, bool, error) {
	if err := f.fault(); err != nil {
		return persistence.Tombstone{}, false, err
	}
	return f.j.Tombstone(ctx, id)
}

// CountByStatus implements persistence.StatusCounter.
func (f *Faulty) CountByStatus(ctx context.Context) (map[string]int64, error) {
	if err := f.fault(); err != nil {
		return nil, err
	}
	return f.j.CountByStatus(ctx)
}

// CountSessions implements persistence.TenantIndex.
func (f *Faulty) CountSessions(ctx context.Context, tenant string, statuses []string) (int, error) {
	if err := f.fault(); err != nil {
		return 0, err
	}
	return f.j.CountSessions(ctx, tenant, statuses)
}

// TenantUsage implements persistence.TenantIndex.
func (f *Faulty) TenantUsage(ctx context.Context, tenant string, day time.Time) (persistence.TenantUsage, error) {
	if err := f.fault(); err != nil {
		return persistence.TenantUsage{}, err
	}
	return f.j.TenantUsage(ctx, tenant, day)
}

// ObserveAppends implements persistence.AppendObservable (the wrapped journal's
// observer: appends refused by a fault are not observed).
func (f *Faulty) ObserveAppends(o persistence.AppendObserver) { f.j.ObserveAppends(o) }
