package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// indexEntry reads session id's row of the session index.
func indexEntry(t *testing.T, j persistence.Journal, id string) (persistence.IndexEntry, bool) {
	t.Helper()
	es, err := j.(persistence.SessionIndex).ListSessions(context.Background(), persistence.ListQuery{IDPrefix: id})
	if err != nil {
		t.Fatalf("list the session index: %v", err)
	}
	for _, e := range es {
		if e.SessionID == id {
			return e, true
		}
	}
	return persistence.IndexEntry{}, false
}

// TestIndexAndLeaseFollowTheSession: while a session runs, its index row says running,
// due now, leased by the hosting member; once it completes the row says completed with
// no due time (the reactivator leaves it alone).
func TestIndexAndLeaseFollowTheSession(t *testing.T) {
	j := openBoltJournal(t)
	t.Cleanup(func() { _ = j.Close() })
	sc := rawScript(t, `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"a\",\"type\":\"custom\",\"description\":\"one\"},{\"id\":\"b\",\"type\":\"custom\",\"description\":\"two\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","response":"done {{.Step}}","delay_ms":400}]}`)
	h := startHarness(t, harnessOpts{journal: j, script: sc, cfg: func(c *session.Config) { c.LeaseTTL = time.Second }})
	if _, err := h.start("ix", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	var e persistence.IndexEntry
	testenv.Eventually(t, 10*time.Second, func() bool {
		var ok bool
		e, ok = indexEntry(t, j, "ix")
		return ok && e.Status == persistence.StatusRunning && e.LeaseOwner == h.node.Address() && !e.DueAt.IsZero()
	}, "index row of a running session: %+v", e)
	evs := waitTerminal(t, j, "ix", 20*time.Second)
	mustComplete(t, evs)
	e, _ = indexEntry(t, j, "ix")
	if e.Status != persistence.StatusCompleted || !e.DueAt.IsZero() || e.Seq != evs[len(evs)-1].GetSeq() {
		t.Fatalf("index row of a completed session: %+v (last seq %d)", e, evs[len(evs)-1].GetSeq())
	}
	stopNode(t, h)
	if e, _ = indexEntry(t, j, "ix"); e.LeaseOwner != "" {
		t.Fatalf("the lease outlived the node's graceful stop: %+v", e)
	}
}

// TestRunningSessionContinuesWhenANodeStartsWithoutAnyRequest: a session interrupted
// mid-step by its node's stop continues, with no client request, as soon as a node runs
// again: the new node's reactivator finds it in the session index (due, unleased) and
// activates it.
func TestRunningSessionContinuesWhenANodeStartsWithoutAnyRequest(t *testing.T) {
	j := openBoltJournal(t)
	t.Cleanup(func() { _ = j.Close() })
	sc := rawScript(t, `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"a\",\"type\":\"custom\",\"description\":\"one\"},{\"id\":\"b\",\"type\":\"custom\",\"description\":\"two\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","response":"done {{.Step}}","delay_ms":1500}]}`)
	cfg := func(c *session.Config) { c.LeaseTTL = time.Second }
	h := startHarness(t, harnessOpts{journal: j, script: sc, cfg: cfg})
	if _, err := h.start("r", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return count(storedEvents(t, j, "r"), "step_started") > 0 }, "the session never started a step")
	stopNode(t, h) // mid-step: the step's LLM call is in flight
	stoppedAt := len(storedEvents(t, j, "r"))
	began := time.Now()
	_ = startHarness(t, harnessOpts{journal: j, script: sc, cfg: cfg})
	testenv.Eventually(t, 10*time.Second, func() bool { return len(storedEvents(t, j, "r")) > stoppedAt },
		"no event after the restart without a client request (stopped at %d events)", stoppedAt)
	t.Logf("first event %s after the node started", time.Since(began))
	mustComplete(t, waitTerminal(t, j, "r", 30*time.Second))
}

// TestDeadlineDueWhileEveryNodeWasDownFiresOnStart: a human-input deadline that passes
// while no node runs fires within 5 s of the first node starting, with no client request.
func TestDeadlineDueWhileEveryNodeWasDownFiresOnStart(t *testing.T) {
	j := openBoltJournal(t)
	t.Cleanup(func() { _ = j.Close() })
	sc := humanStepScript(t, `,\"interrupt_timeout_ms\":300,\"default_action\":\"continue\"`)
	h := startHarness(t, harnessOpts{journal: j, script: sc})
	if _, err := h.start("d", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, h, "d", messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN)
	deadline := time.Unix(0, st.GetAwaiting()[0].GetDeadlineUnixNano())
	stopNode(t, h)
	if n := count(storedEvents(t, j, "d"), "hitl_received"); n != 0 {
		t.Fatalf("the deadline fired before the node stopped (%d hitl_received); make it longer", n)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return time.Now().After(deadline) }, "the deadline %s never passed", deadline)
	began := time.Now()
	_ = startHarness(t, harnessOpts{journal: j, script: sc})
	testenv.Eventually(t, 5*time.Second, func() bool { return count(storedEvents(t, j, "d"), "hitl_received") == 1 },
		"the deadline that passed while every node was down did not fire within 5s of the start")
	t.Logf("deadline fired %s after the node started", time.Since(began))
	evs := waitTerminal(t, j, "d", 20*time.Second)
	mustComplete(t, evs)
	if rec := ofType(evs, "hitl_received"); rec[0].GetHitlReceived().GetBy() != "timeout" {
		t.Fatalf("hitl_received %v", rec)
	}
}
