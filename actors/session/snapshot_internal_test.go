package session

import (
	"testing"

	"github.com/fathom-agents/fathom/messages"
)

// TestSnapshotWaitsForASaveSlot: a snapshot that is due while every save slot of the
// node is taken is not started (no goroutine, no encoded state waiting for the journal)
// and stays due: the bytes appended since the last one are kept for the next commit,
// which starts it once a slot is free.
func TestSnapshotWaitsForASaveSlot(t *testing.T) {
	d := &Deps{Config: DefaultConfig(), snapshotSaves: make(chan struct{}, 1)}
	d.snapshotSaves <- struct{}{} // the node's one slot is taken
	s := snapshots{since: 4096}
	st := &messages.SessionState{SessionId: "s", Seq: d.Config.SnapshotEvery + 1}
	s.maybe(nil, d, "s", st) // returns before it would need the grain's context
	if s.saving || s.since != 4096 {
		t.Fatalf("with every slot taken: saving %v, since %d; want no save started and since kept at 4096", s.saving, s.since)
	}
	if len(d.snapshotSaves) != 1 {
		t.Fatalf("%d slots taken, want the 1 taken before", len(d.snapshotSaves))
	}
}
