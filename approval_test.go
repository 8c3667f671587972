package fathom_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/internal/fathomtest"
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
	var refunds atomic.Int32
	cfg := fathomtest.Config(t, fathomtest.Model(t, script))
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
	n := fathomtest.Start(t, cfg)
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

// TestApprovalRejectIsARejection: a researcher's call that a human rejects never runs and
// is recorded as a ToolError of type "rejected" with the human's message; the model's
// next request carries it as the call's error (the scripted researcher goes on only when
// it reads it); the hand-off's tools_used leaves it out; GET /metrics counts it in
// fathom_tool_rejections_total, not in fathom_tool_calls_total.
func TestApprovalRejectIsARejection(t *testing.T) {
	const why = "not this order, ask finance"
	handoff := func(summary string) string {
		b, _ := json.Marshal("```json\n{\"status\":\"completed\",\"summary\":\"" + summary + "\",\"confidence\":0.9}\n```")
		return string(b)
	}
	script, err := mock.ParseScript([]byte(`{"rules":[
		{"system_match":"FATHOM-PHASE: synthesize","response":"synthesized"},
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"r\",\"type\":\"research\",\"description\":\"refund it\"}]}"},
		{"system_match":"FATHOM-ROLE: researcher","tool_match":"Error type: rejected\nMessage: ` + why + `","tool_calls":[{"name":"lookup","arguments":"{\"key\":\"k\"}"}]},
		{"system_match":"FATHOM-ROLE: researcher","tool_match":"value of k","response":` + handoff("read the rejection") + `},
		{"system_match":"FATHOM-ROLE: researcher","tool_match":"[\\s\\S]","response":` + handoff("read something else") + `},
		{"system_match":"FATHOM-ROLE: researcher","tool_calls":[{"name":"refund","arguments":"{\"order\":\"42\"}"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var refunds atomic.Int32
	cfg := fathomtest.Config(t, fathomtest.Model(t, script))
	cfg.MetricsListen = "127.0.0.1:0"
	cfg.Tools = []tools.Tool{
		tools.MustNew("refund", "Refunds an order.", tools.SandboxNone, func(_ context.Context, a struct {
			Order string `json:"order"`
		}) (any, error) {
			refunds.Add(1)
			return "refunded " + a.Order, nil
		}),
		tools.MustNew("lookup", "Looks a key up.", tools.SandboxNone, func(_ context.Context, a struct {
			Key string `json:"key"`
		}) (any, error) {
			return "value of " + a.Key, nil
		}),
	}
	cfg.Session.SubAgentTools = map[string][]string{"researcher": {"refund", "lookup"}}
	cfg.ApprovalTools = []string{"refund"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := fathomtest.Start(t, cfg)
	id, err := n.StartSession(ctx, fathom.SessionRequest{Goal: "refund order 42"})
	if err != nil {
		t.Fatal(err)
	}
	var st *messages.SessionState
	testenv.Eventually(t, 30*time.Second, func() bool {
		st, err = n.State(ctx, id)
		return err == nil && len(st.GetAwaiting()) == 1
	}, "session %s never waited for the approval (last: %v)", id, st.GetStatus())
	if r := st.GetAwaiting()[0]; r.GetKind() != "approval" || r.GetTool() != "refund" || r.GetSubAgentId() != "researcher-1" {
		t.Fatalf("awaiting %v", r)
	}
	if err := n.Answer(ctx, id, "r", `{"decision":"reject","message":"`+why+`"}`); err != nil {
		t.Fatal(err)
	}
	sub := n.Follow(id, 0)
	defer sub.Close()
	results := map[string]*messages.ToolResult{}
	var handoffs []*messages.SubagentResult
	for done := false; !done; {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			t.Fatalf("follow: %v", err)
		}
		switch ev := u.Event; {
		case ev.GetToolResult() != nil:
			results[ev.GetToolResult().GetTool()] = ev.GetToolResult()
		case ev.GetSubagentCompleted() != nil:
			handoffs = append(handoffs, ev.GetSubagentCompleted().GetResult())
		case ev.GetSessionFailed() != nil:
			t.Fatalf("session failed: %s", ev.GetSessionFailed().GetError())
		case ev.GetSessionCompleted() != nil:
			done = true
		}
	}
	rej := results["refund"]
	if e := rej.GetError(); rej == nil || rej.GetResult() != "" || e.GetErrorType() != "rejected" || e.GetMessage() != why ||
		!strings.Contains(e.GetLlmText(), "Error type: rejected\nMessage: "+why) {
		t.Fatalf("the rejected call's tool_result %v, want a rejected ToolError with the human's message", rej)
	}
	if refunds.Load() != 0 {
		t.Fatalf("the rejected call ran %d times", refunds.Load())
	}
	if len(handoffs) != 1 || handoffs[0].GetSummary() != "read the rejection" {
		t.Fatalf("hand-offs %v: the researcher's next request must carry the rejection as the call's error", handoffs)
	}
	if got := handoffs[0].GetToolsUsed(); len(got) != 1 || got[0] != "lookup" {
		t.Fatalf("tools_used %v, want [lookup]: a rejected call was not used", got)
	}
	metric := func(text, name, tool string) string {
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, name+"{") && strings.Contains(line, `tool="`+tool+`"`) {
				return line[strings.LastIndexByte(line, ' ')+1:]
			}
		}
		return ""
	}
	var text string
	testenv.Eventually(t, 10*time.Second, func() bool {
		resp, err := http.Get("http://" + n.MetricsAddr() + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		text = string(b)
		return err == nil && metric(text, "fathom_tool_rejections_total", "refund") == "1" && metric(text, "fathom_tool_calls_total", "lookup") == "1"
	}, "metrics never counted the rejection apart:\n%s", text)
	// Every registered tool's series exists from the start at 0 (zero-initialised).
	if got := metric(text, "fathom_tool_calls_total", "refund"); got != "" && got != "0" {
		t.Fatalf("fathom_tool_calls_total{tool=refund} = %s: a rejected call is not a call", got)
	}
	if got := metric(text, "fathom_tool_errors_total", "refund"); got != "" && got != "0" {
		t.Fatalf("fathom_tool_errors_total{tool=refund} = %s: a rejection is counted apart", got)
	}
}
