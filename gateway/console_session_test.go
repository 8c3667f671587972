package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// consoleSession runs part of scripts/console-session-e2e.mjs (headless Chromium) against
// the console served at base, with env added to the script's.
func consoleSession(t *testing.T, base, part string, env ...string) {
	t.Helper()
	playwright, chromium := testenv.ConsoleBrowser(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node not found: %v", err)
	}
	shots := os.Getenv("FATHOM_CONSOLE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "console-session-e2e.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), append([]string{"CONSOLE_URL=" + base + "/console/", "WRITE_TOKEN=" + token, "PART=" + part,
		"PLAYWRIGHT_DIR=" + playwright, "CHROMIUM=" + chromium, "SCREENSHOTS=" + shots}, env...)...)
	out, err := cmd.CombinedOutput()
	t.Logf("console-session-e2e %s:\n%s", part, out)
	if err != nil {
		t.Fatalf("the console's %s run failed: %v", part, err)
	}
}

func startSession(t *testing.T, g *gw, id, goal string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"goal": goal, "session_id": id})
	if code, out := call(t, g.srv, "POST", "/v1/sessions", token, body); code != 201 {
		t.Fatalf("start %s: %d %v", id, code, out)
	}
}

// TestConsoleDeepLinkSubscribesOnce: a session page opened by a deep link, and opened
// again by re-entering the token, subscribes once per connection: no "already
// subscribed" error reaches the page (the WebSocket opens late, after the transcript
// has painted, as on a slow network), and the subscription delivers the session's live
// events (the answer given on the page completes the session on the page).
func TestConsoleDeepLinkSubscribesOnce(t *testing.T) {
	testenv.ConsoleBrowser(t)
	g := startGW(t, gwOpts{script: humanScript(t)})
	startSession(t, g, "deep-1", "Print copies of a haiku")
	// The WebSocket's upgrade answers 1.5 s late: the page asks to subscribe before the
	// connection is open.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/ws" {
			time.Sleep(1500 * time.Millisecond)
		}
		g.srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	consoleSession(t, slow.URL, "deeplink", "SESSION_ID=deep-1")
}

// TestConsoleControlsByState: the session page enables pause, resume, breakpoints and
// cancel only where they apply (waiting for a human: pause, cancel, set a breakpoint;
// with a pause pending: no second pause; stopped: resume; ended: none), and a waiting
// human request and a stopped session's interrupt show their deadline and default
// action with a countdown that runs.
func TestConsoleControlsByState(t *testing.T) {
	testenv.ConsoleBrowser(t)
	g := startGW(t, gwOpts{script: humanScript(t)})
	startSession(t, g, "cs-wait", "Print copies of a haiku")
	startSession(t, g, "cs-break", "Print copies of a haiku")
	startSession(t, g, "cs-done", "Write a haiku about state")
	// cs-break stops before its custom step and fails unless resumed within 10 minutes.
	if code, out := call(t, g.srv, "POST", "/v1/sessions/cs-break/breakpoints", token,
		[]byte(`{"position":"before","step_type":"custom","timeout_ms":600000,"default_action":"fail"}`)); code != 200 {
		t.Fatalf("set a breakpoint: %d %v", code, out)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, _ := call(t, g.srv, "POST", "/v1/sessions/cs-break/input", token, []byte(`{"step_id":"ask","input":{"n":2}}`))
		return code == 200
	}, "cs-break never took its answer")
	awaitCompleted(t, g, "cs-done")
	consoleSession(t, g.srv.URL, "controls", "WAIT_SESSION=cs-wait", "BREAK_SESSION=cs-break", "DONE_SESSION=cs-done")
	types := func(id string) string {
		var ts []string
		for _, ev := range g.journal(id) {
			ts = append(ts, ev["type"].(string))
		}
		return strings.Join(ts, " ")
	}
	if ts := types("cs-wait"); !strings.Contains(ts, "interrupt_resumed") || !strings.HasSuffix(ts, "session_completed") {
		t.Errorf("cs-wait's events: %s", ts)
	}
}

// TestConsoleTimeTravelPage: a past point chosen on the timeline (the step slider, the
// seq field) reaches the whole session page: the transcript is the journal's at that
// seq (no entry recorded later), the main plan shows no hand-off recorded later, the
// artifacts list none written later, the header the cost then; transcript entries carry
// id="seq-N" and a click on a timeline bar opens and marks the entry of its seq; "Back
// to now" shows the present again.
func TestConsoleTimeTravelPage(t *testing.T) {
	testenv.ConsoleBrowser(t)
	g := startGW(t, gwOpts{delayMS: 20})
	startSession(t, g, "tt-1", "Write a haiku about time")
	awaitCompleted(t, g, "tt-1")
	handoffs, artifacts := map[string]uint64{}, map[string]uint64{}
	var firstStepEnd, lastSeq uint64
	for _, ev := range g.journal("tt-1") {
		seq := uint64(ev["seq"].(float64))
		lastSeq = seq
		switch ev["type"] {
		case "step_completed":
			if firstStepEnd == 0 {
				firstStepEnd = seq
			}
		case "subagent_completed":
			handoffs[ev["step_id"].(string)] = seq
		case "artifact_written":
			artifacts[ev["path"].(string)] = seq
		}
	}
	if firstStepEnd == 0 || len(handoffs) < 2 || len(artifacts) == 0 {
		t.Fatalf("the demo run: first step's end %d, hand-offs %v, artifacts %v", firstStepEnd, handoffs, artifacts)
	}
	js := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	consoleSession(t, g.srv.URL, "timetravel", "SESSION_ID=tt-1", fmt.Sprintf("AT_SEQ=%d", firstStepEnd), fmt.Sprintf("LAST_SEQ=%d", lastSeq),
		"HANDOFFS="+js(handoffs), "ARTIFACTS="+js(artifacts))
}

