//go:build !race

// Two cluster members in one process trip data races inside Proto.Actor's remoting (grpc's
// global logger is rewritten by every member start), so this file is excluded from -race
// runs; `make test` runs it in a second pass without -race.

package session_test

import (
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
)

// TestTwoActivationsOneWins runs two independent single-node clusters on one journal:
// both activate the same session, as after a split brain. The stale activation loses the
// expected-sequence race and stops; no event is lost or duplicated.
func TestTwoActivationsOneWins(t *testing.T) {
	j := openJournal(t)
	a := startHarness(t, harnessOpts{journal: j})
	b := startHarness(t, harnessOpts{journal: j})
	if _, err := b.state("s1"); !sessiongrain.IsNotFound(err) { // b activates with an empty state
		t.Fatalf("b: err = %v, want NOT_FOUND", err)
	}
	if _, err := a.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	_, err := b.start("s1", "c2", "other goal")
	if !sessiongrain.IsUnavailable(err) {
		t.Fatalf("stale activation: err = %v, want UNAVAILABLE (fenced)", err)
	}
	// b's next activation loads the journal and sees the session a started.
	testenv.Eventually(t, 5*time.Second, func() bool {
		_, err = b.start("s1", "c2", "other goal")
		return sessiongrain.IsFailedPrecondition(err)
	}, "b never reloaded: last err %v", err)
	evs := waitTerminal(t, j, "s1", 30*time.Second)
	for _, typ := range []string{"session_started", "plan_created", "session_completed"} {
		if count(evs, typ) != 1 {
			t.Fatalf("%d %s events, want 1: %v", count(evs, typ), typ, evs)
		}
	}
}
