package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/gateway/mcpserver"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
)

// mcpScript is the demo model with plans of its own: an agent tool's goal is planned as
// one step of that agent; "in two steps" as research, then write.
func mcpScript() *mock.Script {
	const plan = `FATHOM-ROLE: orchestrator\s+FATHOM-PHASE: plan`
	s := mock.DemoScript()
	s.Rules = append([]mock.Rule{
		{SystemMatch: plan, ContextMatch: `Have the auditor agent`, Response: `{"steps":[{"id":"a1","type":"auditor","description":"Audit the goal","dependencies":[]}]}`},
		{SystemMatch: plan, ContextMatch: `ask me first`, Response: `{"steps":[{"id":"h1","type":"human_input","description":"Which colour should it be?","dependencies":[]}]}`},
		{SystemMatch: plan, ContextMatch: `in two steps`, Response: `{"steps":[` +
			`{"id":"r1","type":"research","description":"Research it. Save the notes as research/notes.md.","dependencies":[]},` +
			`{"id":"w1","type":"write","description":"Write it. Save it as drafts/draft.md.","dependencies":["r1"]}]}`},
	}, s.Rules...)
	return &s
}

// mcpLine is one step's line of testdata/mcpclient.cjs.
type mcpLine struct {
	Step  string `json:"step"`
	Error string `json:"error"`
	Code  any    `json:"code"`
	Tools []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"inputSchema"`
	} `json:"tools"`
	Result struct {
		IsError           bool              `json:"isError"`
		Content           []map[string]any  `json:"content"`
		StructuredContent *mcpserver.Result `json:"structuredContent"`
		Meta              map[string]any    `json:"_meta"`
	} `json:"result"`
	Progress []struct {
		Progress float64        `json:"progress"`
		Message  string         `json:"message"`
		Meta     map[string]any `json:"_meta"`
	} `json:"progress"`
}

func (l mcpLine) text() string {
	var b strings.Builder
	for _, c := range l.Result.Content {
		s, _ := c["text"].(string)
		b.WriteString(s)
	}
	return b.String()
}

// runMCPClient runs testdata/mcpclient.cjs (the official MCP TypeScript SDK) against
// url with steps, and returns its lines by step.
func runMCPClient(t *testing.T, url, tok string, steps ...string) map[string]mcpLine {
	t.Helper()
	return runMCPScript[mcpLine](t, url, tok, steps...)
}

func (l mcpLine) step() string { return l.Step }

// runMCPScript runs testdata/mcpclient.cjs against url as tok with steps, and decodes
// each line it prints as an L, by step; every step must print one.
func runMCPScript[L interface{ step() string }](t *testing.T, url, tok string, steps ...string) map[string]L {
	t.Helper()
	dir := testenv.NodeMCP(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed (scripts/install-node-mcp.sh installs it): %v", err)
	}
	script, err := filepath.Abs("testdata/mcpclient.cjs")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script, url, tok}, steps...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("mcpclient.cjs: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	out := map[string]L{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l L
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("mcpclient.cjs printed %q: %v", sc.Text(), err)
		}
		out[l.step()] = l
	}
	for _, s := range steps {
		if _, ok := out[s]; !ok {
			t.Fatalf("mcpclient.cjs printed nothing for %s\nstdout: %s\nstderr: %s", s, stdout.String(), stderr.String())
		}
	}
	return out
}

// eventTypes are the types of session id's stored events, in order.
func (g *gw) eventTypes(id string) []string {
	var out []string
	for _, ev := range g.journal(id) {
		typ, _ := ev["type"].(string)
		out = append(out, typ)
	}
	return out
}

// TestMCPServer drives /mcp with the official MCP TypeScript SDK client over streamable
// HTTP against a real gateway and node: the tools are run_agent and one per agent (the
// built-ins and a configured one), with goal required; run_agent and an agent's tool
// run a session to its end and answer its result (text, and structured content with
// the session id, status and cost), with a progress notification per step carrying the
// event; bad arguments are tool errors that say what is wrong; no token is 401, a
// read-only token's call is refused as a tool error, a session that asks a human ends
// the call with the question, another principal may not use an
// MCP session; and
// cancelling a call cancels its session (session_cancelled in the journal).
func TestMCPServer(t *testing.T) {
	auditor := core.AgentSpec{Name: "auditor", Description: "checks the goal, in Go",
		Run: func(context.Context, core.Brief) (*messages.SubagentResult, error) {
			return &messages.SubagentResult{Status: "completed", Summary: "audited: nothing to add", Confidence: 1}, nil
		}}
	g := startGW(t, gwOpts{delayMS: 150, script: mcpScript(), session: func(c *session.Config) { c.Agents = append(c.Agents, auditor) },
		cfg: func(c *gateway.Config) { c.Authenticator = tenantTokens{} }})
	var agents []mcpserver.Agent
	for _, a := range g.n.Agents() {
		agents = append(agents, mcpserver.Agent{Name: a.Name, Description: a.Description, StepType: a.StepType()})
	}
	if _, err := mcpserver.Mount(mcpserver.Config{Gateway: g.h, Agents: agents}); err != nil {
		t.Fatal(err)
	}
	url := g.srv.URL + mcpserver.Path

	// No token: the gateway answers 401 before the MCP server sees the request.
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST /mcp without a token: %d, want 401", resp.StatusCode)
	}

	// An MCP session belongs to the principal that opened it.
	mcpPost := func(tok, sid, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp = mcpPost("acme", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize as acme: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := mcpPost("globex", sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("globex on acme's MCP session: %d, want 403", resp.StatusCode)
	}
	if resp := mcpPost("acme", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("acme on its MCP session: %d, want 202", resp.StatusCode)
	}

	const (
		run    = "call:run_agent:mcp-run-1:Write a haiku about journals in two steps"
		agent  = "call:auditor:mcp-audit-1:Check the haiku"
		cancel = "cancel:mcp-cancel-1:A long one in two steps"
		human  = "call:run_agent:mcp-human-1:Paint it, but ask me first"
	)
	bad := []string{`bad:run_agent:{}`, `bad:run_agent:{"goal":"   "}`, `bad:run_agent:{"goal":"x","session_id":"no spaces allowed"}`,
		`bad:auditor:{"goal":5}`, `bad:run_agent:{"goal":"x","extra":true}`}
	out := runMCPClient(t, url, token, append([]string{"notoken", "list", run, agent, human, cancel}, bad...)...)

	if l := out["notoken"]; l.Code != 401.0 || !strings.Contains(l.Error, "missing or invalid bearer token") {
		t.Fatalf("the SDK client without a token: %+v, want a 401 error", l)
	}

	var names []string
	for _, tool := range out["list"].Tools {
		names = append(names, tool.Name)
		req, _ := tool.InputSchema["required"].([]any)
		if !slices.Contains(req, any("goal")) {
			t.Fatalf("tool %s: goal is not required: %v", tool.Name, tool.InputSchema)
		}
	}
	for _, want := range []string{mcpserver.RunAgentTool, "researcher", "coder", "writer", "reviewer", "auditor"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools %v lack %s", names, want)
		}
	}

	l := out[run]
	sc := l.Result.StructuredContent
	if l.Result.IsError || sc == nil || sc.SessionID != "mcp-run-1" || sc.Status != mcpserver.StatusCompleted ||
		!strings.Contains(l.text(), "(demo model)") || sc.Result != l.text() {
		t.Fatalf("run_agent: %+v", l)
	}
	var msgs []string
	last := 0.0
	for _, p := range l.Progress {
		if p.Progress <= last {
			t.Fatalf("progress does not increase: %+v", l.Progress)
		}
		last = p.Progress
		msgs = append(msgs, p.Message)
		ev, _ := p.Meta[mcpserver.EventMetaKey].(map[string]any)
		if ev["session_id"] != "mcp-run-1" || ev["type"] == nil {
			t.Fatalf("progress %q does not carry its event: %v", p.Message, p.Meta)
		}
	}
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{"planned 2 step(s)", "step 1 started (research)", "step 1 completed", "step 2 started (write)", "step 2 completed", "session completed"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("progress lacks %q:\n%s", want, joined)
		}
	}
	if st, state := getJSON(t, g.srv.URL+"/v1/sessions/mcp-run-1", token); st != 200 || state["state"].(map[string]any)["cost_usd"] != sc.CostUSD {
		t.Fatalf("run_agent's cost_usd %v is not the session's: %d %v", sc.CostUSD, st, state["state"])
	}
	if types := g.eventTypes("mcp-run-1"); types[len(types)-1] != "session_completed" {
		t.Fatalf("mcp-run-1's journal: %v", types)
	}

	l = out[agent]
	if sc := l.Result.StructuredContent; l.Result.IsError || sc == nil || sc.SessionID != "mcp-audit-1" || sc.Status != mcpserver.StatusCompleted || l.text() == "" {
		t.Fatalf("auditor: %+v", l)
	}
	planned := false
	for _, ev := range g.journal("mcp-audit-1") {
		if ev["type"] == "plan_created" {
			b, _ := json.Marshal(ev)
			planned = strings.Contains(string(b), `"type":"auditor"`)
		}
	}
	if !planned {
		t.Fatalf("the auditor tool's session was not planned as the auditor's step: %v", g.journal("mcp-audit-1"))
	}

	// A session that asks a human ends the call with the question; it keeps waiting.
	l = out[human]
	if sc := l.Result.StructuredContent; l.Result.IsError || sc == nil || sc.Status != mcpserver.StatusAwaitingInput ||
		sc.Question != "Which colour should it be?" || sc.RequestID != "h1" || !strings.Contains(l.text(), "/v1/sessions/mcp-human-1/input") {
		t.Fatalf("a session that asks a human: %+v", l)
	}
	if st, state := getJSON(t, g.srv.URL+"/v1/sessions/mcp-human-1", token); st != 200 || state["state"].(map[string]any)["status"] != "SESSION_STATUS_AWAITING_HUMAN" {
		t.Fatalf("mcp-human-1 after the call: %d %v", st, state["state"])
	}

	for s, want := range map[string]string{bad[0]: "goal", bad[1]: "goal must not be empty", bad[2]: "session_id",
		bad[3]: "goal", bad[4]: "extra"} {
		l := out[s]
		if !l.Result.IsError || !strings.Contains(l.text(), want) || l.Result.StructuredContent != nil {
			t.Fatalf("%s: %+v, want a tool error saying %q", s, l, want)
		}
	}

	// A read-only credential lists the tools, and a call is refused as the gateway refuses it.
	ro := runMCPClient(t, url, readToken, "list", `bad:run_agent:{"goal":"x"}`)
	if l := ro[`bad:run_agent:{"goal":"x"}`]; len(ro["list"].Tools) != len(names) || !l.Result.IsError || !strings.Contains(l.text(), "may only read") {
		t.Fatalf("read-only credential: %+v", ro)
	}

	l = out[cancel]
	if l.Error == "" || len(l.Progress) == 0 {
		t.Fatalf("the cancelled call: %+v", l)
	}
	var types []string
	testenv.Eventually(t, 30*time.Second, func() bool {
		types = g.eventTypes("mcp-cancel-1")
		return len(types) > 0 && types[len(types)-1] == "session_cancelled"
	}, "cancelling the call did not cancel session mcp-cancel-1: %v", &types)
	for _, ev := range g.journal("mcp-cancel-1") {
		if ev["type"] == "session_cancelled" {
			b, _ := json.Marshal(ev)
			if !strings.Contains(string(b), `"by":"mcp"`) {
				t.Fatalf("session_cancelled: %s", b)
			}
		}
	}
}

// bearerTransport adds a bearer credential to every request.
type bearerTransport struct{ tok string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPServerShutdown: the gateway's Shutdown closes the open MCP sessions, so that
// the HTTP server's own Shutdown is not held by a client's standing event stream.
func TestMCPServerShutdown(t *testing.T) {
	g := startGW(t, gwOpts{})
	if _, err := mcpserver.Mount(mcpserver.Config{Gateway: g.h}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: g.srv.URL + mcpserver.Path, HTTPClient: &http.Client{Transport: bearerTransport{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.h.Shutdown(ctx); err != nil {
		t.Fatalf("gateway shutdown: %v", err)
	}
	sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
	defer scancel()
	if err := g.srv.Config.Shutdown(sctx); err != nil {
		t.Fatalf("the HTTP server's shutdown after the gateway's: %v (an MCP stream holds it)", err)
	}
}
