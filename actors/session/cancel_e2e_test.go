package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
	"github.com/fathom-agents/fathom/tools"
)

// TestCancelStopsARunningSession: Cancel records session_cancelled, cancels the tool the
// session is running (its context ends), makes the session terminal (nothing more is
// recorded), is idempotent by command id and refuses a session that has ended.
func TestCancelStopsARunningSession(t *testing.T) {
	started, cancelled := make(chan struct{}), make(chan struct{})
	type noArgs struct{}
	reg, err := tools.NewRegistry(tools.MustNew("hang", "Waits for the caller to go away.", tools.SandboxNone, func(ctx context.Context, _ noArgs) (any, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	}))
	if err != nil {
		t.Fatal(err)
	}
	sc := rules(t,
		planRule(`[{"id":"a","type":"custom","description":"wait for it"}]`),
		`{"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"hang","arguments":"{}"}]}`,
	)
	h := startHarness(t, harnessOpts{script: sc, tools: &tools.Executor{Registry: reg, Timeout: time.Minute}})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the tool never started")
	}
	call := cluster.WithTimeout(10 * time.Second)
	resp, err := h.node.Session("s1").Cancel(&messages.CancelRequest{CommandId: "c2", Reason: "operator stop", By: "ops"}, call)
	if err != nil || resp.GetSeq() == 0 || resp.GetDuplicate() {
		t.Fatalf("cancel: %v %v", resp, err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the running tool was not cancelled")
	}
	again, err := h.node.Session("s1").Cancel(&messages.CancelRequest{CommandId: "c2", Reason: "operator stop", By: "ops"}, call)
	if err != nil || !again.GetDuplicate() || again.GetSeq() != resp.GetSeq() {
		t.Fatalf("the same cancel again: %v %v, want a duplicate of seq %d", again, err, resp.GetSeq())
	}
	if _, err := h.node.Session("s1").Cancel(&messages.CancelRequest{CommandId: "c3"}, call); !sessiongrain.IsFailedPrecondition(err) {
		t.Fatalf("cancel of a cancelled session: %v, want FAILED_PRECONDITION", err)
	}
	st, err := h.state("s1")
	if err != nil || st.GetState().GetStatus() != messages.SessionStatus_SESSION_STATUS_CANCELLED || st.GetState().GetError() != "cancelled: operator stop" {
		t.Fatalf("state after cancel: %v %v", st.GetState().GetStatus(), err)
	}
	evs := storedEvents(t, h.j, "s1")
	last := evs[len(evs)-1]
	c := last.GetSessionCancelled()
	if c == nil || c.GetReason() != "operator stop" || c.GetBy() != "ops" || last.GetCommandId() != "c2" || last.GetSeq() != resp.GetSeq() {
		t.Fatalf("last event %v, want session_cancelled by ops at seq %d", last, resp.GetSeq())
	}
	if _, err := h.node.Session("nope").Cancel(&messages.CancelRequest{CommandId: "c4"}, call); !sessiongrain.IsNotFound(err) {
		t.Fatalf("cancel of an unknown session: %v, want NOT_FOUND", err)
	}
}
