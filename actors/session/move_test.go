package session_test

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestMovedGrainFinishesItsToolCall: the activation of a session running a tool call is
// sent a PoisonPill, as Proto.Actor's identity hashing sends one to every activation
// whose identity moved to a member that joined. The grain does not cut the call: the
// tool goes on, its result is recorded by that activation, which then stops and hands
// the session over, and the session completes with no client request. The tool ran
// once; nothing is recorded twice.
func TestMovedGrainFinishesItsToolCall(t *testing.T) {
	j := openJournal(t)
	defer j.Close()
	ex := &executions{}
	release := make(chan struct{})
	sc := script(t,
		`{"tool_match":"released","response":"all done: {{.Tool}}"}`,
		`{"match":"Step: find it","tool_calls":[{"name":"sleepy","arguments":"{}"}]}`,
	)
	h := startHarness(t, harnessOpts{journal: j, script: sc, tools: testToolsWith(t, ex, release)})
	if _, err := h.start("mv1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return ex.get("mv1/s/tool-1") == 1 }, "sleepy did not start")
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
