package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
)

// approvalScript plans one step (extra: JSON fields of the step) whose model calls
// lookup, then answers with what the tool returned.
func approvalScript(t testing.TB, extra string) *mock.Script {
	return rawScript(t, `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s\",\"type\":\"custom\",\"description\":\"look it up\"`+extra+`}]}"},
		{"tool_match":".","response":"the tool said: {{.Tool}}"},
		{"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"lookup","arguments":"{\"key\":\"k\"}"}]}]}`)
}

func approveLookup(c *session.Config) { c.ApprovalTools = []string{"lookup"} }

// waitApproval waits until session id waits for the approval of its lookup call and
// returns the request.
func waitApproval(t *testing.T, h *harness, id string) (*messages.HitlRequested, *messages.SessionState) {
	t.Helper()
	st := waitStatus(t, h, id, messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN)
	aw := st.GetAwaiting()
	if len(aw) != 1 || aw[0].GetKind() != "approval" || aw[0].GetTool() != "lookup" || aw[0].GetArgs() != `{"key":"k"}` ||
		aw[0].GetCallId() == "" || aw[0].GetRequestId() != id+"/s/tool-1" || aw[0].GetStepId() != "s" || aw[0].GetDefaultAction() != "continue" {
		t.Fatalf("awaiting %v", aw)
	}
	if len(st.GetPendingTools()) != 1 {
		t.Fatalf("pending tools while waiting for approval: %v", st.GetPendingTools())
	}
	return aw[0], st
}

// approvalOutcome waits for session id to complete and returns its one lookup
// tool_result and hitl_received.
func approvalOutcome(t *testing.T, h *harness, id string) ([]*messages.Event, *messages.ToolResult, *messages.HitlReceived) {
	t.Helper()
	evs := waitTerminal(t, h.j, id, 20*time.Second)
	mustComplete(t, evs)
	res, rec := ofType(evs, "tool_result"), ofType(evs, "hitl_received")
	if len(res) != 1 || len(rec) != 1 || count(evs, "hitl_requested") != 1 {
		t.Fatalf("%d tool_result, %d hitl_received, %d hitl_requested", len(res), len(rec), count(evs, "hitl_requested"))
	}
	return evs, res[0].GetToolResult(), rec[0].GetHitlReceived()
}

func provide(t *testing.T, h *harness, id, cmd, input string) error {
	t.Helper()
	_, err := h.node.Session(id).ProvideInput(&messages.ProvideInputRequest{CommandId: cmd, StepId: "s", Input: input}, call())
	return err
}

