package core

import (
	"context"
	"fmt"
	"math"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// Load folds a session's journal into its state: the newest snapshot at or before upTo
// (when this binary's FoldVersion made it; otherwise the state is rebuilt from the first
// event), then every later event through upTo, through the same Apply the grain uses. upTo 0
// means the whole stream. It also returns the seq of the snapshot it started from.
// A stream without events yields the empty state.
func Load(ctx context.Context, j persistence.Journal, id string, upTo uint64) (*messages.SessionState, uint64, error) {
	if upTo == 0 {
		upTo = math.MaxUint64
	}
	s := NewState(id)
	var snapSeq uint64
	snap, ok, err := j.LoadSnapshot(ctx, id, upTo)
	if err != nil {
		return nil, 0, err // the journal's error names the snapshot and the stream
	}
	if ok {
		var version uint64
		if s, version, err = decodeSnapshot(snap.Data); err != nil {
			return nil, 0, err
		}
		if version != FoldVersion {
			// Made by another version of the fold (or before snapshots recorded it): its
			// state may differ from what this binary folds; rebuild it from the events.
			s, ok = NewState(id), false
		}
	}
	if ok {
		if s.GetSessionId() != id || s.GetSeq() != snap.Seq {
			return nil, 0, fmt.Errorf("%w: snapshot %d of %s holds session %q at seq %d", persistence.ErrCorrupt, snap.Seq, id, s.GetSessionId(), s.GetSeq())
		}
		snapSeq = snap.Seq
		if s.GetLlmCalls() == 0 {
			// A snapshot from before llm_calls was folded: every call of a session is
			// one of the orchestrator's (iterations) or a sub-agent's (its llm_calls).
			s.LlmCalls = s.GetIterations()
			for _, sa := range s.GetSubAgents() {
				s.LlmCalls += sa.GetLlmCalls()
			}
		}
	}
	errStop := fmt.Errorf("stop")
	err = j.Load(ctx, id, s.GetSeq(), func(r persistence.Record) error {
		if r.Seq > upTo {
			return errStop
		}
		ev, err := DecodeRecord(r)
		if err != nil {
			return err
		}
		return Apply(s, ev)
	})
	if err != nil && err != errStop {
		return nil, 0, fmt.Errorf("replay %s: %w", id, err)
	}
	return s, snapSeq, nil
}

// Events calls fn with every stored event of session id after afterSeq, in order.
func Events(ctx context.Context, j persistence.Journal, id string, afterSeq uint64, fn func(*messages.Event) error) error {
	return j.Load(ctx, id, afterSeq, func(r persistence.Record) error {
		ev, err := DecodeRecord(r)
		if err != nil {
			return err
		}
		return fn(ev)
	})
}
