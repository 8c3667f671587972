package fathom_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/internal/fathomtest"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
)

// TestNodeCallsWithCommandIDAreIdempotent: Send and Cancel retried with the same
// fathom.WithCommandID record one message_received and one session_cancelled; the
// retried Send answers the same afterSeq, the retried Cancel succeeds.
func TestNodeCallsWithCommandIDAreIdempotent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The demo model, slowed down: the follow-up's turn still runs when it is cancelled.
	script := mock.DemoScript()
	for i := range script.Rules {
		script.Rules[i].DelayMS = 300
	}
	cfg := fathomtest.Config(t, fathomtest.Model(t, script))
	n := fathomtest.Start(t, cfg)
	id, err := n.StartSession(ctx, fathom.SessionRequest{ID: "cmd-1", Goal: "Explain event sourcing in one sentence"})
	if err != nil {
		t.Fatal(err)
	}
	waitEvent(ctx, t, n, id, 0, "session_completed")
	first, err := n.Send(ctx, id, "and in one word?", fathom.WithCommandID("follow-up-1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := n.Send(ctx, id, "and in one word?", fathom.WithCommandID("follow-up-1"))
	if err != nil || again != first {
		t.Fatalf("retried send: afterSeq %d, err %v; want %d, nil", again, err, first)
	}
	if err := n.Cancel(ctx, id, "enough", fathom.WithCommandID("stop-1")); err != nil {
		t.Fatal(err)
	}
	if err := n.Cancel(ctx, id, "enough", fathom.WithCommandID("stop-1")); err != nil {
		t.Fatalf("retried cancel: %v", err)
	}
	counts := map[string]int{}
	for _, ev := range waitEvent(ctx, t, n, id, 0, "session_cancelled") {
		counts[ev.Type()]++
	}
	if counts["message_received"] != 1 || counts["session_cancelled"] != 1 {
		t.Fatalf("events %v: want one message_received and one session_cancelled", counts)
	}
	// A different command id is a different call: this cancel is refused.
	if err := n.Cancel(ctx, id, "enough", fathom.WithCommandID("stop-2")); err == nil {
		t.Fatal("a second cancel under a new command id was accepted")
	}
}

// TestNodeRefusesUnicodeFormatSessionIDs: StartSession refuses an id with a bidi
// control or one not in NFC (errors.Is messages.ErrInvalidSessionID), and so does the
// session grain reached through Node.Session (as `fathom run --session-id` does), with
// INVALID_ARGUMENT naming the rule.
func TestNodeRefusesUnicodeFormatSessionIDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	n := fathomtest.Start(t, cfg)
	for id, rule := range map[string]string{"\u202eevil": "category Cf", "cafe\u0301": "NFC", "a\u2029b": "category Zp"} {
		if _, err := n.StartSession(ctx, fathom.SessionRequest{ID: id, Goal: "x"}); !errors.Is(err, messages.ErrInvalidSessionID) || !strings.Contains(err.Error(), rule) {
			t.Fatalf("StartSession(%q) = %v, want ErrInvalidSessionID naming %q", id, err, rule)
		}
		_, err := n.Session(id).Start(&messages.StartRequest{CommandId: "c", Goal: "x"}, cluster.WithTimeout(10*time.Second))
		var ge *cluster.GrainErrorResponse
		if !errors.As(err, &ge) || ge.Reason != messages.ErrorReason_INVALID_ARGUMENT.String() || !strings.Contains(ge.Message, rule) {
			t.Fatalf("grain Start of %q = %v, want INVALID_ARGUMENT naming %q", id, err, rule)
		}
	}
}
