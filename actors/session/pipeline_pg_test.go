package session_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/postgres"
)

// startDirect starts a harness node on j itself (harnessOpts.direct, not wrapped in
// journaltest.Faulty, which appends synchronously): its grains append through j's
// AppendIndexedAsync.
func startDirect(t *testing.T, j persistence.SessionStore, script *mock.Script) *node.Node {
	t.Helper()
	if _, ok := j.(persistence.AsyncIndexAppender); !ok {
		t.Fatalf("%T has no asynchronous appends", j)
	}
	return startHarness(t, harnessOpts{journal: j, script: script, direct: true}).node
}

// TestPipelinedAppendsOnPostgres runs sessions on the PostgreSQL journal itself (no test
// wrapper: the grains' pipelined appends are asynchronous, through the node's format
// gate to the group-commit committers, and completed by their callbacks): every session completes with its
// journal contiguous and every step and call recorded once, and the live feed shows
// the stored events in order.
func TestPipelinedAppendsOnPostgres(t *testing.T) {
	const sessions, steps = 6, 6
	j, err := postgres.Open(context.Background(), testenv.PostgresDSN(t), postgres.Options{Committers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() }) // after the node's Stop, which closes it first
	n := startDirect(t, j, stepsScript(t, steps))
	run := fmt.Sprintf("pgpipe-%d", time.Now().UnixNano())
	first := run + "-0"
	sub := n.Feed().Subscribe(first, 0)
	defer sub.Close()
	for i := range sessions {
		id := fmt.Sprintf("%s-%d", run, i)
		if _, err := n.Session(id).Start(&messages.StartRequest{CommandId: "c-" + id, Goal: "goal"}, cluster.WithTimeout(10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range sessions {
		checkExactlyOnce(t, waitTerminal(t, j, fmt.Sprintf("%s-%d", run, i), 60*time.Second), steps)
	}
	evs := storedEvents(t, j, first)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, want := range evs {
		rec, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after %d live events: %v", i, err)
		}
		if rec.GetSeq() != want.GetSeq() || rec.Type() != want.Type() {
			t.Fatalf("live event %d is %d %s, stored %d %s", i, rec.GetSeq(), rec.Type(), want.GetSeq(), want.Type())
		}
	}
}

// TestPipelinedAppendsSurvivePostgresOutage cuts the node off its PostgreSQL journal
// (used directly: the pipelined appends are asynchronous) while sessions run: appends
// fail or time out while it is cut, and once it is back every session completes with
// its journal contiguous and no step or answer recorded twice.
func TestPipelinedAppendsSurvivePostgresOutage(t *testing.T) {
	proxy, cutDSN := testenv.CutPostgres(t)
	j, err := postgres.Open(context.Background(), cutDSN, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	n := startDirect(t, j, slowSteps(t))
	var failed atomic.Int64
	j.ObserveAppends(func(_ time.Duration, _ int, err error) { // after the node's own observer
		if err != nil {
			failed.Add(1)
		}
	})
	running := []string{"pgo-1", "pgo-2", "pgo-3", "pgo-4"}
	for _, id := range running {
		if _, err := n.Session(id).Start(&messages.StartRequest{CommandId: "c-" + id, Goal: "survive the outage"}, cluster.WithTimeout(10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range running {
		testenv.Eventually(t, 15*time.Second, func() bool {
			return count(storedEvents(t, j, id), "step_started") > 0
		}, "session %s never started a step", id)
	}
	proxy.SetCut(true)
	testenv.Eventually(t, 30*time.Second, func() bool { return failed.Load() > 0 }, "no append failed during the outage")
	time.Sleep(time.Second)
	proxy.SetCut(false)
	for _, id := range running {
		evs := waitTerminal(t, j, id, 60*time.Second)
		checkExactlyOnce(t, evs, 2)
		if c := count(evs, "session_started"); c != 1 {
			t.Fatalf("session %s: %d session_started", id, c)
		}
	}
}
