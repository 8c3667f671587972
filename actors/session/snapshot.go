package session

import (
	"context"
	"log/slog"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// snapshotGrowth bounds the bytes snapshots write against the bytes the journal's
// events take: a snapshot is due once the events since the last one are at least
// 1/snapshotGrowth of its size. A snapshot holds the whole state, which grows with the
// session (its transcripts), so snapshots every SnapshotEvery events alone made a long
// session write and encode O(length²) bytes, a tenth of a step's CPU at 50 steps. With
// the rule, snapshots of a growing session are spaced geometrically (each state ~1 +
// 1/snapshotGrowth times the last) and their bytes stay within snapshotGrowth times the
// events'; a load or a time-travel read replays at most ~1/snapshotGrowth of the state's
// worth of events past its snapshot. 2 halves the snapshot bytes of 4 (a twentieth of a
// 50-step session's CPU) for a replay of at most half a state's worth of events, which
// decode at about the rate a snapshot does.
const snapshotGrowth = 2

// maxSnapshotSaves bounds the snapshot saves in flight on a node. A save encodes the
// whole state, then waits for a journal connection: when the journal is the bottleneck
// (every active session's appends waiting on its group commit), hundreds of saves waited
// at once, each holding its encoded state and a goroutine, and took connections from the
// appends. A snapshot only shortens recovery: one that finds every slot taken is not
// started, and the session's next commit tries again (the bytes since the last one are
// kept).
const maxSnapshotSaves = 16

// snapshotDone reports a background snapshot save. It never leaves the process.
type snapshotDone struct {
	seq   uint64
	bytes int // the snapshot's size
	err   error
}

// snapshots is the grain's snapshot policy: when a snapshot is due, and the one save in
// flight.
type snapshots struct {
	// seq is the seq of the last snapshot (loaded or saved).
	seq uint64
	// saving is set while a save runs in the background.
	saving bool
	// bytes is the size of the last snapshot this activation saved; since the size of
	// the events appended since it was taken.
	bytes, since int
}

// Committed implements Observer: it counts the bytes appended since the last snapshot.
func (s *snapshots) Committed(c Commit) { s.since += c.Bytes }

// maybe saves a snapshot of st once SnapshotEvery events and enough bytes
// (snapshotGrowth) were appended since the last one, off the command path: a snapshot
// only shortens recovery, so the grain does not wait for it. At most one save is in
// flight; its outcome comes back as a snapshotDone message. The state it encodes is
// never mutated (commit swaps in a new one), so the goroutine may read it.
//
// st is a durable state: the grain's after a commit, a pipelined append's when it returns.
func (s *snapshots) maybe(ctx cluster.GrainContext, d *Deps, id string, st *messages.SessionState) {
	if s.saving || st.GetSeq() < s.seq+d.Config.SnapshotEvery || s.since*snapshotGrowth < s.bytes {
		return
	}
	slots := d.snapshotSaves
	if slots != nil {
		select {
		case slots <- struct{}{}:
		default:
			return // every slot is taken (maxSnapshotSaves): the next commit tries again
		}
	}
	s.saving = true
	s.since = 0
	j, timeout, now := d.Journal, d.Config.JournalTimeout, d.Now()
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		if slots != nil {
			defer func() { <-slots }()
		}
		data, err := core.EncodeState(st)
		if err == nil {
			sctx, cancel := context.WithTimeout(context.Background(), timeout)
			err = j.SaveSnapshot(sctx, id, persistence.Snapshot{Seq: st.GetSeq(), Data: data, At: now})
			cancel()
		}
		root.Send(self, &snapshotDone{seq: st.GetSeq(), bytes: len(data), err: err})
	}()
}

// done handles a save's outcome.
func (s *snapshots) done(msg *snapshotDone, log *slog.Logger) {
	s.saving = false
	if msg.err != nil {
		// The events are durable; the next commit tries again.
		log.Warn("save snapshot failed", "seq", msg.seq, "error", msg.err)
		s.since = max(s.since, s.bytes/snapshotGrowth+1)
		return
	}
	s.seq = max(s.seq, msg.seq)
	s.bytes = msg.bytes
}
