package node

import (
	"encoding/json"
	"fmt"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/messages"
)

// GanttJSON is gateway.Config.Gantt: the session core's Gantt read model of session
// id's events (core.GanttOf), with the restarts of its grain up to its last event as
// marks (one before the first event, while the start was handled, is drawn at the
// start). The gateway reads the events; the fold lives beside the session core.
func GanttJSON(id string, events []*messages.Event, restarts []gateway.GanttRestart) ([]byte, error) {
	g, err := core.GanttOf(id, events)
	if err != nil {
		return nil, err
	}
	for _, r := range restarts {
		if r.UnixNano > g.EndUnixNano {
			continue
		}
		g.Marks = append(g.Marks, core.Mark{Kind: core.MarkRestart, UnixNano: r.UnixNano, Label: r.Label})
	}
	b, err := json.Marshal(g)
	if err != nil {
		return nil, fmt.Errorf("encode the gantt of %s: %w", id, err)
	}
	return b, nil
}
