package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/gateway/mcpserver"
)

// mcpTask is a task as the TypeScript SDK hands it back.
type mcpTask struct {
	TaskID        string  `json:"taskId"`
	Status        string  `json:"status"`
	StatusMessage string  `json:"statusMessage"`
	CreatedAt     string  `json:"createdAt"`
	LastUpdatedAt string  `json:"lastUpdatedAt"`
	TTL           *int64  `json:"ttl"`
	PollInterval  float64 `json:"pollInterval"`
}

// mcpToolResult is a tool call's result.
type mcpToolResult struct {
	IsError           bool              `json:"isError"`
	Content           []map[string]any  `json:"content"`
	StructuredContent *mcpserver.Result `json:"structuredContent"`
	Meta              map[string]any    `json:"_meta"`
}

// mcpTried is what one request of a taskget step gave: its result or its error.
type mcpTried struct {
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
	Code   any             `json:"code"`
}

// mcpTaskLine is one task step's line of testdata/mcpclient.cjs.
type mcpTaskLine struct {
	Step     string `json:"step"`
	Error    string `json:"error"`
	Code     any    `json:"code"`
	Messages []struct {
		Type   string         `json:"type"`
		Task   *mcpTask       `json:"task"`
		Result *mcpToolResult `json:"result"`
		Error  string         `json:"error"`
	} `json:"messages"`
	Get          *mcpTask                `json:"get"`
	Result       *mcpToolResult          `json:"result"`
	Created      *struct{ Task mcpTask } `json:"created"`
	Polled       []mcpTask               `json:"polled"`
	Cancelled    *mcpTask                `json:"cancelled"`
	Capabilities map[string]any          `json:"capabilities"`
	Execution    []map[string]any        `json:"execution"`
	List         *struct {
		Tasks []mcpTask `json:"tasks"`
	} `json:"list"`
	TGet    mcpTried `json:"tget"`
	TResult mcpTried `json:"tresult"`
	TCancel mcpTried `json:"tcancel"`
}

// runMCPTaskClient runs testdata/mcpclient.cjs's task steps against url as tok.
func runMCPTaskClient(t *testing.T, url, tok string, steps ...string) map[string]mcpTaskLine {
	t.Helper()
	return runMCPScript[mcpTaskLine](t, url, tok, steps...)
}

func (l mcpTaskLine) step() string { return l.Step }

