package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/fathom-agents/fathom/persistence"
)

// The session index (persistence.SessionIndex) is bucket "sessions": session id →
// status, due time, seq and update time. Its row is written by the append's own
// transaction (appendTx), so the row and the events are committed together. Due and
// ListSessions scan the bucket: the embedded journal serves one node, whose sessions fit
// a scan.
//
// Leases are kept in memory. The file is locked by one process, so the only activations
// that can hold a lease are this process's, and they all end with it: a lease read back
// from the file after a restart would only delay the reactivation of sessions whose
// owner is certainly gone, and writing one would cost an fsync per renewal.

var bucketIndex = []byte("sessions")

// bucketUsage holds the tenants' model usage per UTC day (persistence.TenantIndex):
// tenant 0x00 YYYY-MM-DD → tokens(8) | cost(8, float64 bits). The append that stores an
// llm_responded adds its tokens and cost in its own transaction (putIndex).
var bucketUsage = []byte("tenant_usage")

var _ persistence.SessionIndex = (*Journal)(nil)

// leaseTable holds the leases of the journal's sessions.
type leaseTable struct {
	mu sync.Mutex
	m  map[string]lease
}

type lease struct {
	owner   string
	expires time.Time
}

func (t *leaseTable) set(id, owner string, ttl time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]lease{}
	}
	t.m[id] = lease{owner: owner, expires: time.Now().Add(ttl).UTC()}
}

// release drops id's lease if owner holds it ("" : whoever holds it).
func (t *leaseTable) release(id, owner string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.m[id]; ok && (owner == "" || l.owner == owner) {
		delete(t.m, id)
	}
}

// holder returns the owner of id's live lease ("" for none).
func (t *leaseTable) holder(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.m[id]; ok && !l.expires.Before(time.Now()) {
		return l.owner
	}
	return ""
}

// breakOwner drops every live lease owner holds and returns how many.
func (t *leaseTable) breakOwner(owner string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, now := 0, time.Now()
	for id, l := range t.m {
		if l.owner == owner && !l.expires.Before(now) {
			delete(t.m, id)
			n++
		}
	}
	return n
}

// live returns the owner of each live lease, by session id.
func (t *leaseTable) live() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out, now := make(map[string]string, len(t.m)), time.Now()
	for id, l := range t.m {
		if !l.expires.Before(now) {
			out[id] = l.owner
		}
	}
	return out
}

// fill sets e's lease fields.
func (t *leaseTable) fill(e *persistence.IndexEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.m[e.SessionID]; ok {
		e.LeaseOwner, e.LeaseExpires = l.owner, l.expires
	}
}

// AppendIndexed implements persistence.SessionIndex.
func (j *Journal) AppendIndexed(ctx context.Context, stream string, expectedSeq uint64, recs []persistence.Record, entry persistence.IndexEntry) (uint64, error) {
	if err := persistence.ValidateIndexEntry(stream, entry); err != nil {
		return 0, err
	}
	entry.UserID, entry.Goal, entry.CostUSD, entry.CreatedAt, entry.Tenant, entry.Owner, entry.Tokens, entry.ArtifactBytes = "", "", 0, time.Time{}, "", "", 0, 0
	entry.ForkedFrom = ""
	if j.facts != nil {
		f := j.facts(recs)
		entry.CostUSD, entry.Tokens, entry.ArtifactBytes = f.CostUSD, f.Tokens, f.ArtifactBytes
		if f.Started {
			entry.UserID, entry.Goal, entry.Tenant, entry.Owner, entry.ForkedFrom = f.UserID, f.Goal, f.Tenant, f.Owner, f.ForkedFrom
		}
	}
	last, err := j.append(ctx, stream, expectedSeq, recs, &entry)
	if err == nil && entry.LeaseOwner != "" && entry.LeaseTTL > 0 {
		j.leases.set(stream, entry.LeaseOwner, entry.LeaseTTL)
	}
	return last, err
}

