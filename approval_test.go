package fathom_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// TestApprovalThroughTheGoAPI: a program's own tool listed in Config.ApprovalTools does
// not run until Answer approves it, then runs once; an approval tool the node does not
// have fails Start.
func TestApprovalThroughTheGoAPI(t *testing.T) {
	script, err := mock.ParseScript([]byte(`{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s\",\"type\":\"custom\",\"description\":\"refund it\"}]}"},
		{"tool_match":".","response":"done: {{.Tool}}"},
		{"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"refund","arguments":"{\"order\":\"42\"}"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	defer model.Close()
	var refunds atomic.Int32
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.LLM = fathom.LLM{BaseURL: model.URL + "/v1", APIKey: "k", Model: "mock-model"}
	cfg.Tools = []tools.Tool{tools.MustNew("refund", "Refunds an order.", tools.SandboxNone, func(_ context.Context, a struct {
		Order string `json:"order"`
	}) (any, error) {
		refunds.Add(1)
		return "refunded " + a.Order, nil
	})}
	cfg.ApprovalTools = []string{"nope"}
	if _, err := fathom.Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `"nope" is not a tool of this node`) {
		t.Fatalf("Start with an unknown approval tool = %v", err)
	}
	cfg.ApprovalTools = []string{"refund"}
	ctx := context.Background()
	n, err := fathom.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(ctx)
	id, err := n.StartSession(ctx, fathom.SessionRequest{Goal: "refund order 42"})
	if err != nil {
		t.Fatal(err)
	}
	state := func(want messages.SessionStatus) *messages.SessionState {
		var st *messages.SessionState
		testenv.Eventually(t, 20*time.Second, func() bool {
			st, err = n.State(ctx, id)
			return err == nil && st.GetStatus() == want
		}, "session %s never reached %s (last: %v)", id, want, st.GetStatus())
		return st
	}
	st := state(messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN)
	if aw := st.GetAwaiting(); len(aw) != 1 || aw[0].GetKind() != "approval" || aw[0].GetTool() != "refund" || aw[0].GetArgs() != `{"order":"42"}` {
		t.Fatalf("awaiting %v", aw)
	}
	if refunds.Load() != 0 {
		t.Fatal("refund ran before its approval")
	}
	if err := n.Answer(ctx, id, "s", `{"decision":"edit","args":{"order":42}}`); err == nil || !strings.Contains(err.Error(), "do not match its schema") {
		t.Fatalf("bad edit: err = %v", err)
	}
	if err := n.Answer(ctx, id, "s", `{"decision":"approve"}`); err != nil {
		t.Fatal(err)
	}
	st = state(messages.SessionStatus_SESSION_STATUS_COMPLETED)
	if st.GetResult() != "done: refunded 42" || refunds.Load() != 1 {
		t.Fatalf("result %q after %d refunds, want one", st.GetResult(), refunds.Load())
	}
}
