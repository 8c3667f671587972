package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
)

// activations counts the live activations of session id on n (no grain request: asking
// would keep it alive).
func activations(n *node.Node, id string) int {
	count := 0
	for _, bucket := range n.Cluster().System().ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, pid := range bucket.Keys() {
			if rest, ok := strings.CutPrefix(pid, "partition-activator/"+id+"$"); ok && !strings.Contains(rest, "/") {
				count++
			}
		}
	}
	return count
}

// TestFinishedSessionPassivates: a completed session's grain passivates on its own after
// FinishedIdleTimeout although the idle timeout is 10 minutes, and a later request
// activates it again with the same state.
func TestFinishedSessionPassivates(t *testing.T) {
	h := startHarness(t, harnessOpts{cfg: func(c *session.Config) {
		c.IdleTimeout, c.FinishedIdleTimeout = 10*time.Minute, time.Second
		embedEveryMessage(c) // a short session: its vectors are what passivation drops
	}})
	if _, err := h.start("done-1", "c1", "finish and go"); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, h.j, "done-1", 30*time.Second)
	before, err := h.node.Session("done-1").GetState(&messages.GetStateRequest{}, cluster.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Its messages are in the node's in-process vector store while it is active...
	vecs := h.node.Vectors()
	query := make([]float32, vecs.Dimensions())
	query[0] = 1
	hits := func() int {
		hs, err := vecs.Search(context.Background(), "default", "done-1", query, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return len(hs)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return hits() > 0 }, "the active session's messages were never embedded")
	testenv.Eventually(t, 10*time.Second, func() bool { return activations(h.node, "done-1") == 0 },
		"the finished session is still active %s after FinishedIdleTimeout", "10s")
	// ...and passivated it leaves none behind (its next activation re-embeds them).
	testenv.Eventually(t, 10*time.Second, func() bool { return hits() == 0 }, "the passivated session's vectors stayed in the store")
	after, err := h.node.Session("done-1").GetState(&messages.GetStateRequest{}, cluster.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if after.GetActivatedAtUnixNano() == before.GetActivatedAtUnixNano() {
		t.Fatal("the session was answered by the same activation: it never passivated")
	}
	if after.GetState().GetSeq() != before.GetState().GetSeq() || after.GetState().GetStatus() != messages.SessionStatus_SESSION_STATUS_COMPLETED {
		t.Fatalf("reactivated state seq %d status %v, want seq %d completed", after.GetState().GetSeq(), after.GetState().GetStatus(), before.GetState().GetSeq())
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return hits() > 0 }, "the reactivated session's history was not re-embedded")
}
