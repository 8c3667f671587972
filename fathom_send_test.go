package fathom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/messages"
)

// TestNodeSendFollowUp: an embedded node's completed session (on the built-in demo
// model) takes a follow-up through (*Node).Send; Follow from the returned seq delivers
// message_received first and the turn's session_completed last, with the demo model's
// direct answer. A send while the session runs, or to an unknown id, is refused.
func TestNodeSendFollowUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	n, err := fathom.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	id, err := n.StartSession(ctx, fathom.SessionRequest{ID: "send-1", Goal: "Explain event sourcing in one sentence"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Send(ctx, id, "too early"); err == nil || !strings.Contains(err.Error(), "send when it has completed") {
		t.Fatalf("send to a running session: %v", err)
	}
	waitEvent(ctx, t, n, id, 0, "session_completed")
	after, err := n.Send(ctx, id, "and in one word?")
	if err != nil {
		t.Fatal(err)
	}
	evs := waitEvent(ctx, t, n, id, after, "session_completed")
	if m := evs[0].GetMessageReceived(); m == nil || m.GetContent() != "and in one word?" || m.GetTurn() != 2 {
		t.Fatalf("first event of the turn: %v", evs[0])
	}
	res := evs[len(evs)-1].GetSessionCompleted().GetResult()
	if !strings.Contains(res, "On your follow-up (and in one word?)") {
		t.Fatalf("turn 2 result %q", res)
	}
	st, err := n.State(ctx, id)
	if err != nil || st.GetStatus() != messages.SessionStatus_SESSION_STATUS_COMPLETED || st.GetTurn() != 2 {
		t.Fatalf("state after turn 2: %v %v", st.GetStatus(), err)
	}
	if _, err := n.Send(ctx, "no-such-session", "hello"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("send to an unknown session: %v", err)
	}
}

// waitEvent follows session id after seq until an event of type until, returning the
// events read.
func waitEvent(ctx context.Context, t *testing.T, n *fathom.Node, id string, after uint64, until string) []*messages.Event {
	t.Helper()
	sub := n.Follow(id, after)
	defer sub.Close()
	var evs []*messages.Event
	for {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			t.Fatalf("follow %s after %d: %v (events so far %d)", id, after, err, len(evs))
		}
		if u.IsDelta {
			continue
		}
		evs = append(evs, u.Event)
		if u.Event.Type() == until {
			return evs
		}
		if u.Event.GetSessionFailed() != nil {
			t.Fatalf("session %s failed: %s", id, u.Event.GetSessionFailed().GetError())
		}
	}
}