// putIndex writes e (at seq, written at, of a stream created at created). It runs inside
// the append's transaction. e carries the batch's facts (AppendIndexed): a batch that
// starts the session sets the user and goal (a start's goal is never empty), any other
// keeps the stored ones; the cost adds up. The batch's tokens, cost and artifact bytes
// are added to its tenant's usage of at's UTC date (bucketUsage).
func putIndex(tx *bbolt.Tx, e persistence.IndexEntry, seq uint64, at, created time.Time) error {
	b, err := tx.CreateBucketIfNotExists(bucketIndex)
	if err != nil {
		return err
	}
	added := e.CostUSD
	if v := b.Get([]byte(e.SessionID)); v != nil {
		old, ok := decodeIndex(e.SessionID, v)
		if !ok {
			return fmt.Errorf("session index row %q: %w", e.SessionID, persistence.ErrCorrupt)
		}
		if e.Goal == "" {
			e.UserID, e.Goal, e.Tenant, e.Owner, e.ForkedFrom = old.UserID, old.Goal, old.Tenant, old.Owner, old.ForkedFrom
		}
		e.CostUSD += old.CostUSD
		e.DueAt = persistence.DueSince(old.DueAt, e.DueAt, time.Now())
	}
	if e.Tokens > 0 || added > 0 || e.ArtifactBytes > 0 {
		if err := addUsage(tx, e.Tenant, at, persistence.TenantUsage{Tokens: e.Tokens, CostUSD: added, ArtifactBytes: e.ArtifactBytes}); err != nil {
			return err
		}
	}
	e.Seq, e.UpdatedAt, e.CreatedAt = seq, at, created
	return b.Put([]byte(e.SessionID), encodeIndex(e))
}

// usageKey is bucketUsage's key of tenant's usage on at's UTC date.
func usageKey(tenant string, at time.Time) []byte {
	if tenant == "" {
		tenant = persistence.DefaultTenant
	}
	return append([]byte(tenant+"\x00"), persistence.UsageDay(at).Format(time.DateOnly)...)
}

// addUsage adds add to tenant's usage of at's UTC date: tokens, cost and artifact
// bytes, 8 bytes each (a 16-byte value, written before artifact bytes were counted,
// has none).
func addUsage(tx *bbolt.Tx, tenant string, at time.Time, add persistence.TenantUsage) error {
	b, err := tx.CreateBucketIfNotExists(bucketUsage)
	if err != nil {
		return err
	}
	key := usageKey(tenant, at)
	u := decodeUsage(b.Get(key))
	u.Tokens += add.Tokens
	u.CostUSD += add.CostUSD
	u.ArtifactBytes += add.ArtifactBytes
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 24), u.Tokens)
	v = binary.BigEndian.AppendUint64(v, math.Float64bits(u.CostUSD))
	return b.Put(key, binary.BigEndian.AppendUint64(v, u.ArtifactBytes))
}

func decodeUsage(v []byte) persistence.TenantUsage {
	if len(v) != 16 && len(v) != 24 {
		return persistence.TenantUsage{}
	}
	u := persistence.TenantUsage{Tokens: binary.BigEndian.Uint64(v), CostUSD: math.Float64frombits(binary.BigEndian.Uint64(v[8:]))}
	if len(v) == 24 {
		u.ArtifactBytes = binary.BigEndian.Uint64(v[16:])
	}
	return u
}

var _ persistence.TenantIndex = (*Journal)(nil)

// CountSessions implements persistence.TenantIndex by a scan of the index.
func (j *Journal) CountSessions(ctx context.Context, tenant string, statuses []string) (int, error) {
	n := 0
	_, err := j.scanIndex(ctx, nil, func(e persistence.IndexEntry) bool {
		if e.Tenant == tenant && slices.Contains(statuses, e.Status) {
			n++
		}
		return false
	}, 0)
	return n, err
}

// TenantUsage implements persistence.TenantIndex.
func (j *Journal) TenantUsage(ctx context.Context, tenant string, day time.Time) (persistence.TenantUsage, error) {
	if err := ctx.Err(); err != nil {
		return persistence.TenantUsage{}, err
	}
	if err := j.enter(); err != nil {
		return persistence.TenantUsage{}, err
	}
	defer j.leave()
	var u persistence.TenantUsage
	err := j.db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(bucketUsage); b != nil {
			u = decodeUsage(b.Get(usageKey(tenant, day)))
		}
		return nil
	})
	if err != nil {
		return persistence.TenantUsage{}, fmt.Errorf("usage of tenant %s: %w", tenant, err)
	}
	return u, nil
}

// RenewLease implements persistence.SessionIndex.
func (j *Journal) RenewLease(ctx context.Context, id, owner string, ttl time.Duration) error {
	known, err := j.indexed(ctx, id)
	if err != nil || !known {
		return err
	}
	j.leases.set(id, owner, ttl)
	return nil
}

