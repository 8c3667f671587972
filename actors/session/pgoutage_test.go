package session_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/journaltest"
	"github.com/fathom-agents/fathom/persistence/postgres"
)

// TestPostgresOutageLosesNothing cuts the node off its PostgreSQL journal while sessions
// are running: a command during the outage gets a clear UNAVAILABLE error (never an
// internal one), and once the database is back every session, including the one whose
// start was refused and is retried with the same command id, completes with its journal
// contiguous and no step, start or answer recorded twice, with no client request to the
// running ones.
func TestPostgresOutageLosesNothing(t *testing.T) {
	proxy, cutDSN := testenv.CutPostgres(t)
	ctx := context.Background()
	j, err := postgres.Open(ctx, cutDSN, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	// The wrapper sets no fault: it reports which sessions met the outage (a refused append).
	var mu sync.Mutex
	refused := map[string]bool{}
	fj := journaltest.NewFaulty(j)
	fj.OnAppend(func(stream string, _ []persistence.Record, _ uint64, err error) {
		if err != nil {
			mu.Lock()
			refused[stream] = true
			mu.Unlock()
		}
	})
	h := startHarness(t, harnessOpts{journal: fj, script: slowSteps(t)})

	running := []string{"pg-1", "pg-2", "pg-3"}
	for _, id := range running {
		if _, err := h.start(id, "c-"+id, "survive the outage"); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range running {
		testenv.Eventually(t, 15*time.Second, func() bool {
			return count(storedEvents(t, j, id), "step_started") > 0
		}, "session %s never started a step", id)
	}

	proxy.SetCut(true)
	_, err = h.node.Session("pg-late").Start(&messages.StartRequest{CommandId: "c-late", Goal: "start during the outage"}, cluster.WithTimeout(15*time.Second))
	if err == nil {
		t.Fatal("a start during the outage was acknowledged")
	}
	var ge *cluster.GrainErrorResponse
	if !errors.As(err, &ge) || ge.Reason != messages.ErrorReason_UNAVAILABLE.String() {
		t.Fatalf("start during the outage: %v, want an UNAVAILABLE grain error", err)
	}
	if strings.Contains(strings.ToLower(ge.Message), "internal") {
		t.Fatalf("start during the outage: %q reads as an internal error", ge.Message)
	}
	// The outage lasts until every running session has met it: a step ended and its append failed.
	testenv.Eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range running {
			if !refused[id] {
				return false
			}
		}
		return true
	}, "not every running session of %v had an append refused during the outage", running)
	proxy.SetCut(false)

	testenv.Eventually(t, 30*time.Second, func() bool {
		_, err := h.node.Session("pg-late").Start(&messages.StartRequest{CommandId: "c-late", Goal: "start during the outage"}, cluster.WithTimeout(5*time.Second))
		return err == nil
	}, "the refused start never succeeded after the outage")
	for _, id := range append(running, "pg-late") {
		evs := waitTerminal(t, j, id, 60*time.Second)
		checkExactlyOnce(t, evs, 2)
		if n := count(evs, "session_started"); n != 1 {
			t.Fatalf("session %s: %d session_started", id, n)
		}
		answers := map[string]int{}
		for _, ev := range evs {
			if r := ev.GetLlmResponded(); r != nil {
				answers[r.GetCallId()]++
				if answers[r.GetCallId()] > 1 {
					t.Fatalf("session %s: call %s answered twice", id, r.GetCallId())
				}
			}
		}
	}
}
