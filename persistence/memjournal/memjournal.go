// Package memjournal is an in-memory persistence.SessionStore: the event journal, its
// snapshots, the session index with its leases, deletes and tombstones, the tenants'
// usage and the append observer, all kept in maps of one process.
//
// It is NOT durable: everything is lost when the process ends. It is bounded only by
// the process's memory. Use it for tests and for a node that needs no disk
// (`fathom run --journal memory`); use persistence/bolt or persistence/postgres to keep
// sessions across restarts. It passes the same conformance suite as they do
// (persistence/journaltest), and is safe for concurrent use.
//
// A Store holds the data; each Open returns a handle on it, so a handle can be closed
// and the store opened again (as a file or a database would be):
//
//	s := memjournal.NewStore(memjournal.Options{Facts: indexfacts.Of})
//	j := s.Open()
//	defer j.Close()
package memjournal

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fathom-agents/fathom/persistence"
)

// Options configure a Store.
type Options struct {
	// Facts reads the session index's facts (user, goal, tenant, cost) from each indexed
	// append's records (persistence/indexfacts.Of). Nil keeps none.
	Facts persistence.FactsFunc
	// Now is the store's clock (leases, tombstones, append times). Nil means time.Now.
	Now func() time.Time
}

// Store is the data of an in-memory journal. One mutex guards it: an append holds it
// for the time it takes to copy its records, so appends to different streams wait for
// one another only that long.
type Store struct {
	facts persistence.FactsFunc
	now   func() time.Time

	mu      sync.RWMutex
	streams map[string]*stream
	index   map[string]persistence.IndexEntry // rows without their lease
	leases  map[string]lease
	usage   map[usageKey]persistence.TenantUsage
	tombs   map[string]persistence.Tombstone
}

type stream struct {
	recs             []persistence.Record // recs[i].Seq == i+1
	snaps            []persistence.Snapshot
	created, updated time.Time
}

type lease struct {
	owner   string
	expires time.Time
}

type usageKey struct {
	tenant string
	day    time.Time
}

// NewStore returns an empty store.
func NewStore(opts Options) *Store {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Store{
		facts: opts.Facts, now: func() time.Time { return now().UTC() },
		streams: map[string]*stream{}, index: map[string]persistence.IndexEntry{},
		leases: map[string]lease{}, usage: map[usageKey]persistence.TenantUsage{}, tombs: map[string]persistence.Tombstone{},
	}
}

// New returns a handle on a new empty store: NewStore(opts).Open().
func New(opts Options) *Journal { return NewStore(opts).Open() }

// Open returns a new handle on s.
func (s *Store) Open() *Journal { return &Journal{s: s} }

// Journal is a handle on a Store: a persistence.SessionStore. Calls after Close return
// persistence.ErrClosed; the store's data stays for the next Open.
type Journal struct {
	s       *Store
	closed  atomic.Bool
	observe atomic.Pointer[persistence.AppendObserver]
}

var _ persistence.SessionStore = (*Journal)(nil)

// Store returns the store j is a handle on.
func (j *Journal) Store() *Store { return j.s }

// enter checks the handle is open and ctx is live.
func (j *Journal) enter(ctx context.Context) error {
	if j.closed.Load() {
		return persistence.ErrClosed
	}
	return ctx.Err()
}

// Close implements persistence.Journal.
func (j *Journal) Close() error {
	if j.closed.Swap(true) {
		return persistence.ErrClosed
	}
	return nil
}

// ObserveAppends implements persistence.AppendObservable.
func (j *Journal) ObserveAppends(o persistence.AppendObserver) {
	if o == nil {
		j.observe.Store(nil)
		return
	}
	j.observe.Store(&o)
}

// Append implements persistence.Journal.
func (j *Journal) Append(ctx context.Context, id string, expectedSeq uint64, recs []persistence.Record) (uint64, error) {
	return j.append(ctx, id, expectedSeq, recs, nil)
}

// AppendIndexed implements persistence.SessionIndex.
func (j *Journal) AppendIndexed(ctx context.Context, id string, expectedSeq uint64, recs []persistence.Record, entry persistence.IndexEntry) (uint64, error) {
	if err := persistence.ValidateIndexEntry(id, entry); err != nil {
		return 0, err
	}
	return j.append(ctx, id, expectedSeq, recs, &entry)
}