// ReleaseLease implements persistence.SessionIndex.
func (j *Journal) ReleaseLease(ctx context.Context, id, owner string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := j.enter(); err != nil {
		return err
	}
	defer j.leave()
	j.leases.release(id, owner)
	return nil
}

// LeaseHolder implements persistence.SessionIndex.
func (j *Journal) LeaseHolder(ctx context.Context, id string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := j.enter(); err != nil {
		return "", err
	}
	defer j.leave()
	return j.leases.holder(id), nil
}

// BreakLeases implements persistence.SessionIndex.
func (j *Journal) BreakLeases(ctx context.Context, owner string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := j.enter(); err != nil {
		return 0, err
	}
	defer j.leave()
	return j.leases.breakOwner(owner), nil
}

var _ persistence.LeaseCounter = (*Journal)(nil)

// LeaseCounts implements persistence.LeaseCounter over the live leases and their rows'
// statuses.
func (j *Journal) LeaseCounts(ctx context.Context) (map[string]persistence.LeaseCount, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := j.enter(); err != nil {
		return nil, err
	}
	defer j.leave()
	live := j.leases.live()
	out := map[string]persistence.LeaseCount{}
	err := j.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketIndex)
		for id, owner := range live {
			c := out[owner]
			c.Leases++
			if b != nil {
				if v := b.Get([]byte(id)); v != nil {
					if e, ok := decodeIndex(id, v); ok && slices.Contains(persistence.RunningStatuses, e.Status) {
						c.Running++
					}
				}
			}
			out[owner] = c
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count leases: %w", err)
	}
	return out, nil
}

// indexed reports whether session id has a row in the index.
func (j *Journal) indexed(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := j.enter(); err != nil {
		return false, err
	}
	defer j.leave()
	var ok bool
	err := j.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketIndex)
		ok = b != nil && b.Get([]byte(id)) != nil
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("session index: %w", err)
	}
	return ok, nil
}

// Due implements persistence.SessionIndex.
func (j *Journal) Due(ctx context.Context, limit int) ([]persistence.IndexEntry, error) {
	now := time.Now()
	out, err := j.scanIndex(ctx, nil, func(e persistence.IndexEntry) bool {
		return !e.DueAt.IsZero() && !e.DueAt.After(now) && (e.LeaseExpires.IsZero() || e.LeaseExpires.Before(now))
	}, 0)
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(a, b int) bool { return out[a].DueAt.Before(out[b].DueAt) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ListSessions implements persistence.SessionIndex. It scans the whole index and sorts
// (newest first): the embedded journal serves one node.
func (j *Journal) ListSessions(ctx context.Context, q persistence.ListQuery) ([]persistence.IndexEntry, error) {
	out, err := j.scanIndex(ctx, nil, func(e persistence.IndexEntry) bool {
		return q.Matches(e) && q.After.Before(e)
	}, 0)
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(a, b int) bool { return persistence.Newer(out[a], out[b]) })
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// scanIndex returns the rows after key from (all with nil) that keep accepts, with
// their leases, up to limit (0: all), in id order.
func (j *Journal) scanIndex(ctx context.Context, from []byte, keep func(persistence.IndexEntry) bool, limit int) ([]persistence.IndexEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := j.enter(); err != nil {
		return nil, err
	}
	defer j.leave()
	var out []persistence.IndexEntry
	err := j.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketIndex)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		k, v := c.First()
		if len(from) > 0 {
			if k, v = c.Seek(from); k != nil && bytes.Equal(k, from) {
				k, v = c.Next()
			}
		}
		for ; k != nil && (limit <= 0 || len(out) < limit); k, v = c.Next() {
			e, ok := decodeIndex(string(k), v)
			if !ok {
				return fmt.Errorf("session index row %q: %w", k, persistence.ErrCorrupt)
			}
			j.leases.fill(&e)
			if keep(e) {
				out = append(out, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("session index: %w", err)
	}
	return out, nil
}

// encodeIndex lays a row out as len(status)|0x80 (1) | status | due(8) | seq(8) |
// updated(8) | created(8) | cost(8, float64 bits) | len(user)(2) | user | len(tenant)(2)
// | tenant | len(owner)(2) | owner | [len(forked from)(2) | forked from] | goal. Times are
// Unix nanoseconds, 0 for none. Rows written before the facts were kept end after
// updated; rows written before tenancy lack the 0x80 flag and the tenant and owner (they
// are the default tenant's); only a fork's row has the 0x40 flag and its source.
func encodeIndex(e persistence.IndexEntry) []byte {
	user := e.UserID[:min(len(e.UserID), math.MaxUint16)]
	tenant := e.Tenant[:min(len(e.Tenant), math.MaxUint16)]
	owner := e.Owner[:min(len(e.Owner), math.MaxUint16)]
	src := e.ForkedFrom[:min(len(e.ForkedFrom), math.MaxUint16)]
	flags := byte(rowTenancy)
	if src != "" {
		flags |= rowForked
	}
	b := make([]byte, 0, 1+len(e.Status)+48+len(user)+len(tenant)+len(owner)+len(src)+len(e.Goal))
	b = append(b, byte(len(e.Status))|flags)
	b = append(b, e.Status...)
	b = binary.BigEndian.AppendUint64(b, nanos(e.DueAt))
	b = binary.BigEndian.AppendUint64(b, e.Seq)
	b = binary.BigEndian.AppendUint64(b, nanos(e.UpdatedAt))
	b = binary.BigEndian.AppendUint64(b, nanos(e.CreatedAt))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(e.CostUSD))
	b = binary.BigEndian.AppendUint16(b, uint16(len(user)))
	b = append(b, user...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(tenant)))
	b = append(b, tenant...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(owner)))
	b = append(b, owner...)
	if src != "" {
		b = binary.BigEndian.AppendUint16(b, uint16(len(src)))
		b = append(b, src...)
	}
	return append(b, e.Goal...)
}

