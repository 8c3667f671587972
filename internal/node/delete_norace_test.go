//go:build !race

// Two members in one process trip data races inside Proto.Actor's remoting (see
// cluster/consul_norace_test.go), so this test is excluded from -race runs; `make test`
// runs it in its second, race-free pass (its name matches "AcrossNodes").

package node

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// TestDeleteDropsDataAcrossNodes: a delete served by a member that does not host the
// session removes the session's vectors and artifacts on the member that does (the
// in-process vector store and a data-dir artifact store are per member, and so is the
// embedding queue that may still hold the session's last messages). While that member
// cannot confirm the drop, the delete is refused with an error naming it and nothing is
// removed from the journal; once it can, the same delete succeeds.
func TestDeleteDropsDataAcrossNodes(t *testing.T) {
	// No recent share: the members embed every message of the (short) session, so it has
	// vectors to drop (session.Embedding embeds a history from half the recent share).
	members := consulMembers(t, "delete", func(c *Config) {
		c.Session.ContextRatios = memory.Ratios{Recent: 0, Summary: 0.5, Semantic: 0.5}
	})
	start := func() *Node { return members(nil) }
	a, b := start(), start()
	testenv.Eventually(t, 30*time.Second, func() bool {
		return len(a.Cluster().MemberAddresses()) == 2 && len(b.Cluster().MemberAddresses()) == 2
	}, "both members see two members")

	ctx := context.Background()
	const id = "delete-across"
	if _, err := a.Session(id).Start(&messages.StartRequest{CommandId: "start", Goal: "Write a haiku about the sea"}, cluster.WithTimeout(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var host string
	testenv.Eventually(t, 60*time.Second, func() bool {
		res, err := a.Session(id).GetState(&messages.GetStateRequest{}, cluster.WithTimeout(10*time.Second))
		if err != nil {
			return false
		}
		host = res.GetHost()
		return res.GetState().GetStatus() == messages.SessionStatus_SESSION_STATUS_COMPLETED
	}, "the session did not complete")
	owner, other := a, b
	if host == b.Address() {
		owner, other = b, a
	}
	if owner.Address() != host {
		t.Fatalf("the session runs on %s, neither member (%s, %s)", host, a.Address(), b.Address())
	}
	vectors := func(n *Node) int {
		hits, err := n.Vectors().Search(ctx, "default", id, unitVector(n.Vectors().Dimensions()), 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(hits)
	}
	artifacts := func(n *Node) int {
		infos, err := n.Artifacts().List(ctx, "default", id, "")
		if err != nil {
			t.Fatal(err)
		}
		return len(infos)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return vectors(owner) > 0 }, "the owner holds no vectors of the session")
	if n := vectors(other); n != 0 {
		t.Fatalf("the other member holds %d vectors of a session it never ran", n)
	}
	if artifacts(owner) == 0 || artifacts(other) != 0 {
		t.Fatalf("artifacts: %d on the owner, %d on the other member; want some on the owner only", artifacts(owner), artifacts(other))
	}
	events := func() int {
		n := 0
		if err := a.Journal().Load(ctx, id, 0, func(persistence.Record) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := events()

	// The owner cannot confirm: the delete is refused, naming it, and removes nothing.
	owner.stopDropper()
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err := other.DeleteSession(dctx, id)
	cancel()
	if err == nil || !strings.Contains(err.Error(), owner.Address()) || errors.Is(err, gateway.ErrSessionNotFound) {
		t.Fatalf("delete while the owner cannot drop its vectors = %v; want an error naming %s", err, owner.Address())
	}
	if got := events(); got != before {
		t.Fatalf("a refused delete left %d of %d events", got, before)
	}
	if vectors(owner) == 0 || artifacts(owner) == 0 {
		t.Fatal("a refused delete removed the owner's vectors or artifacts, yet the session was kept")
	}

	if err := owner.startDropper(owner.member.System()); err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteSession(ctx, id); err != nil {
		t.Fatalf("delete through the member that does not host the session: %v", err)
	}
	if n := vectors(owner); n != 0 {
		t.Fatalf("the owner still holds %d vectors of the deleted session", n)
	}
	if n := artifacts(owner); n != 0 {
		t.Fatalf("the owner still holds %d artifacts of the deleted session", n)
	}
	if got := events(); got != 0 {
		t.Fatalf("%d events left after the delete", got)
	}
}

func unitVector(dims int) []float32 {
	v := make([]float32, dims)
	v[0] = 1
	return v
}
