package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/fathom-agents/fathom/persistence"
)

// The session index (persistence.SessionIndex) is bucket "sessions": session id →
// status, due time, seq, update time and lease. Its row is written by the append's own
// transaction (appendTx), so the row and the events are committed together. Due and
// ListSessions scan the bucket: the embedded journal serves one node, whose sessions fit
// a scan.

var bucketIndex = []byte("sessions")

var _ persistence.SessionIndex = (*Journal)(nil)

// AppendIndexed implements persistence.SessionIndex.
func (j *Journal) AppendIndexed(ctx context.Context, stream string, expectedSeq uint64, recs []persistence.Record, entry persistence.IndexEntry) (uint64, error) {
	if err := persistence.ValidateIndexEntry(stream, entry); err != nil {
		return 0, err
	}
	return j.append(ctx, stream, expectedSeq, recs, &entry)
}

// putIndex writes e (at seq, written at), taking the lease when e asks for it and
// keeping the stored one otherwise. It runs inside the
// append's transaction.
func putIndex(tx *bbolt.Tx, e persistence.IndexEntry, seq uint64, at time.Time) error {
	b, err := tx.CreateBucketIfNotExists(bucketIndex)
	if err != nil {
		return err
	}
	switch old, ok := decodeIndex(e.SessionID, b.Get([]byte(e.SessionID))); {
	case e.LeaseOwner != "" && e.LeaseTTL > 0:
		e.LeaseExpires = time.Now().Add(e.LeaseTTL).UTC()
	case ok:
		e.LeaseOwner, e.LeaseExpires = old.LeaseOwner, old.LeaseExpires
	default:
		e.LeaseOwner, e.LeaseExpires = "", time.Time{}
	}
	e.Seq, e.UpdatedAt = seq, at
	return b.Put([]byte(e.SessionID), encodeIndex(e))
}

// RenewLease implements persistence.SessionIndex.
func (j *Journal) RenewLease(ctx context.Context, id, owner string, ttl time.Duration) error {
	return j.updateIndex(ctx, id, func(e *persistence.IndexEntry) bool {
		e.LeaseOwner, e.LeaseExpires = owner, time.Now().Add(ttl).UTC()
		return true
	})
}

// ReleaseLease implements persistence.SessionIndex.
func (j *Journal) ReleaseLease(ctx context.Context, id, owner string) error {
	return j.updateIndex(ctx, id, func(e *persistence.IndexEntry) bool {
		if e.LeaseOwner != owner {
			return false
		}
		e.LeaseOwner, e.LeaseExpires = "", time.Time{}
		return true
	})
}

// updateIndex changes session id's row with fn (if it exists and fn reports a change).
func (j *Journal) updateIndex(ctx context.Context, id string, fn func(*persistence.IndexEntry) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := j.enter(); err != nil {
		return err
	}
	defer j.leave()
	err := j.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketIndex)
		if b == nil {
			return nil
		}
		e, ok := decodeIndex(id, b.Get([]byte(id)))
		if !ok || !fn(&e) {
			return nil
		}
		return b.Put([]byte(id), encodeIndex(e))
	})
	if err != nil {
		return fmt.Errorf("lease of %s: %w", id, err)
	}
	return nil
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

// ListSessions implements persistence.SessionIndex.
func (j *Journal) ListSessions(ctx context.Context, status, after string, limit int) ([]persistence.IndexEntry, error) {
	return j.scanIndex(ctx, []byte(after), func(e persistence.IndexEntry) bool {
		return status == "" || e.Status == status
	}, limit)
}

// scanIndex returns the rows after key from (all with nil) that keep accepts, up to limit
// (0: all), in id order.
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
		if from != nil {
			if k, v = c.Seek(from); k != nil && bytes.Equal(k, from) {
				k, v = c.Next()
			}
		}
		for ; k != nil && (limit <= 0 || len(out) < limit); k, v = c.Next() {
			e, ok := decodeIndex(string(k), v)
			if !ok {
				return fmt.Errorf("session index row %q: %w", k, persistence.ErrCorrupt)
			}
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

// encodeIndex lays a row out as len(status)(1) | status | due(8) | seq(8) | updated(8) |
// lease expires(8) | lease owner. Times are Unix nanoseconds, 0 for none.
func encodeIndex(e persistence.IndexEntry) []byte {
	b := make([]byte, 0, 1+len(e.Status)+32+len(e.LeaseOwner))
	b = append(b, byte(len(e.Status)))
	b = append(b, e.Status...)
	b = binary.BigEndian.AppendUint64(b, nanos(e.DueAt))
	b = binary.BigEndian.AppendUint64(b, e.Seq)
	b = binary.BigEndian.AppendUint64(b, nanos(e.UpdatedAt))
	b = binary.BigEndian.AppendUint64(b, nanos(e.LeaseExpires))
	return append(b, e.LeaseOwner...)
}

func decodeIndex(id string, v []byte) (persistence.IndexEntry, bool) {
	if len(v) < 1 || len(v) < 1+int(v[0])+32 {
		return persistence.IndexEntry{}, false
	}
	n := int(v[0])
	e := persistence.IndexEntry{SessionID: id, Status: string(v[1 : 1+n])}
	v = v[1+n:]
	e.DueAt = fromNanos(binary.BigEndian.Uint64(v))
	e.Seq = binary.BigEndian.Uint64(v[8:])
	e.UpdatedAt = fromNanos(binary.BigEndian.Uint64(v[16:]))
	e.LeaseExpires = fromNanos(binary.BigEndian.Uint64(v[24:]))
	e.LeaseOwner = string(v[32:])
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
