package persistence

import (
	"context"
	"errors"
	"time"
)

// Errors of SessionDeleter.DeleteSession (wrapped). Compare with errors.Is.
var (
	// ErrNotFound: the journal has no such session (no index row and no stream).
	ErrNotFound = errors.New("journal: no such session")
	// ErrNotTerminal: the session is not completed, failed or cancelled (or its status is
	// unknown: a stream without an index row); nothing was deleted.
	ErrNotTerminal = errors.New("journal: the session is not terminal")
)

// TerminalStatus reports whether an index status is terminal (completed, failed or
// cancelled): no event follows it.
func TerminalStatus(s string) bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// SessionDeleter removes a session for DELETE /v1/sessions/{id} and the retention
// janitor, a part of SessionStore.
type SessionDeleter interface {
	// SessionStatus returns session id's index status and tenant (DefaultTenant for a
	// row from before tenancy); ok is false when it has no index row.
	SessionStatus(ctx context.Context, id string) (status, tenant string, ok bool, err error)
	// DeleteSession removes session id's events, snapshots and index row in one
	// transaction, and only when its index row is terminal; otherwise it deletes
	// nothing and returns an error wrapping ErrNotTerminal (or ErrNotFound). In the same
	// transaction it keeps the session's Tombstone: whose it was (the row's tenant and
	// owner) and by, who deleted it.
	DeleteSession(ctx context.Context, id, by string) error
	// Tombstone returns what stays of deleted session id; ok is false when no deleted
	// session had that id (a later session of the same id replaces nothing: its own
	// delete writes a new tombstone).
	Tombstone(ctx context.Context, id string) (t Tombstone, ok bool, err error)
}

// Tombstone is what stays of a deleted session: whose it was and who deleted it, when.
type Tombstone struct {
	SessionID string
	// Tenant and Owner are the deleted session's.
	Tenant, Owner string
	// DeletedBy names who deleted it: a principal as "subject@tenant", or "retention" for
	// the retention janitor.
	DeletedBy string
	// DeletedAt is when (the journal's clock).
	DeletedAt time.Time
}
