package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/journaltest"
)

// indexedJournal is what the node's embedded journal is: a journal with the session
// index, deletes and counts.
type indexedJournal interface {
	persistence.Journal
	persistence.SessionIndex
}

// crashOnce wraps the node's journal in a journaltest.Faulty kept in *cj: armed with
// cj.PanicNextAppend, the next append panics, so the session grain crashes mid-command
// and its supervisor restarts it (a forced restart for the restarts feeds).
func crashOnce(cj **journaltest.Faulty) func(persistence.Journal) persistence.Journal {
	return func(j persistence.Journal) persistence.Journal {
		*cj = journaltest.NewFaulty(j.(persistence.SessionStore))
		return *cj
	}
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
	var cj *journaltest.Faulty
	g := startGW(t, gwOpts{script: humanScript(t), delayMS: 150, journal: crashOnce(&cj)})

	// 1,000 ended sessions in the index, so the list page loads from a full index.
	seedSessions(t, cj, 1000)

	// A forced restart: the grain of crash-1 panics in its first append.
	cj.PanicNextAppend()
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
	t.Parallel()
	g := startFake(t, gwOpts{})
	for path, want := range map[string]string{"/console/": "<title>Fathom console</title>", "/console/console.js": "class Socket", "/console/console.css": ":root", "/console/chroma.css": ".chroma"} {
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

// TestConsoleTranscript drives the session page's transcript in headless Chromium
// (scripts/console-transcript-e2e.mjs): a completed session's final result at the top
// with its markdown rendered (heading, highlighted code) and an injected script and
// javascript: link inert; a tool call's arguments and result readable, with "show all"
// fetching arguments over the cut; and a slowly streamed answer growing on the page
// before its llm_responded is recorded.
func TestConsoleTranscript(t *testing.T) {
	playwright, chromium := testenv.ConsoleBrowser(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node not found: %v", err)
	}
	report := "# Findings report\n\nThe notes are saved. <script>window.__pwned = 1</script>\n\n" +
		"[click me](javascript:window.__pwned=2)\n\n```go\nfunc main() { fmt.Println(\"hi\") }\n```\n"
	notes := strings.Repeat("Notes on actors and journals. ", 200) + "END-OF-NOTES"
	story := "Once upon a time" + strings.Repeat(" a grain kept its journal and replayed it", 8) + " and they lived happily ever after."
	plan := func(id string) string { return `{"steps":[{"id":"` + id + `","type":"custom","description":"do it"}]}` }
	sc := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", ContextMatch: "findings report", Response: plan("write")},
		{SystemMatch: "FATHOM-ROLE: executor", ContextMatch: "findings report", ToolMatch: ".", Response: report},
		{SystemMatch: "FATHOM-ROLE: executor", ContextMatch: "findings report", ToolCalls: []mock.ToolCallRule{{Name: "write_artifact",
			Arguments: `{"type":"research","filename":"notes.md","content":"` + notes + `"}`}}},
		{SystemMatch: "FATHOM-ROLE: orchestrator", ContextMatch: "slow story", Response: plan("tell")},
		{SystemMatch: "FATHOM-ROLE: executor", ContextMatch: "slow story", Response: story, ChunkDelayMS: 100},
	}}
	g := startGW(t, gwOpts{script: &sc})
	if code, body := call(t, g.srv, "POST", "/v1/sessions", token, []byte(`{"goal":"Write a findings report","session_id":"tr-md"}`)); code != 201 {
		t.Fatalf("start: %d %v", code, body)
	}
	awaitCompleted(t, g, "tr-md")
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "console-transcript-e2e.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "CONSOLE_URL="+g.srv.URL+"/console/", "WRITE_TOKEN="+token, "MD_SESSION=tr-md",
		"STREAM_SESSION=tr-stream", "STORY="+story, "PLAYWRIGHT_DIR="+playwright, "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("console-transcript-e2e:\n%s", out)
	if err != nil {
		t.Fatalf("the console's transcript run failed: %v", err)
	}
}
