package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// indexedJournal is what the node's embedded journal is: a journal with the session
// index, deletes and counts.
type indexedJournal interface {
	persistence.Journal
	persistence.SessionIndex
}

// crashOnce panics in the first indexed append after it is armed: the session grain
// crashes mid-command and its supervisor restarts it (a forced restart for the console's
// restarts feed). The index stays visible, unlike crashingJournal's.
type crashOnce struct {
	indexedJournal
	armed atomic.Bool
}

func (c *crashOnce) AppendIndexed(ctx context.Context, stream string, expected uint64, recs []persistence.Record, e persistence.IndexEntry) (uint64, error) {
	if c.armed.CompareAndSwap(true, false) {
		panic("injected journal panic")
	}
	return c.indexedJournal.AppendIndexed(ctx, stream, expected, recs, e)
}

// humanScript plans, for goals about copies, a human_input step (an object {n: integer
// >= 1}) and a custom step; other goals get the demo model's delegated plan (sub-agents
// with hand-offs).
func humanScript(t *testing.T) *mock.Script {
	t.Helper()
	s, err := mock.ParseScript([]byte(`{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","context_match":"copies of a haiku","response":"{\"steps\":[{\"id\":\"ask\",\"type\":\"human_input\",\"description\":\"How many copies?\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":1}},\"required\":[\"n\"]}},{\"id\":\"use\",\"type\":\"custom\",\"description\":\"print them\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","context_match":"copies of a haiku","response":"printed the copies"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	demo := mock.DemoScript()
	s.Rules, s.Default = append(s.Rules, demo.Rules...), demo.Default
	return &s
}

// TestConsoleEndToEnd drives the web console at /console/ in headless Chromium
// (scripts/console-e2e.mjs, playwright-core): it starts a session from the console,
// answers its human-input request in place, watches it complete, moves the time-travel
// slider, filters the sessions list, sees a forced grain restart in the cluster page's
// restarts feed, and checks that a read token gets a read-only console. With
// FATHOM_CONSOLE_SCREENSHOTS=DIR it leaves its screenshots there (docs/ holds them).
func TestConsoleEndToEnd(t *testing.T) {
	playwright, chromium := testenv.ConsoleBrowser(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node not found: %v", err)
	}
	cj := &crashOnce{}
	g := startGW(t, gwOpts{script: humanScript(t), delayMS: 150, journal: func(j persistence.Journal) persistence.Journal {
		cj.indexedJournal = j.(indexedJournal)
		return cj
	}})

	// 1,000 ended sessions in the index, so the list page loads from a full index.
	seedSessions(t, cj.indexedJournal, 1000)

	// A forced restart: the grain of crash-1 panics in its first append.
	cj.armed.Store(true)
	_, _ = call(t, g.srv, "POST", "/v1/sessions", token, []byte(`{"goal":"crash me","session_id":"crash-1"}`))
	testenv.Eventually(t, 30*time.Second, func() bool {
		req, _ := http.NewRequest("GET", g.srv.URL+"/v1/restarts", nil)
		req.Header.Set("Authorization", "Bearer "+token) // the restarts feed is an admin's
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return bytes.Contains(b, []byte(`"session_id":"crash-1"`))
	}, "the forced restart of crash-1 is not in /v1/restarts")

	shots := os.Getenv("FATHOM_CONSOLE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "console-e2e.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "CONSOLE_URL="+g.srv.URL+"/console/", "WRITE_TOKEN="+token, "READ_TOKEN="+readToken,
		"PLAYWRIGHT_DIR="+playwright, "CHROMIUM="+chromium, "SCREENSHOTS="+shots, "SESSION_ID=console-1",
		"ANSWER={\"n\": 2}", "RESTART_SESSION=crash-1")
	out, err := cmd.CombinedOutput()
	t.Logf("console-e2e:\n%s", out)
	if err != nil {
		t.Fatalf("the console's end-to-end run failed: %v", err)
	}
	// What the browser did is in the journal: the answer and the completion.
	var types []string
	for _, ev := range g.journal("console-1") {
		types = append(types, ev["type"].(string))
	}
	joined := strings.Join(types, " ")
	if !strings.Contains(joined, "hitl_received") || !strings.HasSuffix(joined, "session_completed") {
		t.Fatalf("console-1's events: %s", joined)
	}
	for _, name := range []string{"console-session.png", "console-sessions.png", "console-cluster.png"} {
		if fi, err := os.Stat(filepath.Join(shots, name)); err != nil || fi.Size() == 0 {
			t.Errorf("screenshot %s: %v", name, err)
		}
	}
}

// seedSessions stores n completed sessions (session_started, session_completed) with
// their index rows.
func seedSessions(t testing.TB, j indexedJournal, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("seed-%04d", i)
		var recs []persistence.Record
		for seq, ev := range []*messages.Event{
			{Payload: &messages.Event_SessionStarted{SessionStarted: &messages.SessionStarted{Goal: fmt.Sprintf("Seeded goal number %d", i), UserId: "seed"}}},
			{Payload: &messages.Event_SessionCompleted{SessionCompleted: &messages.SessionCompleted{Result: "done"}}},
		} {
			ev.Seq, ev.SessionId, ev.AtUnixNano = uint64(seq+1), id, time.Now().UnixNano()
			data, err := messages.EncodeEvent(ev)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, persistence.Record{Type: ev.Type(), Data: data, At: ev.At()})
		}
		if _, err := j.AppendIndexed(ctx, id, 0, recs, persistence.IndexEntry{SessionID: id, Status: persistence.StatusCompleted}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConsoleIsServed: /console/ serves the embedded page with a strict CSP and no
// token; the API it calls still needs one.
func TestConsoleIsServed(t *testing.T) {
	g := startGW(t, gwOpts{})
	for path, want := range map[string]string{"/console/": "<title>Fathom console</title>", "/console/console.js": "class Socket", "/console/console.css": ":root", "/console/timeline.js": "FathomTimeline", "/console/timeline.css": ".plan-graph"} {
		resp, err := http.Get(g.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Fatalf("GET %s = %d %q (CSP %q)", path, resp.StatusCode, b[:min(len(b), 80)], resp.Header.Get("Content-Security-Policy"))
		}
	}
	if status, out := call(t, g.srv, "GET", "/v1/whoami", readToken, nil); status != 200 || out["scope"] != "read" {
		t.Fatalf("whoami with the read token = %d %v", status, out)
	}
	if status, out := call(t, g.srv, "GET", "/v1/whoami", token, nil); status != 200 || out["scope"] != "admin" || out["tenant"] != "default" {
		t.Fatalf("whoami with the write token = %d %v", status, out)
	}
	if status, _ := call(t, g.srv, "GET", "/v1/whoami", "", nil); status != 401 {
		t.Fatalf("whoami without a token = %d", status)
	}
	if status, out := call(t, g.srv, "GET", "/v1/cluster", readToken, nil); status != 403 || out["error"].(map[string]any)["code"] != "permission_denied" {
		t.Fatalf("cluster with the read token (a viewer; the cluster view is an admin's) = %d %v", status, out)
	}
	status, out := call(t, g.srv, "GET", "/v1/cluster", token, nil)
	if status != 200 || out["node"] == "" || len(out["members"].([]any)) != 1 {
		t.Fatalf("cluster = %d %v", status, out)
	}
}

// TestConsoleApproval: a call waiting for approval shows in the console as an approval
// card (scripts/console-approval-e2e.mjs in headless Chromium) whose edited arguments the
// call then runs with, once.
func TestConsoleApproval(t *testing.T) {
	playwright, chromium := testenv.ConsoleBrowser(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node not found: %v", err)
	}
	sc, err := mock.ParseScript([]byte(`{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s\",\"type\":\"custom\",\"description\":\"save the notes\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","tool_match":".","response":"saved: {{.Tool}}"},
		{"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"write_artifact","arguments":"{\"type\":\"research\",\"filename\":\"notes.md\",\"content\":\"draft\"}"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	g := startGW(t, gwOpts{script: &sc, session: func(c *session.Config) { c.ApprovalTools = []string{"write_artifact"} }})
	if code, body := call(t, g.srv, "POST", "/v1/sessions", token, []byte(`{"goal":"save notes","session_id":"approve-1"}`)); code != 201 {
		t.Fatalf("start: %d %v", code, body)
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "console-approval-e2e.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "CONSOLE_URL="+g.srv.URL+"/console/", "WRITE_TOKEN="+token, "SESSION_ID=approve-1",
		"EDITED_FILENAME=approved.md", "PLAYWRIGHT_DIR="+playwright, "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("console-approval-e2e:\n%s", out)
	if err != nil {
		t.Fatalf("the console's approval run failed: %v", err)
	}
	var decision, filenames []string
	for _, ev := range g.journal("approve-1") {
		switch ev["type"] {
		case "hitl_received":
			decision = append(decision, fmt.Sprint(ev["decision"]))
		case "artifact_written":
			filenames = append(filenames, fmt.Sprint(ev["filename"]))
		}
	}
	if strings.Join(decision, ",") != "edit" || strings.Join(filenames, ",") != "approved.md" {
		t.Fatalf("decisions %v, artifacts written %v: want one edit and approved.md written once", decision, filenames)
	}
}

// TestConsoleControls drives the session page's controls in headless Chromium
// (scripts/console-controls-e2e.mjs): pause then resume, a breakpoint before a step type
// then resume, a fork at the slider's step 1 (stopped by the breakpoint it inherits,
// cleared and resumed), and cancel; the journal shows each.
func TestConsoleControls(t *testing.T) {
	playwright, chromium := testenv.ConsoleBrowser(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node not found: %v", err)
	}
	g := startGW(t, gwOpts{script: humanScript(t)})
	for _, id := range []string{"ctl-pause", "ctl-break", "ctl-cancel"} {
		if code, body := call(t, g.srv, "POST", "/v1/sessions", token, []byte(`{"goal":"Print copies of a haiku","session_id":"`+id+`"}`)); code != 201 {
			t.Fatalf("start %s: %d %v", id, code, body)
		}
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "console-controls-e2e.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "CONSOLE_URL="+g.srv.URL+"/console/", "WRITE_TOKEN="+token, "PLAYWRIGHT_DIR="+playwright,
		"CHROMIUM="+chromium, "PAUSE_SESSION=ctl-pause", "BREAK_SESSION=ctl-break", "CANCEL_SESSION=ctl-cancel", "FORK_ID=ctl-fork")
	out, err := cmd.CombinedOutput()
	t.Logf("console-controls-e2e:\n%s", out)
	types := func(id string) string {
		var ts []string
		for _, ev := range g.journal(id) {
			ts = append(ts, ev["type"].(string))
		}
		return strings.Join(ts, " ")
	}
	if err != nil {
		t.Fatalf("the console's controls run failed: %v\nctl-break's events: %s", err, types("ctl-break"))
	}
	for _, id := range []string{"ctl-pause", "ctl-break"} {
		if ts := types(id); !strings.Contains(ts, "breakpoint_set") || !strings.Contains(ts, "interrupt_triggered") ||
			!strings.Contains(ts, "interrupt_resumed") || !strings.HasSuffix(ts, "session_completed") {
			t.Errorf("%s's events: %s", id, ts)
		}
	}
	fork := g.journal("ctl-fork")
	var forked map[string]any
	for _, ev := range fork {
		if ev["type"] == "session_forked" {
			forked = ev
		}
	}
	if forked == nil || forked["source_session_id"] != "ctl-break" || !strings.Contains(types("ctl-fork"), "breakpoints_cleared") ||
		fork[len(fork)-1]["type"] != "session_completed" {
		t.Errorf("ctl-fork: forked %v, events %s", forked, types("ctl-fork"))
	}
	evs := g.journal("ctl-cancel")
	if last := evs[len(evs)-1]; last["type"] != "session_cancelled" || last["by"] != "console" {
		t.Errorf("ctl-cancel's last event: %v", last)
	}
}

// TestConsoleTimeline drives the session page's timeline, plan graph, time travel and
// comparison in headless Chromium (scripts/console-timeline-e2e.mjs) on a completed
// demo session (four steps run by sub-agents, each with a hand-off), handing the script
// what the journal holds: each step's duration, the plan's dependencies, the seq of
// each hand-off and artifact. The page must draw a bar per step with that duration, a
// graph node per step and an edge per dependency, show at a past seq (by the step
// slider and by seq) no hand-off, artifact or bar recorded later, and list a step whose
// status changed between two points. Two more sessions: one that waited for a human
// (its wait is a shaded bar as long as the journal's), and a stored one whose step was
// retried and whose plan was revised (the retry is marked, the graph has a version per
// plan).
func TestConsoleTimeline(t *testing.T) {
	playwright, chromium := testenv.ConsoleBrowser(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node not found: %v", err)
	}
	sc := humanScript(t)
	reuse, err := mock.ParseScript([]byte(`{"rules":[{"system_match":"FATHOM-ROLE: orchestrator","context_match":"twice about tides","response":` +
		`"{\"steps\":[{\"id\":\"r1\",\"type\":\"research\",\"description\":\"tides\"},` +
		`{\"id\":\"r2\",\"type\":\"research\",\"description\":\"more tides\",\"dependencies\":[\"r1\"],\"sub_agent_id\":\"researcher-1\"}]}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	sc.Rules = append(reuse.Rules, sc.Rules...)
	g := startGW(t, gwOpts{delayMS: 20, script: sc})
	for _, s := range []string{`{"goal":"Write a haiku about time","session_id":"tl-1"}`, `{"goal":"Print copies of a haiku","session_id":"tl-wait"}`,
		`{"goal":"Research twice about tides","session_id":"tl-reuse"}`} {
		if code, body := call(t, g.srv, "POST", "/v1/sessions", token, []byte(s)); code != 201 {
			t.Fatalf("start: %d %v", code, body)
		}
	}
	seedReplanned(t, g.n.Journal().(indexedJournal), "tl-replan")
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, _ := call(t, g.srv, "POST", "/v1/sessions/tl-wait/input", token, []byte(`{"step_id":"ask","input":{"n":2}}`))
		return code == 200
	}, "tl-wait never took its answer")
	for _, id := range []string{"tl-1", "tl-wait", "tl-reuse"} {
		testenv.Eventually(t, 60*time.Second, func() bool {
			evs := g.journal(id)
			return len(evs) > 0 && evs[len(evs)-1]["type"] == "session_completed"
		}, "%s never completed", id)
	}
	var reuseAt uint64 // the end of r1, run by researcher-1, who then runs r2
	reused := map[string]uint64{}
	for _, ev := range g.journal("tl-reuse") {
		switch {
		case ev["type"] == "subagent_completed":
			reused[ev["step_id"].(string)] = uint64(ev["seq"].(float64))
			if ev["sub_agent_id"] != "researcher-1" {
				t.Fatalf("tl-reuse: %v", ev)
			}
		case ev["type"] == "step_completed" && ev["step_id"] == "r1":
			reuseAt = uint64(ev["seq"].(float64))
		}
	}
	if len(reused) != 2 || reuseAt == 0 {
		t.Fatalf("tl-reuse's hand-offs %v, r1's end %d", reused, reuseAt)
	}
	var asked, answered time.Time
	for _, ev := range g.journal("tl-wait") {
		at, _ := time.Parse(time.RFC3339Nano, ev["at"].(string))
		switch ev["type"] {
		case "hitl_requested":
			asked = at
		case "hitl_received":
			answered = at
		}
	}

	type stepDur struct {
		ID string  `json:"id"`
		MS float64 `json:"ms"`
	}
	var (
		steps                   []stepDur
		edges                   []string
		started                 = map[string]time.Time{}
		handoffs, artifacts     = map[string]uint64{}, map[string]uint64{}
		atSeq, planSeq, lastSeq uint64
	)
	for _, ev := range g.journal("tl-1") {
		seq := uint64(ev["seq"].(float64))
		at, err := time.Parse(time.RFC3339Nano, ev["at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		lastSeq = seq
		switch ev["type"] {
		case "plan_created":
			planSeq = seq
			for _, s := range ev["steps"].([]any) {
				s := s.(map[string]any)
				deps, _ := s["dependencies"].([]any)
				for _, d := range deps {
					edges = append(edges, fmt.Sprint(d)+">"+fmt.Sprint(s["id"]))
				}
			}
		case "step_started":
			started[ev["step_id"].(string)] = at
		case "step_completed":
			id := ev["step_id"].(string)
			steps = append(steps, stepDur{ID: id, MS: float64(at.Sub(started[id]).Nanoseconds()) / 1e6})
			if atSeq == 0 {
				atSeq = seq
			}
		case "subagent_completed":
			handoffs[ev["step_id"].(string)] = seq
		case "artifact_written":
			artifacts[ev["path"].(string)] = seq
		}
	}
	if len(steps) != 4 || len(edges) != 4 || len(handoffs) != 4 || atSeq == 0 || atSeq >= handoffs["s4"] {
		t.Fatalf("the demo run: steps %v, edges %v, hand-offs %v, first step's end %d", steps, edges, handoffs, atSeq)
	}
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	shots := os.Getenv("FATHOM_CONSOLE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "console-timeline-e2e.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "CONSOLE_URL="+g.srv.URL+"/console/", "READ_TOKEN="+readToken, "SESSION_ID=tl-1",
		"PLAYWRIGHT_DIR="+playwright, "CHROMIUM="+chromium, "SCREENSHOTS="+shots,
		"STEPS="+js(steps), "EDGES="+js(edges), "HANDOFFS="+js(handoffs), "ARTIFACTS="+js(artifacts),
		fmt.Sprintf("AT_SEQ=%d", atSeq), fmt.Sprintf("PLAN_SEQ=%d", planSeq), fmt.Sprintf("LAST_SEQ=%d", lastSeq),
		"REUSE_SESSION=tl-reuse", "REUSE_HANDOFFS="+js(reused), fmt.Sprintf("REUSE_AT=%d", reuseAt),
		"WAIT_SESSION=tl-wait", fmt.Sprintf("WAIT_MS=%f", float64(answered.Sub(asked).Nanoseconds())/1e6), "REPLAN_SESSION=tl-replan")
	out, err := cmd.CombinedOutput()
	t.Logf("console-timeline-e2e:\n%s", out)
	if err != nil {
		t.Fatalf("the console's timeline run failed: %v", err)
	}
}

// seedReplanned stores a completed session id whose first plan call failed retryably,
// whose step f failed once retryably and then for good, and whose plan (a; f after a;
// p after f) was revised into (a; n after a), 100 ms between events.
func seedReplanned(t *testing.T, j indexedJournal, id string) {
	t.Helper()
	step := func(id string, deps ...string) *messages.PlanStep {
		return &messages.PlanStep{Id: id, Type: "custom", Description: "do " + id, Dependencies: deps}
	}
	evs := []*messages.Event{
		{Payload: &messages.Event_SessionStarted{SessionStarted: &messages.SessionStarted{Goal: "a plan that changes", UserId: "seed"}}},
		{Payload: &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{CallId: "plan-1", Purpose: "plan"}}},
		{Payload: &messages.Event_PlanFailed{PlanFailed: &messages.PlanFailed{CallId: "plan-1", Error: "503", Retryable: true, RetryAtUnixNano: 1, Attempt: 1}}},
		{Payload: &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{CallId: "plan-2", Purpose: "plan"}}},
		{Payload: &messages.Event_LlmResponded{LlmResponded: &messages.LlmResponded{CallId: "plan-2", CostUsd: 0.01, Usage: &messages.Usage{InputTokens: 80, OutputTokens: 20, TotalTokens: 100}}}},
		{Payload: &messages.Event_PlanCreated{PlanCreated: &messages.PlanCreated{PlanId: "plan-1", Steps: []*messages.PlanStep{step("a"), step("f", "a"), step("p", "f")}}}},
		{Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "a", StepIndex: 0, StepType: "custom", Attempt: 1}}},
		{Payload: &messages.Event_StepCompleted{StepCompleted: &messages.StepCompleted{StepId: "a", StepIndex: 0, Output: "ok"}}},
		{Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "f", StepIndex: 1, StepType: "custom", Attempt: 1}}},
		{Payload: &messages.Event_StepFailed{StepFailed: &messages.StepFailed{StepId: "f", StepIndex: 1, Error: "boom", Retryable: true, RetryAtUnixNano: 1, Attempt: 1}}},
		{Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "f", StepIndex: 1, StepType: "custom", Attempt: 2}}},
		{Payload: &messages.Event_StepFailed{StepFailed: &messages.StepFailed{StepId: "f", StepIndex: 1, Error: "boom again", Attempt: 2}}},
		{Payload: &messages.Event_PlanRevised{PlanRevised: &messages.PlanRevised{PlanId: "plan-2", Revision: 1, Reason: "boom again", FailedStepId: "f",
			ReplacedStepIds: []string{"f", "p"}, Steps: []*messages.PlanStep{step("n", "a")}}}},
		{Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "n", StepIndex: 1, StepType: "custom", Attempt: 1}}},
		{Payload: &messages.Event_StepCompleted{StepCompleted: &messages.StepCompleted{StepId: "n", StepIndex: 1, Output: "done"}}},
		{Payload: &messages.Event_SessionCompleted{SessionCompleted: &messages.SessionCompleted{Result: "done"}}},
	}
	start := time.Now().Add(-time.Minute)
	var recs []persistence.Record
	for i, ev := range evs {
		ev.Seq, ev.SessionId, ev.AtUnixNano = uint64(i+1), id, start.Add(time.Duration(i)*100*time.Millisecond).UnixNano()
		data, err := messages.EncodeEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, persistence.Record{Type: ev.Type(), Data: data, At: ev.At()})
	}
	if _, err := j.AppendIndexed(context.Background(), id, 0, recs, persistence.IndexEntry{SessionID: id, Status: persistence.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
}
