// Package indexfacts reads the session index's facts from a batch of a session's event
// records: the user and goal of session_started and the cost of llm_responded. It is the
// persistence.FactsFunc the node gives its journal (bolt.Options.Facts,
// postgres.Options.Facts); the journal packages themselves never decode events.
package indexfacts

import (
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

var _ persistence.FactsFunc = Of

// Of returns the facts of recs. Records that do not decode add nothing: the journal's
// readers report those.
func Of(recs []persistence.Record) persistence.SessionFacts {
	var f persistence.SessionFacts
	for _, r := range recs {
		switch r.Type {
		case "session_started", "llm_responded":
		default:
			continue
		}
		ev := &messages.Event{}
		if err := proto.Unmarshal(r.Data, ev); err != nil {
			continue
		}
		if s := ev.GetSessionStarted(); s != nil {
			f.Started, f.UserID, f.Goal = true, s.GetUserId(), persistence.CutGoal(s.GetGoal())
		}
		f.CostUSD += ev.GetLlmResponded().GetCostUsd()
	}
	return f
}
