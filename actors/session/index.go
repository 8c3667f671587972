package session

import (
	"context"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// appendIndexed appends recs to session id's stream after expected, with the index row
// of next (the state they lead to), taking the lease for owner when owner is set. It is
// the grain's only way to write its stream.
func appendIndexed(ctx context.Context, d *Deps, id string, expected uint64, recs []persistence.Record, next *messages.SessionState, owner string) (uint64, error) {
	e := core.IndexEntryOf(next, d.Now())
	e.SessionID = id
	if owner != "" && !core.Terminal(next) {
		e.LeaseOwner, e.LeaseTTL = owner, d.Config.LeaseTTL
	}
	return d.Journal.AppendIndexed(ctx, id, expected, recs, e)
}
