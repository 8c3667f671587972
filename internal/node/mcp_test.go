package node_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/observer"
	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	mcptool "github.com/fathom-agents/fathom/tools/mcp"
	"github.com/fathom-agents/fathom/tools/mcp/mcptest"
)

// startMCPNode starts a node on the embedded journal whose model is script and whose MCP
// servers are servers; the test's cleanup stops it.
func startMCPNode(t *testing.T, script mock.Script, scfg session.Config, logs *testenv.Buffer, servers ...mcptool.ServerConfig) *node.Node {
	t.Helper()
	return startMCPNodeOn(t, mock.New(mock.Config{Script: script}), scfg, logs, servers...)
}

// startMCPNodeOn is startMCPNode with the model model.
func startMCPNodeOn(t *testing.T, model *mock.Server, scfg session.Config, logs *testenv.Buffer, servers ...mcptool.ServerConfig) *node.Node {
	t.Helper()
	return startLocalNode(t, model.Handler(), "mcp-e2e",
		node.Config{Session: scfg, Logger: slog.New(slog.NewTextHandler(logs, nil)), MCPServers: servers})
}

// runSession starts session id with goal and returns its events once it completed.
func runSession(t *testing.T, n *node.Node, id, goal string) []*messages.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sub := n.Feed().Subscribe(id, 0)
	defer sub.Close()
	if _, err := n.Session(id).Start(&messages.StartRequest{CommandId: "c1", Goal: goal}, cluster.WithTimeout(30*time.Second)); err != nil {
		t.Fatalf("start session: %v", err)
	}
	var evs []*messages.Event
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("events: %v (after %d events)", err, len(evs))
		}
		evs = append(evs, ev)
		switch ev.GetPayload().(type) {
		case *messages.Event_SessionCompleted:
			return evs
		case *messages.Event_SessionFailed:
			t.Fatalf("session failed: %s", ev.GetSessionFailed().GetError())
		}
	}
}

// TestResearcherCallsAnMCPTool: a session's researcher, given the MCP tool
// orders__lookup_order through SubAgentTools, calls it; the call runs in the TypeScript
// SDK's stdio server the node started, with the call's idempotency key, and the
// researcher hands off what it returned.
func TestResearcherCallsAnMCPTool(t *testing.T) {
	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-PHASE: plan", Response: `{"steps":[{"id":"r","type":"research","description":"look order A-1 up"}]}`},
		{SystemMatch: "FATHOM-ROLE: researcher", ToolMatch: `"status":"shipped"`, Response: `{"status":"completed","summary":"order A-1 has shipped"}`},
		{SystemMatch: "FATHOM-ROLE: researcher", ToolCalls: []mock.ToolCallRule{{Name: "orders__lookup_order", Arguments: `{"order_id":"A-1"}`}}},
		{SystemMatch: "FATHOM-PHASE: synthesize", Response: "A-1 shipped."},
	}, Default: "?"}
	scfg := session.DefaultConfig()
	scfg.SubAgentTools = map[string][]string{"researcher": {"orders__lookup_order"}}
	logs := &testenv.Buffer{}
	n := startMCPNode(t, script, scfg, logs, mcptest.Stdio(t, "orders"))
	if st := n.MCPServers(); len(st) != 1 || !st[0].Connected || !slices.Contains(st[0].Tools, "orders__lookup_order") {
		t.Fatalf("mcp servers %+v", st)
	}
	evs := runSession(t, n, "s-mcp", "Where is order A-1?")
	var started *messages.SubagentStarted
	var called *messages.ToolCalled
	var result *messages.ToolResult
	for _, ev := range evs {
		switch {
		case ev.GetSubagentStarted() != nil:
			started = ev.GetSubagentStarted()
		case ev.GetToolCalled().GetTool() == "orders__lookup_order":
			called = ev.GetToolCalled()
		case ev.GetToolResult().GetTool() == "orders__lookup_order":
			result = ev.GetToolResult()
		}
	}
	if started == nil || started.GetAgentType() != "researcher" || !slices.Contains(started.GetTools(), "orders__lookup_order") {
		t.Fatalf("subagent_started %v", started)
	}
	if called == nil || called.GetSubAgentId() == "" || called.GetIdempotencyKey() == "" {
		t.Fatalf("tool_called %v", called)
	}
	if result == nil || result.GetError() != nil || result.GetResult() != `{"order_id":"A-1","status":"shipped","total":42.5}` {
		t.Fatalf("tool_result %v", result)
	}
}