// rowTenancy flags an index row that holds its tenant and owner, rowForked one that
// holds the source it was forked from (statuses are shorter than 0x40 bytes).
const (
	rowTenancy = 0x80
	rowForked  = 0x40
	rowFlags   = rowTenancy | rowForked
)

// cutString reads a len(2)-prefixed string off v.
func cutString(v []byte) (string, []byte, bool) {
	if len(v) < 2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(v))
	if len(v) < 2+n {
		return "", nil, false
	}
	return string(v[2 : 2+n]), v[2+n:], true
}

func decodeIndex(id string, v []byte) (persistence.IndexEntry, bool) {
	if len(v) < 1 || len(v) < 1+int(v[0]&^rowFlags)+24 {
		return persistence.IndexEntry{}, false
	}
	n, tenancy, forked := int(v[0]&^rowFlags), v[0]&rowTenancy != 0, v[0]&rowForked != 0
	e := persistence.IndexEntry{SessionID: id, Status: string(v[1 : 1+n]), Tenant: persistence.DefaultTenant}
	v = v[1+n:]
	e.DueAt = fromNanos(binary.BigEndian.Uint64(v))
	e.Seq = binary.BigEndian.Uint64(v[8:])
	e.UpdatedAt = fromNanos(binary.BigEndian.Uint64(v[16:]))
	v = v[24:]
	if len(v) == 0 {
		e.CreatedAt = e.UpdatedAt // an old row: its update time is the best known
		return e, true
	}
	if len(v) < 18 {
		return persistence.IndexEntry{}, false
	}
	e.CreatedAt = fromNanos(binary.BigEndian.Uint64(v))
	e.CostUSD = math.Float64frombits(binary.BigEndian.Uint64(v[8:]))
	var ok bool
	if e.UserID, v, ok = cutString(v[16:]); !ok {
		return persistence.IndexEntry{}, false
	}
	if tenancy {
		var tenant string
		if tenant, v, ok = cutString(v); !ok {
			return persistence.IndexEntry{}, false
		}
		if e.Owner, v, ok = cutString(v); !ok {
			return persistence.IndexEntry{}, false
		}
		if tenant != "" {
			e.Tenant = tenant
		}
	}
	if forked {
		if e.ForkedFrom, v, ok = cutString(v); !ok {
			return persistence.IndexEntry{}, false
		}
	}
	e.Goal = string(v)
	return e, true
}

func nanos(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

func fromNanos(n uint64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(n)).UTC()
}

var _ persistence.SessionDeleter = (*Journal)(nil)

