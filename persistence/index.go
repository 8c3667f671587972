package persistence

import (
	"context"
	"fmt"
	"time"
)

// Session statuses kept in the session index. They are the values of the gateway's
// `GET /v1/sessions?status=` filter.
const (
	StatusRunning       = "running"
	StatusAwaitingHuman = "awaiting_human"
	StatusInterrupted   = "interrupted"
	StatusCompleted     = "completed"
	StatusFailed        = "failed"
	StatusCancelled     = "cancelled"
)

// ValidStatus reports whether s is one of the index's statuses.
func ValidStatus(s string) bool {
	switch s {
	case StatusRunning, StatusAwaitingHuman, StatusInterrupted, StatusCompleted, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// IndexEntry is one session's row of the session index.
type IndexEntry struct {
	// SessionID is the session (stream) id.
	SessionID string
	// Status is one of the Status* constants.
	Status string
	// DueAt is when the session next needs a live activation: the time of the append for
	// pending work, a retry's retry_at, a human-input or interrupt deadline. Zero means
	// never (terminal, or waiting on a human without a deadline): the reactivator leaves
	// such a session alone.
	DueAt time.Time
	// Seq is the stream's seq after the append that wrote the entry.
	Seq uint64
	// UpdatedAt is when the entry was written (set by the journal).
	UpdatedAt time.Time
	// LeaseOwner is the cluster member whose activation holds the session's lease ("" for
	// none); LeaseExpires is when that lease lapses unless renewed (output only).
	// AppendIndexed with a LeaseOwner and a positive LeaseTTL also takes the lease for
	// LeaseTTL (the writer is evidently alive); otherwise it keeps the stored lease.
	LeaseOwner   string
	LeaseExpires time.Time
	// LeaseTTL is input only (AppendIndexed).
	LeaseTTL time.Duration
}

// SessionIndex is implemented by journals that keep the session index: one row per
// session with its status and next due time, written in the same transaction as the
// append that changes it, plus a lease renewed by the activation that owns the session.
// Callers check for it with a type assertion; a journal without it (a test double) simply
// has no index, and nothing reactivates its sessions.
//
// The lease is a liveness hint only: the journal's expected sequence stays the one guard
// against two writers.
type SessionIndex interface {
	// AppendIndexed is Journal.Append that also upserts entry (SessionID = stream) in the
	// same transaction: both are stored or neither. With entry.LeaseOwner and a positive
	// entry.LeaseTTL the append also renews the lease; otherwise the stored lease is kept.
	AppendIndexed(ctx context.Context, stream string, expectedSeq uint64, recs []Record, entry IndexEntry) (uint64, error)
	// RenewLease makes owner the holder of session id's lease for ttl from now (the store's
	// clock). A session not in the index is left alone (no error).
	RenewLease(ctx context.Context, id, owner string, ttl time.Duration) error
	// ReleaseLease drops session id's lease if owner holds it.
	ReleaseLease(ctx context.Context, id, owner string) error
	// Due returns up to limit sessions that need a live activation and have none: DueAt set
	// and passed, and no lease or an expired one. Earliest DueAt first.
	Due(ctx context.Context, limit int) ([]IndexEntry, error)
	// ListSessions returns up to limit entries ordered by session id, after the id after
	// ("" from the start), with status status ("" for any).
	ListSessions(ctx context.Context, status, after string, limit int) ([]IndexEntry, error)
}

// ValidateIndexEntry checks an entry the way every SessionIndex must: a known status and
// the stream's id. The error wraps ErrInvalid.
func ValidateIndexEntry(stream string, e IndexEntry) error {
	if e.SessionID != stream {
		return fmt.Errorf("%w: index entry for %q appended to stream %q", ErrInvalid, e.SessionID, stream)
	}
	if !ValidStatus(e.Status) {
		return fmt.Errorf("%w: index status %q", ErrInvalid, e.Status)
	}
	return nil
}