func (j *Journal) append(ctx context.Context, id string, expectedSeq uint64, recs []persistence.Record, entry *persistence.IndexEntry) (last uint64, err error) {
	if o := j.observe.Load(); o != nil {
		defer func(start time.Time) { (*o)(time.Since(start), len(recs), err) }(time.Now())
	}
	if err := persistence.ValidateAppend(id, expectedSeq, recs); err != nil {
		return 0, err
	}
	if err := j.enter(ctx); err != nil {
		return 0, err
	}
	s := j.s
	var facts persistence.SessionFacts
	if entry != nil && s.facts != nil {
		facts = s.facts(recs) // outside the lock: it decodes events
	}
	now := s.now()
	cp := make([]persistence.Record, len(recs))
	for i, r := range recs {
		if r.At.IsZero() {
			r.At = now
		}
		r.Data = slices.Clone(r.Data)
		cp[i] = r
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.streams[id]
	var at uint64
	if st != nil {
		at = uint64(len(st.recs))
	}
	if at != expectedSeq {
		return 0, fmt.Errorf("append to %s after seq %d: stream is at %d: %w", id, expectedSeq, at, persistence.ErrConflict)
	}
	if st == nil {
		st = &stream{}
		s.streams[id] = st
	}
	if len(st.recs) == 0 {
		st.created = cp[0].At
	}
	for i := range cp {
		cp[i].Seq = at + 1 + uint64(i)
	}
	st.recs = append(st.recs, cp...)
	st.updated = cp[len(cp)-1].At
	last = uint64(len(st.recs))
	if entry != nil {
		s.putIndex(*entry, facts, last, st.updated, st.created)
		if entry.LeaseOwner != "" && entry.LeaseTTL > 0 {
			s.leases[id] = lease{owner: entry.LeaseOwner, expires: now.Add(entry.LeaseTTL)}
		}
	}
	return last, nil
}

// putIndex writes e's row (as bolt's does): a batch that starts the session sets its
// facts, any other keeps the stored ones; the cost adds up, and the batch's usage is
// added to its tenant's day. s.mu is held.
func (s *Store) putIndex(e persistence.IndexEntry, f persistence.SessionFacts, seq uint64, at, created time.Time) {
	e.UserID, e.Goal, e.Tenant, e.Owner, e.ForkedFrom = "", "", "", "", ""
	e.CostUSD, e.Tokens, e.ArtifactBytes = f.CostUSD, f.Tokens, f.ArtifactBytes
	if f.Started {
		e.UserID, e.Goal, e.Tenant, e.Owner, e.ForkedFrom = f.UserID, persistence.CutGoal(f.Goal), f.Tenant, f.Owner, f.ForkedFrom
	}
	added := e.CostUSD
	if old, ok := s.index[e.SessionID]; ok {
		if e.Goal == "" {
			e.UserID, e.Goal, e.Tenant, e.Owner, e.ForkedFrom = old.UserID, old.Goal, old.Tenant, old.Owner, old.ForkedFrom
		}
		e.CostUSD += old.CostUSD
		e.DueAt = persistence.DueSince(old.DueAt, e.DueAt, s.now())
	}
	if e.Tenant == "" {
		e.Tenant = persistence.DefaultTenant
	}
	if e.Tokens > 0 || added > 0 || e.ArtifactBytes > 0 {
		k := usageKey{tenant: e.Tenant, day: persistence.UsageDay(at)}
		u := s.usage[k]
		u.Tokens += e.Tokens
		u.CostUSD += added
		u.ArtifactBytes += e.ArtifactBytes
		s.usage[k] = u
	}
	e.Seq, e.UpdatedAt, e.CreatedAt = seq, at, created
	e.LeaseOwner, e.LeaseExpires, e.LeaseTTL, e.Tokens, e.ArtifactBytes = "", time.Time{}, 0, 0, 0
	s.index[e.SessionID] = e
}

// Load implements persistence.Journal. fn runs without the store's lock held.
func (j *Journal) Load(ctx context.Context, id string, afterSeq uint64, fn func(persistence.Record) error) error {
	if err := j.enter(ctx); err != nil {
		return err
	}
	j.s.mu.RLock()
	var recs []persistence.Record
	if st := j.s.streams[id]; st != nil && afterSeq < uint64(len(st.recs)) {
		recs = st.recs[afterSeq:len(st.recs):len(st.recs)] // stored records never change
	}
	j.s.mu.RUnlock()
	for _, r := range recs {
		if err := ctx.Err(); err != nil {
			return err
		}
		r.Data = slices.Clone(r.Data)
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// LastSeq implements persistence.Journal.
func (j *Journal) LastSeq(ctx context.Context, id string) (uint64, error) {
	if err := j.enter(ctx); err != nil {
		return 0, err
	}
	j.s.mu.RLock()
	defer j.s.mu.RUnlock()
	if st := j.s.streams[id]; st != nil {
		return uint64(len(st.recs)), nil
	}
	return 0, nil
}

// SaveSnapshot implements persistence.Journal.
func (j *Journal) SaveSnapshot(ctx context.Context, id string, snap persistence.Snapshot) error {
	if err := j.enter(ctx); err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("%w: empty stream id", persistence.ErrInvalid)
	}
	if snap.At.IsZero() {
		snap.At = j.s.now()
	}
	snap.Data = slices.Clone(snap.Data)
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	st := j.s.streams[id]
	if st == nil {
		st = &stream{}
		j.s.streams[id] = st
	}
	i, found := slices.BinarySearchFunc(st.snaps, snap.Seq, func(s persistence.Snapshot, seq uint64) int { return cmp.Compare(s.Seq, seq) })
	if found {
		st.snaps[i] = snap
	} else {
		st.snaps = slices.Insert(st.snaps, i, snap)
	}
	return nil
}

// LoadSnapshot implements persistence.Journal.
func (j *Journal) LoadSnapshot(ctx context.Context, id string, maxSeq uint64) (persistence.Snapshot, bool, error) {
	if err := j.enter(ctx); err != nil {
		return persistence.Snapshot{}, false, err
	}
	j.s.mu.RLock()
	defer j.s.mu.RUnlock()
	st := j.s.streams[id]
	if st == nil {
		return persistence.Snapshot{}, false, nil
	}
	for i := len(st.snaps) - 1; i >= 0; i-- {
		if st.snaps[i].Seq <= maxSeq {
			snap := st.snaps[i]
			snap.Data = slices.Clone(snap.Data)
			return snap, true, nil
		}
	}
	return persistence.Snapshot{}, false, nil
}

// ListStreams implements persistence.Journal. A stream with snapshots and no records
// is not listed.
func (j *Journal) ListStreams(ctx context.Context, prefix string) ([]persistence.StreamInfo, error) {
	if err := j.enter(ctx); err != nil {
		return nil, err
	}
	j.s.mu.RLock()
	defer j.s.mu.RUnlock()
	var out []persistence.StreamInfo
	for id, st := range j.s.streams {
		if len(st.recs) > 0 && strings.HasPrefix(id, prefix) {
			out = append(out, persistence.StreamInfo{ID: id, LastSeq: uint64(len(st.recs)), CreatedAt: st.created, UpdatedAt: st.updated})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

// RenewLease implements persistence.SessionIndex.
func (j *Journal) RenewLease(ctx context.Context, id, owner string, ttl time.Duration) error {
	if err := j.enter(ctx); err != nil {
		return err
	}
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	if _, ok := j.s.index[id]; ok {
		j.s.leases[id] = lease{owner: owner, expires: j.s.now().Add(ttl)}
	}
	return nil
}

// ReleaseLease implements persistence.SessionIndex.
func (j *Journal) ReleaseLease(ctx context.Context, id, owner string) error {
	if err := j.enter(ctx); err != nil {
		return err
	}
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	if l, ok := j.s.leases[id]; ok && l.owner == owner {
		delete(j.s.leases, id)
	}
	return nil
}

// LeaseHolder implements persistence.SessionIndex.
func (j *Journal) LeaseHolder(ctx context.Context, id string) (string, error) {
	if err := j.enter(ctx); err != nil {
		return "", err
	}
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	if l, ok := j.s.leases[id]; ok && !l.expires.Before(j.s.now()) {
		return l.owner, nil
	}
	return "", nil
}

// BreakLeases implements persistence.SessionIndex.
func (j *Journal) BreakLeases(ctx context.Context, owner string) (int, error) {
	if err := j.enter(ctx); err != nil {
		return 0, err
	}
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	n, now := 0, j.s.now()
	for id, l := range j.s.leases {
		if l.owner == owner && !l.expires.Before(now) {
			delete(j.s.leases, id)
			n++
		}
	}
	return n, nil
}

// LeaseCounts implements persistence.LeaseCounter.
func (j *Journal) LeaseCounts(ctx context.Context) (map[string]persistence.LeaseCount, error) {
	if err := j.enter(ctx); err != nil {
		return nil, err
	}
	j.s.mu.RLock()
	defer j.s.mu.RUnlock()
	out, now := map[string]persistence.LeaseCount{}, j.s.now()
	for id, l := range j.s.leases {
		if l.expires.Before(now) {
			continue
		}
		c := out[l.owner]
		c.Leases++
		if e, ok := j.s.index[id]; ok && slices.Contains(persistence.RunningStatuses, e.Status) {
			c.Running++
		}
		out[l.owner] = c
	}
	return out, nil
}

// rows returns the index rows keep accepts, with their leases. s.mu is held.
func (s *Store) rows(keep func(persistence.IndexEntry) bool) []persistence.IndexEntry {
	var out []persistence.IndexEntry
	for id, e := range s.index {
		if l, ok := s.leases[id]; ok {
			e.LeaseOwner, e.LeaseExpires = l.owner, l.expires
		}
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// Due implements persistence.SessionIndex.
func (j *Journal) Due(ctx context.Context, limit int) ([]persistence.IndexEntry, error) {
	if err := j.enter(ctx); err != nil {
		return nil, err
	}
	j.s.mu.RLock()
	now := j.s.now()
	out := j.s.rows(func(e persistence.IndexEntry) bool {
		return !e.DueAt.IsZero() && !e.DueAt.After(now) && (e.LeaseExpires.IsZero() || e.LeaseExpires.Before(now))
	})
	j.s.mu.RUnlock()
	sort.Slice(out, func(a, b int) bool {
		if !out[a].DueAt.Equal(out[b].DueAt) {
			return out[a].DueAt.Before(out[b].DueAt)
		}
		return out[a].SessionID < out[b].SessionID
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ListSessions implements persistence.SessionIndex.
func (j *Journal) ListSessions(ctx context.Context, q persistence.ListQuery) ([]persistence.IndexEntry, error) {
	if err := j.enter(ctx); err != nil {
		return nil, err
	}
	j.s.mu.RLock()
	out := j.s.rows(func(e persistence.IndexEntry) bool { return q.Matches(e) && q.After.Before(e) })
	j.s.mu.RUnlock()
	sort.Slice(out, func(a, b int) bool { return persistence.Newer(out[a], out[b]) })
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// CountByStatus implements persistence.StatusCounter.
func (j *Journal) CountByStatus(ctx context.Context) (map[string]int64, error) {
	if err := j.enter(ctx); err != nil {
		return nil, err
	}
	j.s.mu.RLock()
	defer j.s.mu.RUnlock()
	out := map[string]int64{}
	for _, e := range j.s.index {
		out[e.Status]++
	}
	return out, nil
}

// CountSessions implements persistence.TenantIndex.
func (j *Journal) CountSessions(ctx context.Context, tenant string, statuses []string) (int, error) {
	if err := j.enter(ctx); err != nil {
		return 0, err
	}
	j.s.mu.RLock()
	defer j.s.mu.RUnlock()
	n := 0
	for _, e := range j.s.index {
		if e.Tenant == tenant && slices.Contains(statuses, e.Status) {
			n++
		}
	}
	return n, nil
}

// TenantUsage implements persistence.TenantIndex.
func (j *Journal) TenantUsage(ctx context.Context, tenant string, day time.Time) (persistence.TenantUsage, error) {
	if err := j.enter(ctx); err != nil {
		return persistence.TenantUsage{}, err
	}
	if tenant == "" {
		tenant = persistence.DefaultTenant
	}
	j.s.mu.RLock()
	defer j.s.mu.RUnlock()
	return j.s.usage[usageKey{tenant: tenant, day: persistence.UsageDay(day)}], nil
}

// SessionStatus implements persistence.SessionDeleter.
func (j *Journal) SessionStatus(ctx context.Context, id string) (string, string, bool, error) {
	if err := j.enter(ctx); err != nil {
		return "", "", false, err
	}
	j.s.mu.RLock()
	defer j.s.mu.RUnlock()
	e, ok := j.s.index[id]
	if !ok {
		return "", "", false, nil
	}
	return e.Status, e.Tenant, true, nil
}

// DeleteSession implements persistence.SessionDeleter: the stream, its snapshots, its
// index row and lease go at once, and its tombstone is kept.
func (j *Journal) DeleteSession(ctx context.Context, id, by string) error {
	if err := j.enter(ctx); err != nil {
		return err
	}
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	e, ok := j.s.index[id]
	if !ok {
		if st := j.s.streams[id]; st == nil || len(st.recs) == 0 {
			return fmt.Errorf("delete session %s: %w", id, persistence.ErrNotFound)
		}
		return fmt.Errorf("delete session %s: %w: it has no index row", id, persistence.ErrNotTerminal)
	}
	if !persistence.TerminalStatus(e.Status) {
		return fmt.Errorf("delete session %s: %w: it is %s", id, persistence.ErrNotTerminal, e.Status)
	}
	delete(j.s.streams, id)
	delete(j.s.index, id)
	delete(j.s.leases, id)
	j.s.tombs[id] = persistence.Tombstone{SessionID: id, Tenant: e.Tenant, Owner: e.Owner, DeletedBy: by, DeletedAt: j.s.now()}
	return nil
}

// Tombstone implements persistence.SessionDeleter.
func (j *Journal) Tombstone(ctx context.Context, id string) (persistence.Tombstone, bool, error) {
	if err := j.enter(ctx); err != nil {
		return persistence.Tombstone{}, false, err
	}
	j.s.mu.RLock()
	defer j.s.mu.RUnlock()
	t, ok := j.s.tombs[id]
	return t, ok, nil
}