// TestConsoleForkWithEdit: from a past point of the session page, one action forks with
// a step edited (its description) and the fork runs the edited step; the fork's page
// says what it was forked from and where, the source lists its forks; and a fork with a
// changed human answer takes that answer.
func TestConsoleForkWithEdit(t *testing.T) {
	testenv.ConsoleBrowser(t)
	sc := humanScript(t)
	plan := `{"steps":[{"id":"s1","type":"custom","description":"write the first line"},` +
		`{"id":"s2","type":"custom","description":"write the second line","dependencies":["s1"]}]}`
	edit := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", ContextMatch: "two lines", Response: plan},
		{SystemMatch: "FATHOM-ROLE: executor", ContextMatch: "SHOUT", Response: "RAN THE EDITED STEP"},
		{SystemMatch: "FATHOM-ROLE: executor", ContextMatch: "two lines", Response: "ran as planned"},
	}}
	sc.Rules = append(edit.Rules, sc.Rules...)
	g := startGW(t, gwOpts{script: sc})
	startSession(t, g, "fk-src", "Write two lines")
	startSession(t, g, "fk-ask", "Print copies of a haiku")
	awaitCompleted(t, g, "fk-src")
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, _ := call(t, g.srv, "POST", "/v1/sessions/fk-ask/input", token, []byte(`{"step_id":"ask","input":{"n":2}}`))
		return code == 200
	}, "fk-ask never took its answer")
	awaitCompleted(t, g, "fk-ask")
	consoleSession(t, g.srv.URL, "fork", "SOURCE=fk-src", "FORK_ID=fk-edited", "ASK_SOURCE=fk-ask", "ASK_FORK=fk-answered",
		"EDITED=SHOUT the second line")
	outputs := func(id string) map[string]string {
		out := map[string]string{}
		for _, ev := range g.journal(id) {
			if ev["type"] == "step_completed" {
				out[ev["step_id"].(string)] = fmt.Sprint(ev["output"])
			}
		}
		return out
	}
	src, fork := outputs("fk-src"), outputs("fk-edited")
	if !strings.Contains(src["s2"], "ran as planned") || !strings.Contains(fork["s2"], "RAN THE EDITED STEP") || fork["s1"] != src["s1"] {
		t.Errorf("the source's steps %v, the fork's %v: want the fork's s2 run as edited, s1 copied", src, fork)
	}
	answers := func(id string) string {
		var out []string
		for _, ev := range g.journal(id) {
			if ev["type"] == "hitl_received" {
				out = append(out, strings.ReplaceAll(fmt.Sprint(ev["input"]), " ", "")) // the answer's JSON text
			}
		}
		return strings.Join(out, " ")
	}
	// The fork copied the source's events through planning, before its answer.
	if src, fork := answers("fk-ask"), answers("fk-answered"); src != `{"n":2}` || fork != `{"n":7}` {
		t.Errorf("the source's answers %s, the fork's %s: want the fork answered anew (n 7)", src, fork)
	}
}

// TestConsoleArtifactPreview: the session page previews artifacts in place: markdown
// rendered by the gateway (a heading; an injected script inert), code highlighted, JSON
// pretty-printed, an image shown; and downloads one.
func TestConsoleArtifactPreview(t *testing.T) {
	testenv.ConsoleBrowser(t)
	calls := []mock.ToolCallRule{
		{Name: "write_artifact", Arguments: `{"type":"research","filename":"notes.md","content":"# Tide notes\n\nHigh tide at *noon*. <script>window.__pwned = 1</script>\n"}`},
		{Name: "write_artifact", Arguments: `{"type":"code","filename":"tides.py","content":"def tide(hour):\n    return hour % 12\n"}`},
		{Name: "write_artifact", Arguments: `{"type":"data","filename":"tides.json","content":"{\"high\":[12,24],\"low\":[6,18]}"}`},
		{Name: "write_artifact", Arguments: `{"type":"drafts","filename":"wave.svg","content_type":"image/svg+xml","content":"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"40\" height=\"20\"><rect width=\"40\" height=\"20\" fill=\"#2f5bea\"/></svg>"}`},
	}
	sc := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", ContextMatch: "tide artifacts", Response: `{"steps":[{"id":"w","type":"custom","description":"write them"}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ContextMatch: "tide artifacts", ToolMatch: ".", Response: "written"},
		{SystemMatch: "FATHOM-ROLE: executor", ContextMatch: "tide artifacts", ToolCalls: calls},
	}}
	g := startGW(t, gwOpts{script: &sc})
	startSession(t, g, "art-1", "Write tide artifacts")
	awaitCompleted(t, g, "art-1")
	var written, results []string
	for _, ev := range g.journal("art-1") {
		switch ev["type"] {
		case "artifact_written":
			written = append(written, fmt.Sprint(ev["filename"]))
		case "tool_result", "tool_completed", "tool_failed":
			results = append(results, fmt.Sprint(ev))
		}
	}
	if len(written) != len(calls) {
		t.Fatalf("art-1 wrote %v; tool results %v", written, results)
	}
	consoleSession(t, g.srv.URL, "artifacts", "SESSION_ID=art-1")
}
