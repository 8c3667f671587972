package agui_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/gateway/agui"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/tools"
)

const token = "agui-admin-token"

// script is the model: a weather thread (a lookup tool call, then a streamed answer; a
// follow-up answered directly) and a refund thread (ask_human, then a refund call that
// needs approval, then the answer).
const script = `{"rules":[
 {"system_match":"FATHOM-ROLE: orchestrator[\\s\\S]*FATHOM-FOLLOW-UP","response":"Tomorrow it rains in Paris."},
 {"system_match":"FATHOM-ROLE: orchestrator","context_match":"Refund","response":"{\"steps\":[{\"id\":\"r\",\"type\":\"custom\",\"description\":\"Refund the order\"}]}"},
 {"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"w\",\"type\":\"custom\",\"description\":\"Look up the weather\"}]}"},
 {"system_match":"FATHOM-ROLE: executor","tool_match":"refunded","response":"Refunded order 42."},
 {"system_match":"FATHOM-ROLE: executor","tool_match":"42","tool_calls":[{"name":"refund","arguments":"{\"order\":\"42\"}"}]},
 {"system_match":"FATHOM-ROLE: executor","context_match":"Refund","tool_calls":[{"name":"ask_human","arguments":"{\"question\":\"Which order?\"}"}]},
 {"system_match":"FATHOM-ROLE: executor","tool_match":"sunny","response":"It is sunny in Paris today, with a light breeze from the west.","chunk_delay_ms":20},
 {"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"lookup","arguments":"{\"city\":\"Paris\"}"}]}
]}`

// tenants authenticates "acme" and "globex" as members of those tenants.
type tenants struct{}

func (tenants) Authenticate(_ context.Context, cred string) (auth.Principal, error) {
	switch cred {
	case "acme", "globex":
		return auth.Principal{Subject: cred + "-user", Tenant: cred, Roles: []auth.Role{auth.RoleMember}}, nil
	}
	return auth.Principal{}, auth.ErrNotMine
}

type env struct {
	url     string
	n       *node.Node
	h       *gateway.Handler
	refunds *atomic.Int32
}

// start runs a node (embedded journal, the scripted model) behind a gateway with the
// AG-UI endpoint mounted, as Node.Gateway mounts it.
func start(t *testing.T) *env { return startWith(t, nil, nil) }

// startWith is start with the model's script sc (nil: script) and the gateway's
// configuration edited by gw (nil: as it is).
func startWith(t *testing.T, sc *mock.Script, gw func(*gateway.Config)) *env {
	t.Helper()
	if sc == nil {
		s, err := mock.ParseScript([]byte(script))
		if err != nil {
			t.Fatal(err)
		}
		sc = &s
	}
	model := httptest.NewServer(mock.New(mock.Config{Script: *sc}).Handler())
	t.Cleanup(model.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	refunds := &atomic.Int32{}
	cfg := node.Config{DataDir: t.TempDir(), Session: session.DefaultConfig(), Logger: log,
		LLM: node.LLMConfig{BaseURL: model.URL + "/v1", APIKey: "test"},
		ExtraTools: []tools.Tool{
			tools.MustNew("lookup", "Looks up the weather of a city.", tools.SandboxNone, func(_ context.Context, a struct {
				City string `json:"city"`
			}) (any, error) {
				return "sunny in " + a.City, nil
			}),
			tools.MustNew("refund", "Refunds an order.", tools.SandboxNone, func(_ context.Context, a struct {
				Order string `json:"order"`
			}) (any, error) {
				refunds.Add(1)
				return "refunded " + a.Order, nil
			}),
		}}
	cfg.Session.ApprovalTools = []string{"refund"}
	cfg.Cluster.Provider, cfg.Cluster.Logger, cfg.Cluster.Name = "local", log, "agui-"+gateway.NewID("t")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	gcfg := gateway.Config{Token: token, Authenticator: tenants{}, Sessions: n.GatewaySessions(), Feed: n.Feed(), Logger: log}
	if gw != nil {
		gw(&gcfg)
	}
	h, err := gateway.New(gcfg)
	if err != nil {
		t.Fatal(err)
	}
	agui.Mount(h, log)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
		srv.Close()
		if err := n.Stop(ctx); err != nil {
			t.Errorf("stop node: %v", err)
		}
	})
	return &env{url: srv.URL + agui.Path, n: n, h: h, refunds: refunds}
}