// TestNodeRestartsACrashedMCPServer: a tool call that kills the stdio server fails as a
// retryable sandbox error in the session; the node restarts the server (a new process)
// and reports the restart like any other: in Restarts() and its log, as kind mcp_server.
func TestNodeRestartsACrashedMCPServer(t *testing.T) {
	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"step-1","type":"custom","description":"break it","dependencies":[]}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: `Error type: sandbox`, Response: "The server crashed."},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: []mock.ToolCallRule{{Name: "orders__crash", Arguments: `{}`}}},
	}, Default: "done"}
	logs := &testenv.Buffer{}
	n := startMCPNode(t, script, session.DefaultConfig(), logs, mcptest.Stdio(t, "orders"))
	evs := runSession(t, n, "s-crash", "crash the server")
	var failure *messages.ToolFailure
	for _, ev := range evs {
		if r := ev.GetToolResult(); r.GetTool() == "orders__crash" {
			failure = r.GetError()
		}
	}
	if failure == nil || failure.GetErrorType() != "sandbox" || !failure.GetRetryable() {
		t.Fatalf("the crashing call's failure: %v", failure)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { st := n.MCPServers(); return st[0].Connected && st[0].Connects == 2 },
		"the server was not restarted: %+v", n.MCPServers())
	var restarts []observer.Restart
	testenv.Eventually(t, 10*time.Second, func() bool {
		var err error
		restarts, err = n.Restarts(context.Background())
		return err == nil && slices.ContainsFunc(restarts, func(r observer.Restart) bool { return r.Kind == observer.KindMCP })
	}, "no mcp_server restart among %+v", restarts)
	if !strings.Contains(logs.String(), "kind=mcp_server") {
		t.Fatalf("the restart is not in the node's log:\n%s", logs)
	}
	rec := httptest.NewRecorder()
	n.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `fathom_actor_restarts_total{kind="mcp_server"} 1`) {
		t.Fatalf("the restart is not counted in /metrics:\n%s", rec.Body)
	}
}

// TestNodeFailsToStartWithAnUnreachableMCPServer: the start fails, naming the server.
func TestNodeFailsToStartWithAnUnreachableMCPServer(t *testing.T) {
	cfg := node.Config{DataDir: t.TempDir(), Session: session.DefaultConfig(), Logger: slog.New(slog.NewTextHandler(&testenv.Buffer{}, nil)),
		MCPServers: []mcptool.ServerConfig{{Name: "ghost", Command: "/nonexistent/server"}}}
	cfg.Cluster.Provider, cfg.Cluster.Name = "local", "mcp-e2e-fail"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err == nil {
		_ = n.Stop(ctx)
		t.Fatal("the node started without its MCP server")
	}
	if !strings.Contains(err.Error(), "mcp server ghost") {
		t.Fatalf("error %v", err)
	}
}

// TestMCPToolListChangeReachesTheModel: the stdio server (official TypeScript SDK) adds a
// tool at run time (notifications/tools/list_changed); without a restart, the next
// session's model call is offered orders__late and its call runs. After the server
// removes it again, a later call is not offered it, and a call to it anyway is a
// validation ToolError naming the tools there are.
func TestMCPToolListChangeReachesTheModel(t *testing.T) {
	model := mock.New(mock.Config{Record: 200, Script: mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-PHASE: plan", Response: `{"steps":[{"id":"step-1","type":"custom","description":"do as the goal says","dependencies":[]}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: ".", Response: "done"},
		{SystemMatch: "FATHOM-ROLE: executor", ContextMatch: "GOAL-ADD", ToolCalls: []mock.ToolCallRule{{Name: "orders__add_tool", Arguments: `{"name":"late"}`}}},
		{SystemMatch: "FATHOM-ROLE: executor", ContextMatch: "GOAL-USE", ToolCalls: []mock.ToolCallRule{{Name: "orders__late", Arguments: `{"n":7}`}}},
		{SystemMatch: "FATHOM-ROLE: executor", ContextMatch: "GOAL-REMOVE", ToolCalls: []mock.ToolCallRule{{Name: "orders__remove_tool", Arguments: `{"name":"late"}`}}},
		{SystemMatch: "FATHOM-ROLE: executor", ContextMatch: "GOAL-AGAIN", ToolCalls: []mock.ToolCallRule{{Name: "orders__late", Arguments: `{"n":8}`}}},
	}, Default: "done"}})
	n := startMCPNodeOn(t, model, session.DefaultConfig(), &testenv.Buffer{}, mcptest.Stdio(t, "orders"))
	listed := func(name string) bool { return slices.Contains(n.MCPServers()[0].Tools, name) }
	if listed("orders__late") {
		t.Fatal("orders__late is listed before the server added it")
	}
	resultOf := func(evs []*messages.Event, tool string) *messages.ToolResult {
		for _, ev := range evs {
			if r := ev.GetToolResult(); r.GetTool() == tool {
				return r
			}
		}
		t.Fatalf("no tool_result of %s", tool)
		return nil
	}
	if r := resultOf(runSession(t, n, "s-add", "GOAL-ADD"), "orders__add_tool"); r.GetError() != nil {
		t.Fatalf("add_tool: %v", r.GetError())
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return listed("orders__late") }, "the node did not re-list the tools: %+v", n.MCPServers())

	if r := resultOf(runSession(t, n, "s-use", "GOAL-USE"), "orders__late"); r.GetError() != nil || !strings.Contains(r.GetResult(), "late got 7") {
		t.Fatalf("the new tool's call: result %q, error %v", r.GetResult(), r.GetError())
	}
	if tools := executorTools(t, model, "GOAL-USE"); !slices.Contains(tools, "orders__late") {
		t.Fatalf("the model call after the change was offered %v, without orders__late", tools)
	}

	if r := resultOf(runSession(t, n, "s-remove", "GOAL-REMOVE"), "orders__remove_tool"); r.GetError() != nil {
		t.Fatalf("remove_tool: %v", r.GetError())
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return !listed("orders__late") }, "the node did not drop the removed tool: %+v", n.MCPServers())
	r := resultOf(runSession(t, n, "s-again", "GOAL-AGAIN"), "orders__late")
	if r.GetError().GetErrorType() != "validation" || !strings.Contains(r.GetError().GetMessage(), `unknown tool "orders__late"`) {
		t.Fatalf("a call of the removed tool: result %q, error %v", r.GetResult(), r.GetError())
	}
	if tools := executorTools(t, model, "GOAL-AGAIN"); len(tools) == 0 || slices.Contains(tools, "orders__late") {
		t.Fatalf("the model call after the removal was offered %v", tools)
	}
}