// DeleteSession implements persistence.SessionDeleter: the stream's events, snapshots,
// meta and index row go in one bbolt transaction, after the row's status is checked in
// it.
func (j *Journal) DeleteSession(ctx context.Context, id, by string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if j.readOnly {
		return fmt.Errorf("delete session %s: journal %s: %w", id, j.path, ErrReadOnly)
	}
	if err := j.writable(); err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	if err := j.enter(); err != nil {
		return err
	}
	defer j.leave()
	key := []byte(id)
	err := j.db.Update(func(tx *bbolt.Tx) error {
		var row []byte
		if b := tx.Bucket(bucketIndex); b != nil {
			row = b.Get(key)
		}
		streams := tx.Bucket(bucketStreams)
		if row == nil {
			if streams.Get(key) == nil {
				return persistence.ErrNotFound
			}
			return fmt.Errorf("%w: it has no index row", persistence.ErrNotTerminal)
		}
		e, ok := decodeIndex(id, row)
		if !ok {
			return fmt.Errorf("session index row %q: %w", id, persistence.ErrCorrupt)
		}
		if !persistence.TerminalStatus(e.Status) {
			return fmt.Errorf("%w: it is %s", persistence.ErrNotTerminal, e.Status)
		}
		for _, parent := range [][]byte{bucketEvents, bucketSnapshots} {
			if tx.Bucket(parent).Bucket(key) != nil {
				if err := tx.Bucket(parent).DeleteBucket(key); err != nil {
					return err
				}
			}
		}
		if err := streams.Delete(key); err != nil {
			return err
		}
		tombs, err := tx.CreateBucketIfNotExists(bucketTombstones)
		if err != nil {
			return err
		}
		tomb, err := json.Marshal(tombstoneRow{Tenant: e.Tenant, Owner: e.Owner, DeletedBy: by, DeletedAt: time.Now().UTC()})
		if err != nil {
			return err
		}
		if err := tombs.Put(key, tomb); err != nil {
			return err
		}
		return tx.Bucket(bucketIndex).Delete(key)
	})
	if err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	j.leases.release(id, "")
	return nil
}

var _ persistence.StatusCounter = (*Journal)(nil)

// CountByStatus implements persistence.StatusCounter with a scan of the index.
func (j *Journal) CountByStatus(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	_, err := j.scanIndex(ctx, nil, func(e persistence.IndexEntry) bool {
		out[e.Status]++
		return false
	}, 0)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SessionStatus implements persistence.SessionDeleter.
func (j *Journal) SessionStatus(ctx context.Context, id string) (string, string, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", "", false, err
	}
	if err := j.enter(); err != nil {
		return "", "", false, err
	}
	defer j.leave()
	var (
		e  persistence.IndexEntry
		ok bool
	)
	err := j.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketIndex)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(id))
		if v == nil {
			return nil
		}
		if e, ok = decodeIndex(id, v); !ok {
			return fmt.Errorf("session index row %q: %w", id, persistence.ErrCorrupt)
		}
		return nil
	})
	if err != nil {
		return "", "", false, fmt.Errorf("session index: %w", err)
	}
	tenant := e.Tenant
	if ok && tenant == "" {
		tenant = persistence.DefaultTenant
	}
	return e.Status, tenant, ok, nil
}

// bucketTombstones holds deleted sessions' tombstones (persistence.Tombstone), by id.
var bucketTombstones = []byte("tombstones")

// tombstoneRow is a tombstone as stored (JSON: a rare, small record).
type tombstoneRow struct {
	Tenant    string    `json:"tenant"`
	Owner     string    `json:"owner"`
	DeletedBy string    `json:"deleted_by"`
	DeletedAt time.Time `json:"deleted_at"`
}

// Tombstone implements persistence.SessionDeleter.
func (j *Journal) Tombstone(ctx context.Context, id string) (persistence.Tombstone, bool, error) {
	if err := ctx.Err(); err != nil {
		return persistence.Tombstone{}, false, err
	}
	if err := j.enter(); err != nil {
		return persistence.Tombstone{}, false, err
	}
	defer j.leave()
	var row []byte
	err := j.db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(bucketTombstones); b != nil {
			if v := b.Get([]byte(id)); v != nil {
				row = append([]byte(nil), v...)
			}
		}
		return nil
	})
	if err != nil || row == nil {
		return persistence.Tombstone{}, false, err
	}
	var r tombstoneRow
	if err := json.Unmarshal(row, &r); err != nil {
		return persistence.Tombstone{}, false, fmt.Errorf("tombstone of %s: %w", id, persistence.ErrCorrupt)
	}
	return persistence.Tombstone{SessionID: id, Tenant: r.Tenant, Owner: r.Owner, DeletedBy: r.DeletedBy, DeletedAt: r.DeletedAt}, true, nil
}
