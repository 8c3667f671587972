//go:build !race

package fathomtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/internal/fathomtest"
	"github.com/fathom-agents/fathom/messages"
)

// TestStartClusterAcrossNodes: the members StartCluster starts share one journal and see
// one another, so a session started through one is read through the other. Two members
// in one process: make test runs it in its pass without -race (its name says AcrossNodes).
func TestStartClusterAcrossNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := fathomtest.StartCluster(t, 2, fathomtest.Options{Rules: oneStep})
	id, err := nodes[0].StartSession(ctx, fathom.SessionRequest{Goal: "say something"})
	if err != nil {
		t.Fatal(err)
	}
	if st := fathomtest.WaitStatus(ctx, t, nodes[1], id, messages.SessionStatus_SESSION_STATUS_COMPLETED); st.GetResult() != "said it" {
		t.Fatalf("result %q through the other member, want the scripted answer", st.GetResult())
	}
}
