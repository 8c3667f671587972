//go:build !race

// Two cluster members in one process trip data races inside Proto.Actor's remoting (see
// activation_norace_test.go): `make test` runs this file in its pass without -race.

package session_test

import (
	"context"
	"testing"
	"time"
)

// TestLiveEventsAcrossNodes: a session runs on node A; a subscriber on
// node B (same journal, its feed polling) follows it live from seq 0 to its end, every
// event once and in order, although only A's feed is published to.
func TestLiveEventsAcrossNodes(t *testing.T) {
	j := openJournal(t)
	a := startHarness(t, harnessOpts{journal: j})
	b := startHarness(t, harnessOpts{journal: j, feedPoll: 50 * time.Millisecond})
	sub := b.node.Feed().Subscribe("x1", 0)
	defer sub.Close()
	if _, err := a.start("x1", "c1", "Write a haiku about logs"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for want := uint64(1); ; want++ {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after seq %d: %v", want-1, err)
		}
		if ev.GetSeq() != want {
			t.Fatalf("seq %d, want %d", ev.GetSeq(), want)
		}
		if ev.Type() == "session_completed" {
			break
		}
	}
}