// TestMCPServerTasks drives the MCP tasks extension (protocol 2025-11-25) with the
// official TypeScript SDK client (client.experimental.tasks, strict capabilities) over
// streamable HTTP: the server advertises tasks for tools/call and marks its tools; a
// task-augmented call answers a working task at once (its id the session's), polled to
// completed, whose tasks/result is the tool's result; a task waiting for a human is
// input_required and tasks/cancel cancels its session; tasks/list lists the caller's; an
// unknown task id is invalid params for get, result and cancel, and another tenant's
// task is answered exactly like it; bad arguments are invalid params and a read-only
// credential's task call is refused; no token is 401.
func TestMCPServerTasks(t *testing.T) {
	g := startGW(t, gwOpts{delayMS: 100, script: mcpScript(), cfg: func(c *gateway.Config) { c.Authenticator = tenantTokens{} }})
	if _, err := mcpserver.Mount(mcpserver.Config{Gateway: g.h}); err != nil {
		t.Fatal(err)
	}
	url := g.srv.URL + mcpserver.Path

	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"mcp-task-1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("tasks/get without a token: %d, want 401", resp.StatusCode)
	}

	const (
		run    = "task:run_agent:mcp-task-1:Write a haiku about journals in two steps"
		human  = "taskcancel:mcp-task-2:Paint it, but ask me first"
		list   = "tasklist"
		absent = "taskget:no-such-task"
	)
	out := runMCPTaskClient(t, url, "acme", run, human, list, absent)

	l := out[run]
	if l.Error != "" || len(l.Messages) < 2 {
		t.Fatalf("the task call: %+v", l)
	}
	first, last := l.Messages[0], l.Messages[len(l.Messages)-1]
	if first.Type != "taskCreated" || first.Task == nil || first.Task.TaskID != "mcp-task-1" || first.Task.Status != mcpserver.TaskWorking ||
		first.Task.CreatedAt == "" || first.Task.PollInterval != mcpserver.TaskPollInterval {
		t.Fatalf("the call's first message is not the working task: %+v", first)
	}
	if last.Type != "result" || last.Result == nil || last.Result.IsError || last.Result.StructuredContent == nil ||
		last.Result.StructuredContent.SessionID != "mcp-task-1" || last.Result.StructuredContent.Status != mcpserver.StatusCompleted ||
		!strings.Contains(last.Result.StructuredContent.Result, "(demo model)") {
		t.Fatalf("the task's result: %+v", last)
	}
	if rel, _ := last.Result.Meta["io.modelcontextprotocol/related-task"].(map[string]any); rel["taskId"] != "mcp-task-1" {
		t.Fatalf("the result does not name its task: %v", last.Result.Meta)
	}
	statuses := 0
	for _, m := range l.Messages {
		if m.Type == "taskStatus" {
			statuses++
		}
	}
	if statuses == 0 {
		t.Fatalf("the task was never polled: %+v", l.Messages)
	}
	if l.Get == nil || l.Get.Status != mcpserver.TaskCompleted || l.Result == nil || l.Result.StructuredContent == nil ||
		l.Result.StructuredContent.Result != last.Result.StructuredContent.Result {
		t.Fatalf("tasks/get and tasks/result after the end: %+v %+v", l.Get, l.Result)
	}
	if types := g.eventTypes("mcp-task-1"); types[len(types)-1] != "session_completed" {
		t.Fatalf("mcp-task-1's journal: %v", types)
	}

	l = out[human]
	if l.Error != "" || l.Created == nil || l.Created.Task.TaskID != "mcp-task-2" || l.Created.Task.Status != mcpserver.TaskWorking {
		t.Fatalf("the task to cancel: %+v", l)
	}
	if p := l.Polled[len(l.Polled)-1]; p.Status != mcpserver.TaskInputRequired || !strings.Contains(p.StatusMessage, "Which colour should it be?") {
		t.Fatalf("a task waiting for a human: %+v", l.Polled)
	}
	if l.Cancelled == nil || l.Cancelled.Status != mcpserver.TaskCancelled || l.Get == nil || l.Get.Status != mcpserver.TaskCancelled {
		t.Fatalf("tasks/cancel: %+v, then %+v", l.Cancelled, l.Get)
	}
	var cancelled string
	for _, ev := range g.journal("mcp-task-2") {
		if ev["type"] == "session_cancelled" {
			b, _ := json.Marshal(ev)
			cancelled = string(b)
		}
	}
	if !strings.Contains(cancelled, `"by":"mcp"`) {
		t.Fatalf("tasks/cancel did not cancel the session: %v", g.eventTypes("mcp-task-2"))
	}

	l = out[list]
	tasks, _ := l.Capabilities["tasks"].(map[string]any)
	req, _ := tasks["requests"].(map[string]any)
	tools, _ := req["tools"].(map[string]any)
	if tools["call"] == nil || tasks["list"] == nil || tasks["cancel"] == nil {
		t.Fatalf("the server's tasks capability: %v", l.Capabilities)
	}
	if len(l.Execution) == 0 {
		t.Fatal("no tools")
	}
	for _, e := range l.Execution {
		if e["taskSupport"] != "optional" {
			t.Fatalf("tools' execution: %v", l.Execution)
		}
	}
	got := map[string]string{}
	for _, tk := range l.List.Tasks {
		got[tk.TaskID] = tk.Status
	}
	if got["mcp-task-1"] != mcpserver.TaskCompleted || got["mcp-task-2"] != mcpserver.TaskCancelled {
		t.Fatalf("tasks/list: %v", got)
	}

	// An unknown task id, and another tenant's task, are invalid params "not found", alike.
	l = out[absent]
	for _, r := range []mcpTried{l.TGet, l.TResult, l.TCancel} {
		if r.Code != -32602.0 || !strings.Contains(r.Error, `task "no-such-task" not found`) {
			t.Fatalf("an unknown task: %+v", l)
		}
	}
	const theirs = "taskget:mcp-task-1"
	other := runMCPTaskClient(t, url, "globex", theirs, list)
	o := other[theirs]
	for i, r := range []mcpTried{o.TGet, o.TResult, o.TCancel} {
		want := []mcpTried{l.TGet, l.TResult, l.TCancel}[i]
		if r.Code != want.Code || r.Error != strings.ReplaceAll(want.Error, "no-such-task", "mcp-task-1") || r.Result != nil {
			t.Fatalf("another tenant's task: %+v, want it answered like a missing one: %+v", o, l)
		}
	}
	for _, tk := range other[list].List.Tasks {
		if strings.HasPrefix(tk.TaskID, "mcp-task-") {
			t.Fatalf("globex lists acme's task %s", tk.TaskID)
		}
	}

	// Bad arguments are invalid params; a read-only credential's call is refused.
	bad := map[string]string{`taskbad:run_agent:{}`: "goal must not be empty", `taskbad:run_agent:{"goal":"x","extra":true}`: "extra",
		`taskbad:run_agent:{"goal":5}`: "goal", `taskbad:run_agent:{"goal":"x","session_id":"no spaces"}`: "session_id", `taskbad:nobody:{"goal":"x"}`: `unknown tool "nobody"`}
	var steps []string
	for s := range bad {
		steps = append(steps, s)
	}
	got2 := runMCPTaskClient(t, url, "acme", steps...)
	for s, want := range bad {
		if l := got2[s]; l.Code != -32602.0 || !strings.Contains(l.Error, want) || l.Created != nil {
			t.Fatalf("%s: %+v, want invalid params saying %q", s, l, want)
		}
	}
	const ro = `taskbad:run_agent:{"goal":"x"}`
	if l := runMCPTaskClient(t, url, readToken, ro)[ro]; l.Code != -32603.0 || !strings.Contains(l.Error, "may only read") {
		t.Fatalf("a read-only credential's task: %+v", l)
	}
}
