package core

import (
	"fmt"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// FromSnapshot is the state snap, a snapshot of session id, holds, to fold the events
// after it onto: usable is false when this binary's FoldVersion did not make it (its
// state may differ from what this binary folds: rebuild it from the first event). A
// snapshot of another session or seq is corrupt (persistence.ErrCorrupt). The journal is
// read by actors/session/replay; the core reads nothing.
func FromSnapshot(id string, snap persistence.Snapshot) (s *messages.SessionState, usable bool, err error) {
	s, version, err := decodeSnapshot(snap.Data)
	if err != nil {
		return nil, false, err
	}
	if version != FoldVersion {
		// Made by another version of the fold (or before snapshots recorded it).
		return nil, false, nil
	}
	if s.GetSessionId() != id || s.GetSeq() != snap.Seq {
		return nil, false, fmt.Errorf("%w: snapshot %d of %s holds session %q at seq %d", persistence.ErrCorrupt, snap.Seq, id, s.GetSessionId(), s.GetSeq())
	}
	if s.GetLlmCalls() == 0 {
		// A snapshot from before llm_calls was folded: every call of a session is one of
		// the orchestrator's (iterations) or a sub-agent's (its llm_calls).
		s.LlmCalls = s.GetIterations()
		for _, sa := range s.GetSubAgents() {
			s.LlmCalls += sa.GetLlmCalls()
		}
	}
	return s, true, nil
}
