package fathom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/internal/fathomtest"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
)

// TestModelAnswerOverTheEventLimitFailsTheSession: a model that answers a step with
// 900 KiB of text without a space (more than one journal event may hold) fails the session with an error
// that names the limit, instead of leaving it retrying an append the journal refuses
// for ever.
func TestModelAnswerOverTheEventLimitFailsTheSession(t *testing.T) {
	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"s","type":"custom","description":"write a lot"}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", Response: strings.Repeat("x", 900<<10)},
	}}

	cfg := fathomtest.Config(t, fathomtest.Model(t, script))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := fathomtest.Start(t, cfg)
	id, err := n.StartSession(ctx, fathom.SessionRequest{Goal: "write a very long text"})
	if err != nil {
		t.Fatal(err)
	}
	var st *messages.SessionState
	testenv.Eventually(t, 60*time.Second, func() bool {
		st, err = n.State(ctx, id)
		return err == nil && st.GetStatus() == messages.SessionStatus_SESSION_STATUS_FAILED
	}, "session %s never failed (last: %v, error %q)", id, st.GetStatus(), st.GetError())
	if !strings.Contains(st.GetError(), "model answer too large") {
		t.Fatalf("session failed with %q; want the answer-size error", st.GetError())
	}
}
