package fathom_test

import (
	"context"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/internal/fathomtest"
	"github.com/fathom-agents/fathom/messages"
)

// TestGoAPIOnTheMemoryJournal: Config.Journal "memory" runs a node with no data dir (no
// disk at all: no journal file, no local artifact store) that completes a session.
func TestGoAPIOnTheMemoryJournal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := fathomtest.StartNode(t, fathomtest.Options{Rules: stepsModel, Edit: func(c *fathom.Config) { c.DataDir, c.Journal = "", "memory" }})
	id, err := n.StartSession(ctx, fathom.SessionRequest{Goal: "two steps"})
	if err != nil {
		t.Fatal(err)
	}
	st := fathomtest.WaitStatus(ctx, t, n, id, messages.SessionStatus_SESSION_STATUS_COMPLETED)
	if st.GetResult() == "" {
		t.Fatalf("completed without a result: %v", st)
	}
}