func TestApprovalApproveRunsTheCallOnce(t *testing.T) {
	ex := &executions{}
	h := startHarness(t, harnessOpts{script: approvalScript(t, ""), tools: testToolsWith(t, ex, nil), cfg: approveLookup})
	if _, err := h.start("ap", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	r, _ := waitApproval(t, h, "ap")
	if n := ex.get(r.GetRequestId()); n != 0 {
		t.Fatalf("the call ran %d times before its approval", n)
	}
	if err := provide(t, h, "ap", "c2", `{"decision":"approve"}`); err != nil {
		t.Fatal(err)
	}
	if err := provide(t, h, "ap", "c2", `{"decision":"approve"}`); err != nil { // a retried command
		t.Fatalf("the same command again: %v", err)
	}
	evs, res, rec := approvalOutcome(t, h, "ap")
	if rec.GetDecision() != "approve" || rec.GetBy() != "human" || rec.GetInput() != `{"decision":"approve"}` {
		t.Fatalf("hitl_received %v", rec)
	}
	if res.GetResult() != "value of k" || res.GetError() != nil {
		t.Fatalf("tool_result %v", res)
	}
	if n := ex.get(r.GetRequestId()); n != 1 {
		t.Fatalf("the approved call ran %d times, want 1", n)
	}
	if got := evs[len(evs)-1].GetSessionCompleted().GetResult(); !strings.Contains(got, "value of k") {
		t.Fatalf("result %q", got)
	}
}

func TestApprovalEditRunsWithTheEditedArgs(t *testing.T) {
	ex := &executions{}
	h := startHarness(t, harnessOpts{script: approvalScript(t, ""), tools: testToolsWith(t, ex, nil), cfg: approveLookup})
	if _, err := h.start("ed", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	r, st := waitApproval(t, h, "ed")
	bad := []struct{ input, want string }{
		{`{"decision":"edit","args":{"key":5}}`, "do not match its schema"},
		{`{"decision":"edit"}`, `needs "args"`},
		{`{"decision":"maybe"}`, `is not one of`},
		{`yes`, `must be {"decision":"approve"}`},
		{`{"decision":"approve","args":{"key":"x"}}`, `takes no args`},
	}
	for i, c := range bad {
		if err := provide(t, h, "ed", "bad"+c.input, c.input); !sessiongrain.IsInvalidArgument(err) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("bad decision %d %s: err = %v, want INVALID_ARGUMENT mentioning %q", i, c.input, err, c.want)
		}
	}
	after, err := h.state("ed")
	if err != nil || after.GetState().GetSeq() != st.GetSeq() || len(after.GetState().GetAwaiting()) != 1 {
		t.Fatalf("refused decisions changed the session: %v (seq %d, was %d)", err, after.GetState().GetSeq(), st.GetSeq())
	}
	if err := provide(t, h, "ed", "c2", `{"decision":"edit","args":{"key":"z"}}`); err != nil {
		t.Fatal(err)
	}
	_, res, rec := approvalOutcome(t, h, "ed")
	if rec.GetDecision() != "edit" || rec.GetArgs() != `{"key":"z"}` {
		t.Fatalf("hitl_received %v", rec)
	}
	if res.GetResult() != "value of z" {
		t.Fatalf("tool_result %v, want the edited call's", res)
	}
	if n := ex.get(r.GetRequestId()); n != 1 {
		t.Fatalf("the edited call ran %d times, want 1", n)
	}
}

func TestApprovalRejectGivesTheModelTheMessage(t *testing.T) {
	ex := &executions{}
	h := startHarness(t, harnessOpts{script: approvalScript(t, ""), tools: testToolsWith(t, ex, nil), cfg: approveLookup})
	if _, err := h.start("rj", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	r, _ := waitApproval(t, h, "rj")
	if err := provide(t, h, "rj", "c2", `{"decision":"reject","message":"not that key, ask the owner"}`); err != nil {
		t.Fatal(err)
	}
	evs, res, rec := approvalOutcome(t, h, "rj")
	if rec.GetDecision() != "reject" || rec.GetBy() != "human" {
		t.Fatalf("hitl_received %v", rec)
	}
	if e := res.GetError(); res.GetResult() != "" || res.GetTool() != "lookup" || e.GetErrorType() != "rejected" ||
		e.GetMessage() != "not that key, ask the owner" || e.GetRetryable() {
		t.Fatalf("tool_result %v, want a rejected ToolError with the human's message", res)
	}
	if got := evs[len(evs)-1].GetSessionCompleted().GetResult(); got != "the tool said: "+res.GetError().GetLlmText() ||
		!strings.Contains(got, "Error type: rejected\nMessage: not that key, ask the owner") {
		t.Fatalf("result %q: the model must read the rejection as the tool's error", got)
	}
	if n := ex.get(r.GetRequestId()); n != 0 {
		t.Fatalf("the rejected call ran %d times", n)
	}
}

func TestApprovalTimeoutRejects(t *testing.T) {
	ex := &executions{}
	h := startHarness(t, harnessOpts{script: approvalScript(t, `,\"interrupt_timeout_ms\":800`), tools: testToolsWith(t, ex, nil), cfg: approveLookup})
	if _, err := h.start("to", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	_, res, rec := approvalOutcome(t, h, "to")
	if rec.GetBy() != "timeout" || rec.GetDecision() != "reject" {
		t.Fatalf("hitl_received %v", rec)
	}
	if msg := res.GetError().GetMessage(); res.GetError().GetErrorType() != "rejected" ||
		!strings.Contains(msg, "No decision from a human within 800ms") || !strings.Contains(msg, "rejected (timed out)") {
		t.Fatalf("tool_result %v", res)
	}
	if n := ex.get("to/s/tool-1"); n != 0 {
		t.Fatalf("the call nobody approved ran %d times", n)
	}
}

// TestApprovalAllowedDecisions: a tool whose approval allows only approve and reject
// records them in its request; an edit is refused naming them and changes nothing; an
// allowed decision is taken.
func TestApprovalAllowedDecisions(t *testing.T) {
	ex := &executions{}
	h := startHarness(t, harnessOpts{script: approvalScript(t, ""), tools: testToolsWith(t, ex, nil), cfg: func(c *session.Config) {
		approveLookup(c)
		c.ApprovalDecisions = map[string][]string{"lookup": {"reject", "approve"}}
	}})
	if _, err := h.start("ad", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	r, st := waitApproval(t, h, "ad")
	if got := strings.Join(r.GetAllowedDecisions(), ","); got != "approve,reject" {
		t.Fatalf("allowed_decisions %q, want approve,reject", got)
	}
	err := provide(t, h, "ad", "c2", `{"decision":"edit","args":{"key":"z"}}`)
	if !sessiongrain.IsInvalidArgument(err) || !strings.Contains(err.Error(), `decision "edit" is not allowed on calls of lookup (allowed: approve, reject)`) {
		t.Fatalf("edit: err = %v, want INVALID_ARGUMENT naming the allowed decisions", err)
	}
	after, err := h.state("ad")
	if err != nil || after.GetState().GetSeq() != st.GetSeq() || len(after.GetState().GetAwaiting()) != 1 {
		t.Fatalf("a refused decision changed the session: %v", err)
	}
	if err := provide(t, h, "ad", "c3", `{"decision":"approve"}`); err != nil {
		t.Fatal(err)
	}
	_, res, _ := approvalOutcome(t, h, "ad")
	if res.GetResult() != "value of k" || ex.get(r.GetRequestId()) != 1 {
		t.Fatalf("tool_result %v after %d runs", res, ex.get(r.GetRequestId()))
	}
}

// TestApprovalTimeoutWithDefaultActionFail: a step whose default_action is fail fails
// the session when nobody decides in time.
func TestApprovalTimeoutWithDefaultActionFail(t *testing.T) {
	ex := &executions{}
	h := startHarness(t, harnessOpts{script: approvalScript(t, `,\"interrupt_timeout_ms\":800,\"default_action\":\"fail\"`), tools: testToolsWith(t, ex, nil), cfg: approveLookup})
	if _, err := h.start("tf", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "tf", 20*time.Second)
	last := evs[len(evs)-1].GetSessionFailed()
	if last == nil || !strings.Contains(last.GetError(), "no human input") || ex.get("tf/s/tool-1") != 0 {
		t.Fatalf("session ended with %v; the call ran %d times", evs[len(evs)-1], ex.get("tf/s/tool-1"))
	}
}

// TestApprovalAcrossARestart: the node stops while the call waits for approval; a new
// node on the same journal takes the decision and runs the approved call exactly once.
func TestApprovalAcrossARestart(t *testing.T) {
	j := openJournal(t)
	t.Cleanup(func() { _ = j.Close() })
	ex := &executions{}
	h := startHarness(t, harnessOpts{journal: j, script: approvalScript(t, ""), tools: testToolsWith(t, ex, nil), cfg: approveLookup})
	if _, err := h.start("rs", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	r, _ := waitApproval(t, h, "rs")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.node.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	h2 := startHarness(t, harnessOpts{journal: j, script: approvalScript(t, ""), tools: testToolsWith(t, ex, nil), cfg: approveLookup})
	waitApproval(t, h2, "rs")
	if n := ex.get(r.GetRequestId()); n != 0 {
		t.Fatalf("the call ran %d times before its approval", n)
	}
	if err := provide(t, h2, "rs", "c2", `{"decision":"approve"}`); err != nil {
		t.Fatal(err)
	}
	_, res, rec := approvalOutcome(t, h2, "rs")
	if rec.GetDecision() != "approve" || res.GetResult() != "value of k" {
		t.Fatalf("hitl_received %v, tool_result %v", rec, res)
	}
	if n := ex.get(r.GetRequestId()); n != 1 {
		t.Fatalf("the approved call ran %d times across the restart, want 1", n)
	}
}

// TestSubAgentToolCallWaitsForApproval: a sub-agent's call of a tool that needs approval
// waits like the orchestrator's; an edit runs it with the edited args.
func TestSubAgentToolCallWaitsForApproval(t *testing.T) {
	sc := rules(t,
		planRule(`[{"id":"r","type":"research","description":"find the facts"}]`),
		`{"system_match":"FATHOM-ROLE: researcher","tool_match":"value of","response":`+quote(`{"status":"completed","summary":"{{.Tool}}"}`)+`}`,
		`{"system_match":"FATHOM-ROLE: researcher","tool_calls":[{"name":"lookup","arguments":"{\"key\":\"k\"}"}]}`,
	)
	ex := &executions{}
	h := startHarness(t, harnessOpts{script: sc, tools: testToolsWith(t, ex, nil), cfg: func(c *session.Config) {
		c.SubAgentTools = map[string][]string{"researcher": {"lookup"}}
		c.ApprovalTools = []string{"lookup"}
	}})
	if _, err := h.start("sa", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, h, "sa", messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN)
	req := st.GetAwaiting()[0]
	if req.GetKind() != "approval" || req.GetSubAgentId() != "researcher-1" || req.GetRequestId() != "sa/researcher-1/tool-1" || req.GetTool() != "lookup" {
		t.Fatalf("request %v", req)
	}
	if n := ex.get(req.GetRequestId()); n != 0 {
		t.Fatalf("the sub-agent's call ran %d times before its approval", n)
	}
	if _, err := h.node.Session("sa").ProvideInput(&messages.ProvideInputRequest{CommandId: "c2", StepId: "r", Input: `{"decision":"edit","args":{"key":"q"}}`}, call()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return ex.get(req.GetRequestId()) == 1 }, "the approved call never ran")
	evs := waitTerminal(t, h.j, "sa", 20*time.Second)
	mustComplete(t, evs)
	results := ofType(evs, "tool_result")
	if len(results) != 1 || results[0].GetToolResult().GetSubAgentId() != "researcher-1" || results[0].GetToolResult().GetResult() != "value of q" {
		t.Fatalf("tool results %v", results)
	}
	if n := ex.get(req.GetRequestId()); n != 1 {
		t.Fatalf("the sub-agent's call ran %d times, want 1", n)
	}
}

// TestUnknownApprovalToolFailsTheStart: an approval tool the node does not have is a
// configuration error, not a silent no-op.
func TestUnknownApprovalToolFailsTheStart(t *testing.T) {
	err := core.DefaultConfig().WithNode(nil, []string{"lookup"}).CheckApprovalTools()
	if err != nil {
		t.Fatalf("known tool: %v", err)
	}
	c := core.DefaultConfig()
	c.ApprovalTools = []string{"lookup", "nope"}
	err = c.WithNode(nil, []string{"lookup"}).CheckApprovalTools()
	if err == nil || !strings.Contains(err.Error(), `"nope" is not a tool of this node`) {
		t.Fatalf("unknown tool: err = %v", err)
	}
	for _, bad := range []struct {
		decisions map[string][]string
		want      string
	}{
		{map[string][]string{"other": {"approve"}}, `approval decisions: "other" is not one of the approval tools`},
		{map[string][]string{"lookup": {"approve", "maybe"}}, `approval decisions of lookup: "maybe" is not a decision`},
		{map[string][]string{"lookup": {}}, "approval decisions of lookup: no decision allowed"},
	} {
		c := core.DefaultConfig()
		c.ApprovalTools, c.ApprovalDecisions = []string{"lookup"}, bad.decisions
		if err := c.WithNode(nil, []string{"lookup"}).CheckApprovalTools(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("decisions %v: err = %v, want %q", bad.decisions, err, bad.want)
		}
	}
}