// post sends body to the endpoint and returns the status and, for a stream, its events
// (else the JSON body as one element).
func (e *env) post(t *testing.T, tok string, body string) (int, []map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, []map[string]any{m}
	}
	var evs []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			evs = append(evs, m)
		}
	}
	return resp.StatusCode, evs
}

func types(evs []map[string]any) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i], _ = e["type"].(string)
	}
	return out
}

func count(evs []map[string]any, typ string) int {
	n := 0
	for _, e := range evs {
		if e["type"] == typ {
			n++
		}
	}
	return n
}

func last(evs []map[string]any) map[string]any {
	if len(evs) == 0 {
		return nil
	}
	return evs[len(evs)-1]
}

func input(thread, run, text string, resume ...map[string]any) string {
	in := map[string]any{"threadId": thread, "runId": run, "messages": []any{}, "tools": []any{}, "context": []any{}, "state": map[string]any{}}
	if text != "" {
		in["messages"] = []any{map[string]any{"id": "m-" + run, "role": "user", "content": text}}
	}
	if len(resume) > 0 {
		in["resume"] = resume
	}
	b, _ := json.Marshal(in)
	return string(b)
}

type run struct {
	Events   []map[string]any `json:"events"`
	Wire     int              `json:"wire"`
	Invalid  []any            `json:"invalid"`
	Error    *string          `json:"error"`
	Result   any              `json:"result"`
	Pending  []map[string]any `json:"pending"`
	Messages []map[string]any `json:"messages"`
	State    map[string]any   `json:"state"`
}

// TestAGUIOfficialClient drives POST /v1/agui with @ag-ui/client's HttpAgent: a run with
// a tool call and the model's text as it streams, a second run on the thread (a
// follow-up turn), the first run posted again (replayed from the journal), and a thread
// whose runs end with interrupts (a question, then an approval) that the next runs'
// resume answers. Every event validates against @ag-ui/core's EventSchemas, as the
// client received it and on the wire.
func TestAGUIOfficialClient(t *testing.T) {
	dir := testenv.NodeAGUI(t)
	e := start(t)
	out := client(t, dir, e)
	first := out["first"]
	ts := types(first.Events)
	if fin := last(first.Events); fin["type"] != "RUN_FINISHED" || fin["result"] != "It is sunny in Paris today, with a light breeze from the west." ||
		fin["outcome"].(map[string]any)["type"] != "success" {
		t.Fatalf("first run ends with %v (%v)", fin, ts)
	}
	for _, want := range []string{"STATE_SNAPSHOT", "STATE_DELTA", "STEP_STARTED", "STEP_FINISHED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "TEXT_MESSAGE_START", "TEXT_MESSAGE_END"} {
		if count(first.Events, want) == 0 {
			t.Fatalf("first run has no %s: %v", want, ts)
		}
	}
	if n := count(first.Events, "TEXT_MESSAGE_CONTENT"); n < 3 {
		t.Fatalf("the answer came in %d TEXT_MESSAGE_CONTENT events, want it as it streams (several): %v", n, ts)
	}
	var call, result map[string]any
	for _, ev := range first.Events {
		switch ev["type"] {
		case "TOOL_CALL_START":
			call = ev
		case "TOOL_CALL_RESULT":
			result = ev
		}
	}
	if call["toolCallName"] != "lookup" || result["toolCallId"] != call["toolCallId"] || result["content"] != "sunny in Paris" {
		t.Fatalf("tool call %v, result %v", call, result)
	}
	if plan, _ := first.State["plan"].(map[string]any); plan == nil || first.State["status"] != "completed" ||
		plan["steps"].([]any)[0].(map[string]any)["status"] != "completed" {
		t.Fatalf("the client's state after the first run: %v", first.State)
	}

	followup := out["followup"]
	if fin := last(followup.Events); fin["type"] != "RUN_FINISHED" || fin["result"] != "Tomorrow it rains in Paris." {
		t.Fatalf("follow-up run ends with %v (%v)", fin, types(followup.Events))
	}
	if m := followup.Messages[len(followup.Messages)-1]; m["role"] != "assistant" || m["content"] != "Tomorrow it rains in Paris." {
		t.Fatalf("the client's last message after the follow-up: %v", m)
	}
	if st := stateOf(t, e, auth.DefaultTenant, "weather-thread", token); st["turn"] != float64(2) {
		t.Fatalf("the thread's session after two runs: %v", st)
	}

	replay := out["replay"]
	if fin := last(replay.Events); fin["type"] != "RUN_FINISHED" || fin["result"] != last(first.Events)["result"] {
		t.Fatalf("the replayed run ends with %v (%v)", fin, types(replay.Events))
	}
	if count(replay.Events, "TOOL_CALL_RESULT") != 1 || count(replay.Events, "STEP_STARTED") != 1 {
		t.Fatalf("the replayed run: %v", types(replay.Events))
	}

	ask := out["ask"]
	fin := last(ask.Events)
	oc, _ := fin["outcome"].(map[string]any)
	if fin["type"] != "RUN_FINISHED" || oc["type"] != "interrupt" || len(ask.Pending) != 1 || ask.Pending[0]["reason"] != "input_required" ||
		ask.Pending[0]["message"] != "Which order?" {
		t.Fatalf("the question's run ends with %v; pending %v (%v)", fin, ask.Pending, types(ask.Events))
	}
	approve := out["approve"]
	if len(approve.Pending) != 1 || approve.Pending[0]["reason"] != "tool_call" || approve.Pending[0]["toolCallId"] == nil {
		t.Fatalf("the approval's run: pending %v (%v)", approve.Pending, types(approve.Events))
	}
	for _, ev := range approve.Events {
		if ev["type"] == "TOOL_CALL_RESULT" && ev["toolCallId"] == approve.Pending[0]["toolCallId"] {
			t.Fatalf("the refund ran before its approval: %v", ev)
		}
	}
	done := out["done"]
	if fin := last(done.Events); fin["type"] != "RUN_FINISHED" || fin["result"] != "Refunded order 42." || len(done.Pending) != 0 {
		t.Fatalf("the approved run ends with %v; pending %v (%v)", fin, done.Pending, types(done.Events))
	}
	var refunded bool
	for _, ev := range done.Events {
		if ev["type"] == "TOOL_CALL_RESULT" && ev["toolCallId"] == approve.Pending[0]["toolCallId"] && ev["content"] == "refunded 42" {
			refunded = true
		}
	}
	if !refunded || e.refunds.Load() != 1 {
		t.Fatalf("the approved call's result (%d refunds): %v", e.refunds.Load(), done.Events)
	}
}

