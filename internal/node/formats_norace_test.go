//go:build !race

// Two members in one process trip data races inside Proto.Actor's remoting (see
// cluster/consul_norace_test.go), so these tests are excluded from -race runs; `make
// test` runs them in its second, race-free pass (their names match "AcrossNodes").

package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/internal/buildinfo"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
	"github.com/fathom-agents/fathom/persistence"
)

// mixedCluster starts two members of one Consul cluster on one PostgreSQL journal: a
// member of this build, and one advertising journal format other (a member of another
// release, as the test-only Meta override makes it). It returns them once each sees both.
func mixedCluster(t *testing.T, other int) (current, odd *Node) {
	t.Helper()
	start := consulMembers(t, "formats")
	current = start(nil)
	odd = start(map[string]string{buildinfo.MetaFormat: fmt.Sprint(other)})
	testenv.Eventually(t, 30*time.Second, func() bool {
		return len(current.Cluster().MemberAddresses()) == 2 && len(odd.Cluster().MemberAddresses()) == 2
	}, "both members see two members")
	return current, odd
}

// completedOn waits for session id to complete and returns the member that hosts it.
func completedOn(t *testing.T, via *Node, id string) string {
	t.Helper()
	var host string
	testenv.Eventually(t, 60*time.Second, func() bool {
		res, err := via.Session(id).GetState(&messages.GetStateRequest{}, cluster.WithTimeout(10*time.Second))
		if err != nil {
			return false
		}
		host = res.GetHost()
		return res.GetState().GetStatus() == messages.SessionStatus_SESSION_STATUS_COMPLETED
	}, "session %s did not complete", id)
	return host
}

// TestSessionsPlacedOnNewestFormatAcrossNodes: while a member of a newer journal format
// is in the cluster (the first member upgraded in a rolling upgrade), every session
// started through the member of this build's format runs on the newer member, which reads
// every event either writes.
func TestSessionsPlacedOnNewestFormatAcrossNodes(t *testing.T) {
	older, newer := mixedCluster(t, buildinfo.Format+1)
	for i := 0; i < 6; i++ {
		id := fmt.Sprintf("newest-%d", i)
		if _, err := older.Session(id).Start(&messages.StartRequest{CommandId: "start", Goal: "Write a haiku about the sea"}, cluster.WithTimeout(time.Minute)); err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		if host := completedOn(t, older, id); host != newer.Address() {
			t.Fatalf("session %s ran on %s; want %s, the member of journal format %d (the other reads only %d)", id, host, newer.Address(), buildinfo.Format+1, buildinfo.Format)
		}
	}
}

// TestFormatGateAcrossNodes: while a member that reads only an older journal format is
// in the cluster, a member of this build writes no event that format does not know (the
// lowest-version gate): starting a session answers unavailable, saying why, and stores
// nothing. Once the older member has left (upgraded), the same start succeeds.
func TestFormatGateAcrossNodes(t *testing.T) {
	// A member of the format before the one that introduced session_started: every
	// session's first event is newer than it reads.
	lowest := persistence.EventFormat("session_started") - 1
	current, older := mixedCluster(t, lowest)
	const id = "gated"
	start := func(via *Node) error {
		_, err := via.Session(id).Start(&messages.StartRequest{CommandId: "start", Goal: "Write a haiku about the sea"}, cluster.WithTimeout(time.Minute))
		return err
	}
	err := start(older)
	if !sessiongrain.IsUnavailable(err) || !strings.Contains(err.Error(), "every member is upgraded") {
		t.Fatalf("start while a member reads only format %d = %v; want unavailable, naming the upgrade", lowest, err)
	}
	last, err := current.Journal().LastSeq(context.Background(), id)
	if err != nil || last != 0 {
		t.Fatalf("the refused start left the session at seq %d (%v)", last, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := older.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return start(current) == nil }, "the start still fails once every member reads format %d: %v", buildinfo.Format, start(current))
	if host := completedOn(t, current, id); host != current.Address() {
		t.Fatalf("session ran on %s; want %s", host, current.Address())
	}
	var n int
	if err := current.Journal().Load(context.Background(), id, 0, func(persistence.Record) error { n++; return nil }); err != nil || n == 0 {
		t.Fatalf("the session has %d events (%v)", n, err)
	}
}
