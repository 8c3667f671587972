package persistence

import (
	"context"
	"time"
)

// AppendObserver is told the outcome of every append: how long the caller waited, how
// many records it carried, and its error (nil when stored). It must be fast and must not
// call the journal.
type AppendObserver func(d time.Duration, records int, err error)

// AppendObservable reports a journal's appends (the node records
// fathom_journal_append_duration_seconds from it), a part of SessionStore.
type AppendObservable interface {
	// ObserveAppends makes o the observer of every later append (nil: none). Safe to
	// call while appends run.
	ObserveAppends(o AppendObserver)
}

// StatusCounter counts the session index's sessions by status (the node's
// fathom_sessions{state} gauge), a part of SessionStore.
type StatusCounter interface {
	// CountByStatus returns the number of indexed sessions per status (statuses with none
	// are absent).
	CountByStatus(ctx context.Context) (map[string]int64, error)
}
