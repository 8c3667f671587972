package session

import (
	"context"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// appendIndexed appends recs to session id's stream after expected, with the index row
// of next (the state they lead to), taking the lease for owner when owner is set. It and
// appendIndexedAsync are the grain's only ways to write its stream.
func appendIndexed(ctx context.Context, d *Deps, id string, expected uint64, recs []persistence.Record, next *messages.SessionState, owner string) (uint64, error) {
	return d.Journal.AppendIndexed(ctx, id, expected, recs, indexEntry(d, id, next, owner))
}

// appendIndexedAsync is appendIndexed with its outcome passed to done, exactly once and
// on another goroutine (persistence.AppendIndexedAsync): nothing of the caller's waits
// for the commit.
func appendIndexedAsync(ctx context.Context, d *Deps, id string, expected uint64, recs []persistence.Record, next *messages.SessionState, owner string, done func(last uint64, err error)) {
	persistence.AppendIndexedAsync(ctx, d.Journal, id, expected, recs, indexEntry(d, id, next, owner), done)
}

// indexEntry is the index row of session id at next, with the lease for owner when
// owner is set and the session goes on.
func indexEntry(d *Deps, id string, next *messages.SessionState, owner string) persistence.IndexEntry {
	e := core.IndexEntryOf(next, d.Now())
	e.SessionID = id
	if owner != "" && !core.Terminal(next) {
		e.LeaseOwner, e.LeaseTTL = owner, d.Config.LeaseTTL
	}
	return e
}
