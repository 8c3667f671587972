package persistence

import (
	"context"
	"errors"
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

// SessionDeleter is implemented by journals that keep the session index and can remove
// a session for DELETE /v1/sessions/{id} and the retention janitor.
type SessionDeleter interface {
	// SessionStatus returns session id's index status; ok is false when it has no index
	// row.
	SessionStatus(ctx context.Context, id string) (status string, ok bool, err error)
	// DeleteSession removes session id's events, snapshots and index row in one
	// transaction, and only when its index row is terminal; otherwise it deletes
	// nothing and returns an error wrapping ErrNotTerminal (or ErrNotFound).
	DeleteSession(ctx context.Context, id string) error
}
