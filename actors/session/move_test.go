package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
	"github.com/fathom-agents/fathom/persistence"
)

// TestMovedGrainFinishesItsToolCall: the activation of a session running a tool call is
// sent a PoisonPill, as Proto.Actor's identity hashing sends one to every activation
// whose identity moved to a member that joined. The grain does not cut the call: the
// tool goes on, its result is recorded by that activation, which then stops and hands
// the session over, and the session completes with no client request. The tool ran
// once; nothing is recorded twice.
func TestMovedGrainFinishesItsToolCall(t *testing.T) {
	j, ex, release, opts := sleepyRun(t)
	h := startSleepy(t, opts, "mv1", ex)
	c := h.node.Cluster().Cluster()
	pid := c.Get("mv1", "Session")
	if pid == nil {
		t.Fatal("no activation of session mv1")
	}
	c.ActorSystem.Root.Poison(pid)
	// The grain took the PoisonPill for a move: it still answers (its mailbox is open)
	// and the call still runs, not cancelled.
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, err := c.ActorSystem.Root.RequestFuture(pid, &actor.Touch{}, time.Second).Result()
		return err == nil
	}, "the moving grain does not answer")
	if evs := storedEvents(t, j, "mv1"); len(ofType(evs, "tool_result")) != 0 {
		t.Fatalf("the tool call was cut: %s recorded before the tool was released", ofType(evs, "tool_result")[0].Type())
	}
	close(release)
	evs := waitTerminal(t, j, "mv1", 20*time.Second)
	mustComplete(t, evs)
	if n := ex.get("mv1/s/tool-1"); n != 1 {
		t.Fatalf("sleepy ran %d times: the move cut it and it ran again", n)
	}
	if called, results := len(ofType(evs, "tool_called")), len(ofType(evs, "tool_result")); called != 1 || results != 1 {
		t.Fatalf("%d tool_called, %d tool_result, want one each", called, results)
	}
}

// TestActivationWaitsWhileAnotherMemberHoldsTheLease: a session with a tool call in
// flight is activated on a node while another member still holds its lease (its
// activation, moving, may still run the call). The new activation answers reads from
// the journal's state, runs nothing and answers commands unavailable, naming the holder,
// until the lease is released; then it reloads, takes the lease and runs the call.
func TestActivationWaitsWhileAnotherMemberHoldsTheLease(t *testing.T) {
	j, ex, release, opts := sleepyRun(t)
	stopNode(t, startSleepy(t, opts, "held1", ex)) // the call is in flight, with no activation
	ctx := context.Background()
	const other = "10.9.9.9:7777"
	if err := j.RenewLease(ctx, "held1", other, time.Minute); err != nil {
		t.Fatal(err)
	}
	h2 := startHarness(t, opts)
	// A read is answered from the journal's state; a command waits (unavailable).
	st, err := h2.state("held1")
	if err != nil || len(st.GetState().GetPendingTools()) != 1 {
		t.Fatalf("GetState while %s holds the lease: %v (pending tools %v), want the state with the call in flight", other, err, st.GetState().GetPendingTools())
	}
	_, err = h2.node.Session("held1").Pause(&messages.PauseRequest{CommandId: "p1"}, cluster.WithTimeout(10*time.Second))
	if !sessiongrain.IsUnavailable(err) || !strings.Contains(err.Error(), "still hosted by member "+other) {
		t.Fatalf("Pause while %s holds the lease: %v, want unavailable naming it", other, err)
	}
	c := h2.node.Cluster().Cluster()
	pid := c.Get("held1", "Session")
	if _, err := c.ActorSystem.Root.RequestFuture(pid, &actor.Touch{}, 10*time.Second).Result(); err != nil {
		t.Fatal(err) // everything queued before the probe (the resume) was handled
	}
	if n := ex.get("held1/s/tool-1"); n != 1 {
		t.Fatalf("sleepy ran %d times while another member held the lease, want 1 (the cut run)", n)
	}
	if h, err := j.LeaseHolder(ctx, "held1"); err != nil || h != other {
		t.Fatalf("lease holder %q (%v): the waiting activation took the lease of %s", h, err, other)
	}
	if err := j.ReleaseLease(ctx, "held1", other); err != nil {
		t.Fatal(err)
	}
	if _, err := h2.state("held1"); err != nil {
		t.Fatalf("GetState once the lease was released: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return ex.get("held1/s/tool-1") == 2 }, "the call did not run once the lease was released")
	testenv.Eventually(t, 10*time.Second, func() bool { // the renewal runs off the grain's mailbox
		h, err := j.LeaseHolder(ctx, "held1")
		return err == nil && h == c.ActorSystem.Address()
	}, "the activation that took the session over does not hold its lease")
	close(release)
	mustComplete(t, waitTerminal(t, j, "held1", 20*time.Second))
}

// sleepyRun prepares the move tests' run: a journal, the tools' executions, the channel
// that releases sleepy, and the options of a node whose one-step plan calls sleepy once.
func sleepyRun(t *testing.T) (persistence.SessionStore, *executions, chan struct{}, harnessOpts) {
	t.Helper()
	j := openJournal(t)
	t.Cleanup(func() { _ = j.Close() })
	ex, release := &executions{}, make(chan struct{})
	sc := script(t,
		`{"tool_match":"released","response":"all done: {{.Tool}}"}`,
		`{"match":"Step: find it","tool_calls":[{"name":"sleepy","arguments":"{}"}]}`,
	)
	return j, ex, release, harnessOpts{journal: j, script: sc, tools: testToolsWith(t, ex, release)}
}

// startSleepy starts a node with opts and session id on it, and waits until its sleepy
// call runs.
func startSleepy(t *testing.T, opts harnessOpts, id string, ex *executions) *harness {
	t.Helper()
	h := startHarness(t, opts)
	if _, err := h.start(id, "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return ex.get(id+"/s/tool-1") == 1 }, "sleepy did not start")
	return h
}