// client runs testdata/agui-client.cjs (args after the URL and token: its mode) against
// e and checks every run: no client error, every event valid against the schemas (as
// received and on the wire), RUN_STARTED first.
func client(t *testing.T, dir string, e *env, args ...string) map[string]run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"testdata/agui-client.cjs", e.url, token}, args...)...)
	cmd.Env = append(cmd.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"), "SUPPRESS_TRANSFORMATION_WARNINGS=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("agui-client.cjs: %v\n%s", err, stderr.String())
	}
	var out map[string]run
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("agui-client.cjs printed %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	for name, r := range out {
		if r.Error != nil || len(r.Invalid) > 0 || r.Wire != len(r.Events) || len(r.Events) == 0 {
			t.Fatalf("run %s: error %v, invalid events %v, %d on the wire, %d received: %v", name, deref(r.Error), r.Invalid, r.Wire, len(r.Events), types(r.Events))
		}
		if r.Events[0]["type"] != "RUN_STARTED" {
			t.Fatalf("run %s starts with %v", name, r.Events[0])
		}
	}
	return out
}

// TestAGUIDemoPlan: the demo model's plan (a researcher, then a coder and a writer in
// parallel, then a reviewer: sub-agents with tool calls, their text interleaved) is one
// valid AG-UI run for the official client: every step started and finished, every
// message and tool call closed, the summary as the result.
func TestAGUIDemoPlan(t *testing.T) {
	dir := testenv.NodeAGUI(t)
	demo := mock.DemoScript()
	e := startWith(t, &demo, nil)
	r := client(t, dir, e, "demo")["demo"]
	fin := last(r.Events)
	if fin["type"] != "RUN_FINISHED" || !strings.Contains(fin["result"].(string), "Summary for: Write a haiku about rain") {
		t.Fatalf("the demo run ends with %v (%v)", fin, types(r.Events))
	}
	started := map[string]bool{}
	for _, ev := range r.Events {
		if ev["type"] == "STEP_STARTED" {
			started[ev["stepName"].(string)] = true
		}
	}
	if len(started) != 4 || count(r.Events, "STEP_FINISHED") < 4 || count(r.Events, "TOOL_CALL_RESULT") < 4 {
		t.Fatalf("the demo run's steps %v: %v", started, types(r.Events))
	}
	steps := r.State["plan"].(map[string]any)["steps"].([]any)
	for _, s := range steps {
		if s.(map[string]any)["status"] != "completed" {
			t.Fatalf("the client's plan after the run: %v", steps)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// stateOf is the state of thread's session, read through the gateway's own route.
func stateOf(t *testing.T, e *env, tenant, thread, tok string) map[string]any {
	t.Helper()
	url := strings.TrimSuffix(e.url, agui.Path) + "/v1/sessions/" + agui.SessionID(tenant, thread)
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		State map[string]any `json:"state"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out.State
}

// TestAGUIErrors: no credential is 401; a malformed RunAgentInput is 400 with a message
// naming what is wrong; another tenant's thread is answered as an unknown one (its
// interrupts are not open for them, and a run there starts a thread of their own); a
// run without resume on a thread with open interrupts ends with RUN_ERROR.
func TestAGUIErrors(t *testing.T) {
	e := start(t)
	if st, _ := e.post(t, "", input("t", "r", "hello")); st != http.StatusUnauthorized {
		t.Fatalf("no credential: %d, want 401", st)
	}
	if st, _ := e.post(t, "nobody", input("t", "r", "hello")); st != http.StatusUnauthorized {
		t.Fatalf("an unknown credential: %d, want 401", st)
	}
	for body, want := range map[string]string{
		`{"threadId":`:                               "malformed RunAgentInput",
		`{"runId":"r","messages":[]}`:                "RunAgentInput.threadId is required",
		`{"threadId":"t","messages":[]}`:             "RunAgentInput.runId is required",
		`{"threadId":7,"runId":"r","messages":[]}`:   "malformed RunAgentInput",
		`{"threadId":"t","runId":"r"}`:               "RunAgentInput.messages is required",
		`{"threadId":"t","runId":"r","messages":[]}`: "must end with a user message",
		`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"robot","content":"x"}]}`:               "messages[0] needs an id and a role",
		`{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"i","status":"maybe"}]}`:      "resume[0] needs an interruptId and a status",
		`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"user","content":[{"type":"image"}]}]}`: "has no text",
	} {
		st, out := e.post(t, "acme", body)
		msg, _ := out[0]["error"].(map[string]any)["message"].(string)
		if st != http.StatusBadRequest || out[0]["error"].(map[string]any)["code"] != gateway.CodeInvalidArgument || !strings.Contains(msg, want) {
			t.Errorf("%s: %d %v, want 400 invalid_argument with %q", body, st, out, want)
		}
	}

	// acme's thread waits for an answer (ask_human).
	st, evs := e.post(t, "acme", input("shared", "acme-1", "Refund order 42"))
	fin := last(evs)
	oc, _ := fin["outcome"].(map[string]any)
	if st != http.StatusOK || oc["type"] != "interrupt" {
		t.Fatalf("acme's first run: %d %v", st, types(evs))
	}
	open := oc["interrupts"].([]any)[0].(map[string]any)["id"].(string)
	resume := map[string]any{"interruptId": open, "status": "resolved", "payload": "42"}

	// A run without resume while interrupts are open.
	_, evs = e.post(t, "acme", input("shared", "acme-2", "Anything new?"))
	if fin := last(evs); fin["type"] != "RUN_ERROR" || fin["code"] != agui.CodeInterruptsPending || !strings.Contains(fin["message"].(string), open) {
		t.Fatalf("a run on a thread with open interrupts: %v", evs)
	}

	// globex, on acme's thread and on an unknown one: the same answers.
	_, theirs := e.post(t, "globex", input("shared", "globex-1", "", resume))
	_, unknown := e.post(t, "globex", input("nowhere", "globex-2", "", resume))
	if fin := last(theirs); fin["type"] != "RUN_ERROR" || fin["code"] != agui.CodeInterruptNotOpen ||
		fin["message"] != strings.ReplaceAll(last(unknown)["message"].(string), "nowhere", "shared") || len(theirs) != len(unknown) {
		t.Fatalf("globex resumes acme's thread: %v; an unknown thread: %v", theirs, unknown)
	}
	before := stateOf(t, e, "acme", "shared", "acme")["seq"]
	_, own := e.post(t, "globex", input("shared", "globex-3", "Weather in Paris?"))
	if fin := last(own); fin["type"] != "RUN_FINISHED" || fin["result"] != "It is sunny in Paris today, with a light breeze from the west." {
		t.Fatalf("globex's run on a thread id acme uses: %v", types(own))
	}
	if after := stateOf(t, e, "acme", "shared", "acme"); after["seq"] != before || after["status"] != "SESSION_STATUS_AWAITING_HUMAN" {
		t.Fatalf("acme's session changed under globex's run: seq %v → %v, %v", before, after["seq"], after["status"])
	}

	// acme answers: the run goes on to the approval.
	_, evs = e.post(t, "acme", input("shared", "acme-3", "", resume))
	if oc, _ := last(evs)["outcome"].(map[string]any); oc["type"] != "interrupt" || oc["interrupts"].([]any)[0].(map[string]any)["reason"] != "tool_call" {
		t.Fatalf("acme's resume: %v", evs)
	}
}

// TestAGUIRejectAndCancel: an approval resumed with approved false rejects the call (it
// never runs; the model reads the message as its result); a run that ended with an
// interrupt, posted again after it was answered, is replayed to that interrupt; a
// question resumed as cancelled cancels the session: the run ends with the cancelled
// outcome.
func TestAGUIRejectAndCancel(t *testing.T) {
	e := start(t)
	_, evs := e.post(t, "acme", input("t", "1", "Refund order 42"))
	ask := last(evs)["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
	_, evs = e.post(t, "acme", input("t", "2", "", map[string]any{"interruptId": ask["id"], "status": "resolved", "payload": "42"}))
	approval := last(evs)["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
	_, evs = e.post(t, "acme", input("t", "3", "", map[string]any{"interruptId": approval["id"], "status": "resolved",
		"payload": map[string]any{"approved": false, "message": "not today"}}))
	var rejected bool
	for _, ev := range evs {
		if ev["type"] == "TOOL_CALL_RESULT" && ev["toolCallId"] == approval["toolCallId"] && strings.Contains(ev["content"].(string), "not today") {
			rejected = true
		}
	}
	again, _ := last(evs)["outcome"].(map[string]any)
	if !rejected || e.refunds.Load() != 0 || again["type"] != "interrupt" {
		t.Fatalf("a rejected approval (%d refunds): %v", e.refunds.Load(), evs)
	}
	asked := again["interrupts"].([]any)[0].(map[string]any)

	// The question's run posted again after it was answered: the same run, from the
	// journal, ending with the same interrupt.
	_, replay := e.post(t, "acme", input("t", "1", "Refund order 42"))
	if oc, _ := last(replay)["outcome"].(map[string]any); oc["type"] != "interrupt" ||
		oc["interrupts"].([]any)[0].(map[string]any)["id"] != ask["id"] || len(oc["interrupts"].([]any)) != 1 {
		t.Fatalf("the first run replayed: %v", replay)
	}

	_, evs = e.post(t, "acme", input("t", "4", "", map[string]any{"interruptId": asked["id"], "status": "cancelled"}))
	if fin := last(evs); fin["type"] != "RUN_FINISHED" || fin["outcome"].(map[string]any)["type"] != "cancelled" {
		t.Fatalf("a cancelled question: %v", evs)
	}
	if st := stateOf(t, e, "acme", "t", "acme"); st["status"] != "SESSION_STATUS_CANCELLED" {
		t.Fatalf("the session after a cancelled question: %v", st)
	}
}

// sse reads a run's stream posted with Last-Event-ID lastID (none when empty) until
// stop says so after an event (nil: to its end), and returns the events and their ids.
func (e *env) sse(t *testing.T, body, lastID string, stop func(n int, ev map[string]any) bool) ([]map[string]any, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer acme")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var evs []map[string]any
	var ids []string
	id := ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id = v
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			evs, ids = append(evs, m), append(ids, id)
			if stop != nil && stop(len(evs), m) {
				return evs, ids
			}
		}
	}
	return evs, ids
}

// TestAGUIResumeWithLastEventID: a client whose stream broke (before any text, between
// the deltas of an answer while it streams) posts the run again with the last event id
// it had as Last-Event-ID: it gets every event it lacks exactly once, so what it has is
// the whole run: the same events as the run replayed from the journal, each message's
// text whole. A Last-Event-ID that is no event id of a run is 400.
func TestAGUIResumeWithLastEventID(t *testing.T) {
	e := start(t)
	req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(input("t", "r", "hello")))
	req.Header.Set("Authorization", "Bearer acme")
	req.Header.Set("Last-Event-ID", "seven")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a Last-Event-ID that is no event id: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	contents := 0
	cuts := map[string]func(int, map[string]any) bool{
		"after RUN_STARTED": func(n int, _ map[string]any) bool { return n == 1 },
		"after a tool call": func(_ int, ev map[string]any) bool { return ev["type"] == "TOOL_CALL_END" },
		"in a streaming text": func(_ int, ev map[string]any) bool {
			contents += count([]map[string]any{ev}, "TEXT_MESSAGE_CONTENT")
			return contents == 3
		},
	}
	for name, stop := range cuts {
		t.Run(name, func(t *testing.T) {
			body := input("resume-"+strings.ReplaceAll(name, " ", "-"), "r1", "Weather in Paris?")
			head, ids := e.sse(t, body, "", stop)
			tail, _ := e.sse(t, body, ids[len(ids)-1], nil)
			got := append(head, tail...)
			whole, _ := e.sse(t, body, "", nil) // the run replayed, from the journal
			if last(got)["type"] != "RUN_FINISHED" || last(whole)["type"] != "RUN_FINISHED" {
				t.Fatalf("resumed: %v; replayed: %v", types(got), types(whole))
			}
			if a, b := withoutContent(got), withoutContent(whole); !equalJSON(a, b) {
				t.Fatalf("the resumed stream's events\n%v\nare not the run's\n%v", a, b)
			}
			if a, b := texts(got), texts(whole); !equalJSON(a, b) || len(a) == 0 {
				t.Fatalf("the resumed stream's texts %v, the run's %v", a, b)
			}
		})
	}
}

func withoutContent(evs []map[string]any) []map[string]any {
	var out []map[string]any
	for _, ev := range evs {
		if ev["type"] != "TEXT_MESSAGE_CONTENT" {
			out = append(out, ev)
		}
	}
	return out
}

// texts is each message's text, its TEXT_MESSAGE_CONTENT deltas joined.
func texts(evs []map[string]any) map[string]string {
	out := map[string]string{}
	for _, ev := range evs {
		if ev["type"] == "TEXT_MESSAGE_CONTENT" {
			out[ev["messageId"].(string)] += ev["delta"].(string)
		}
	}
	return out
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestAGUILaggingStream: a run whose reader lags behind a fast answer (the feed keeps
// one delta per subscriber and drops older ones) still gets each message's text whole
// and in order: the stream stops at the first lost delta and the answer brings the rest.
func TestAGUILaggingStream(t *testing.T) {
	words := strings.Repeat("rain falls on the journal and every drop is kept ", 60)
	sc := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"w","type":"custom","description":"Write"}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", Response: words},
	}}
	e := startWith(t, &sc, func(c *gateway.Config) { c.DeltaBuffer = 1 })
	for i := 0; i < 3; i++ {
		_, evs := e.post(t, "acme", input(fmt.Sprintf("lag-%d", i), "r", "Write"))
		if fin := last(evs); fin["type"] != "RUN_FINISHED" || fin["result"] != words {
			t.Fatalf("run %d ends with %v", i, fin)
		}
		for id, text := range texts(evs) {
			if text != words {
				t.Fatalf("run %d: message %s's text is %d bytes, not the answer's %d: %q", i, id, len(text), len(words), text)
			}
		}
	}
}

// TestAGUIShutdownEndsRuns: a run still streaming when the gateway shuts down ends (the
// session goes on), so Shutdown does not wait for it to its deadline; a run posted then
// is 503.
func TestAGUIShutdownEndsRuns(t *testing.T) {
	sc := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"w","type":"custom","description":"Write"}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", Response: "slow", DelayMS: 30000},
	}}
	e := startWith(t, &sc, nil)
	req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(input("slow", "r", "Write")))
	req.Header.Set("Authorization", "Bearer acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ended := make(chan []string, 1)
	started := make(chan struct{})
	go func() { // reads the stream: the lines' event types, until it ends
		var seen []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"type":"STEP_STARTED"`) {
				close(started)
			}
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev map[string]any
				_ = json.Unmarshal([]byte(data), &ev)
				typ, _ := ev["type"].(string)
				seen = append(seen, typ)
			}
		}
		ended <- seen
	}()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the run never started its step")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.h.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a run streaming: %v", err)
	}
	select {
	case seen := <-ended:
		if slices.Contains(seen, "RUN_FINISHED") {
			t.Fatalf("the run finished: %v", seen)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run's stream kept going after Shutdown")
	}
	if st, out := e.post(t, "acme", input("late", "r", "Write")); st != http.StatusServiceUnavailable {
		t.Fatalf("a run posted after Shutdown: %d %v", st, out)
	}
}
