// Package replay reads a session's journal: its state folded from the newest usable
// snapshot and the events after it (Load), its events (Events), its state after a step
// (StateAtStep). It is the session core's I/O, kept out of the core (actors/session/core
// folds and decides, and reads nothing): the grain, the CLI's offline readers and the Go
// API all read a session through it, folding with the same core.Apply.
package replay

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// errStop ends a journal read early.
var errStop = errors.New("stop")

// Load folds a session's journal into its state: the newest snapshot at or before upTo
// (when this binary's FoldVersion made it, core.FromSnapshot; otherwise the state is
// rebuilt from the first event), then every later event through upTo, through the same
// Apply the grain uses. upTo 0 means the whole stream. It also returns the seq of the
// snapshot it started from. A stream without events yields the empty state.
func Load(ctx context.Context, j persistence.Journal, id string, upTo uint64) (*messages.SessionState, uint64, error) {
	if upTo == 0 {
		upTo = math.MaxUint64
	}
	s := core.NewState(id)
	var snapSeq uint64
	snap, ok, err := j.LoadSnapshot(ctx, id, upTo)
	if err != nil {
		return nil, 0, err // the journal's error names the snapshot and the stream
	}
	if ok {
		from, usable, err := core.FromSnapshot(id, snap)
		if err != nil {
			return nil, 0, err
		}
		if usable {
			s, snapSeq = from, snap.Seq
		}
	}
	err = j.Load(ctx, id, s.GetSeq(), func(r persistence.Record) error {
		if r.Seq > upTo {
			return errStop
		}
		ev, err := core.DecodeRecord(r)
		if err != nil {
			return err
		}
		return core.Apply(s, ev)
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, 0, fmt.Errorf("replay %s: %w", id, err)
	}
	return s, snapSeq, nil
}

// Events calls fn with every stored event of session id after afterSeq, in order.
func Events(ctx context.Context, j persistence.Journal, id string, afterSeq uint64, fn func(*messages.Event) error) error {
	return j.Load(ctx, id, afterSeq, func(r persistence.Record) error {
		ev, err := core.DecodeRecord(r)
		if err != nil {
			return err
		}
		return fn(ev)
	})
}

// StateAtStep folds the journal of session id into its state right after step number n
// ended (core.StepEndSeq; the same answer as the grain's StateAt, for tools that read a
// journal directly).
func StateAtStep(ctx context.Context, j persistence.Journal, id string, n uint32) (*messages.SessionState, error) {
	cur, _, err := Load(ctx, j, id, 0)
	if err != nil {
		return nil, err
	}
	if cur.GetSeq() == 0 {
		return nil, fmt.Errorf("session %q not found", id)
	}
	seq, err := core.StepEndSeq(cur, n)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	s, _, err := Load(ctx, j, id, seq)
	return s, err
}