// executorTools returns the tool names offered by the first recorded executor request
// whose conversation contains marker.
func executorTools(t *testing.T, model *mock.Server, marker string) []string {
	t.Helper()
	for _, rec := range model.Recorded() {
		if !strings.Contains(string(rec.Body), marker) || !strings.Contains(string(rec.Body), "FATHOM-ROLE: executor") {
			continue
		}
		var body struct {
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(rec.Body, &body); err != nil {
			t.Fatalf("recorded request: %v", err)
		}
		names := make([]string, 0, len(body.Tools))
		for _, tl := range body.Tools {
			names = append(names, tl.Function.Name)
		}
		return names
	}
	t.Fatalf("no executor request with %q among %d recorded", marker, len(model.Recorded()))
	return nil
}

// TestCancelStopsARunningMCPCall: cancelling a session whose step is inside a call of an
// MCP tool (the TypeScript SDK server's hold, which returns only when its call is
// cancelled) stops that call: the server sees its abort signal (notifications/cancelled)
// and the session is cancelled, terminal, with no tool result recorded after it.
func TestCancelStopsARunningMCPCall(t *testing.T) {
	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"step-1","type":"custom","description":"hold on","dependencies":[]}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: []mock.ToolCallRule{{Name: "orders__hold", Arguments: `{}`}}},
	}, Default: "done"}
	events := filepath.Join(t.TempDir(), "mcp-events")
	srv := mcptest.Stdio(t, "orders")
	srv.Env["MCP_EVENTS"] = events
	n := startMCPNode(t, script, session.DefaultConfig(), &testenv.Buffer{}, srv)
	const id = "s-mcp-cancel"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sub := n.Feed().Subscribe(id, 0)
	defer sub.Close()
	if _, err := n.Session(id).Start(&messages.StartRequest{CommandId: "c1", Goal: "hold"}, cluster.WithTimeout(30*time.Second)); err != nil {
		t.Fatalf("start session: %v", err)
	}
	for called := false; !called; {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("no call of orders__hold: %v", err)
		}
		called = ev.GetToolCalled().GetTool() == "orders__hold"
	}
	// tool_called is recorded before the call goes out: cancel once the server runs it.
	testenv.Eventually(t, 20*time.Second, func() bool {
		b, _ := os.ReadFile(events)
		return strings.Contains(string(b), "started")
	}, "the MCP server never started the held call")
	if _, err := n.Session(id).Cancel(&messages.CancelRequest{CommandId: "c2", Reason: "enough", By: "test"}, cluster.WithTimeout(30*time.Second)); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		b, _ := os.ReadFile(events)
		return strings.Contains(string(b), "cancelled")
	}, "the MCP server never saw its call cancelled")
	var after []string
	for done := false; !done; {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("no session_cancelled: %v", err)
		}
		if ev.GetSessionCancelled() != nil {
			done = true
		}
	}
	st, err := n.Session(id).GetState(&messages.GetStateRequest{}, cluster.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if st.GetState().GetStatus() != messages.SessionStatus_SESSION_STATUS_CANCELLED {
		t.Fatalf("status %s, want cancelled", st.GetState().GetStatus())
	}
	// Nothing is recorded after session_cancelled (a late result of the stopped call
	// included).
	lctx, lcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer lcancel()
	if ev, err := sub.Next(lctx); err == nil {
		after = append(after, ev.Type())
	}
	if len(after) > 0 {
		t.Fatalf("events after session_cancelled: %v", after)
	}
}
