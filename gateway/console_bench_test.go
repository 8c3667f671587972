package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// sessionRows is the console's sessions table rows: the page has loaded when the 50th
// (the first page of the list) is visible.
const sessionRows = `[data-testid="sessions"] tbody tr`

// pageTimer is scripts/console-load.mjs: one headless Chromium that loads pages on
// request and tells how long each took.
type pageTimer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

type pageLoad struct {
	MS    float64 `json:"ms"`
	HTML  string  `json:"html"`
	Error string  `json:"error"`
}

// startPageTimer starts the timer; it stops when tb ends (or after 10 minutes).
func startPageTimer(tb testing.TB, token string) *pageTimer {
	tb.Helper()
	playwright, chromium := testenv.ConsoleBrowser(tb)
	node, err := exec.LookPath("node")
	if err != nil {
		tb.Skipf("node not found: %v", err)
	}
	_, file, _, _ := runtime.Caller(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	cmd := exec.CommandContext(ctx, node, filepath.Join(filepath.Dir(file), "..", "scripts", "console-load.mjs"))
	cmd.Env = append(os.Environ(), "PLAYWRIGHT_DIR="+playwright, "CHROMIUM="+chromium, "TOKEN="+token)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		tb.Fatalf("start scripts/console-load.mjs: %v", err)
	}
	p := &pageTimer{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	p.out.Buffer(make([]byte, 0, 64<<10), 16<<20)
	tb.Cleanup(func() {
		_ = in.Close()
		if err := cmd.Wait(); err != nil {
			tb.Logf("scripts/console-load.mjs: %v", err)
		}
		cancel()
	})
	return p
}

// load loads url in a fresh page until the nth match of selector is visible.
func (p *pageTimer) load(tb testing.TB, op, url, selector string, nth int) pageLoad {
	tb.Helper()
	req, _ := json.Marshal(map[string]any{"op": op, "url": url, "selector": selector, "nth": nth})
	if _, err := fmt.Fprintf(p.in, "%s\n", req); err != nil {
		tb.Fatalf("page timer: %v", err)
	}
	if !p.out.Scan() {
		tb.Fatalf("page timer stopped: %v", p.out.Err())
	}
	var res pageLoad
	if err := json.Unmarshal(p.out.Bytes(), &res); err != nil {
		tb.Fatalf("page timer answered %q: %v", p.out.Bytes(), err)
	}
	if res.Error != "" {
		tb.Fatalf("load %s: %s", url, res.Error)
	}
	return res
}

// BenchmarkConsoleLoad is the console's page load with 10,000 sessions in the index, in
// headless Chromium: navigation until the sessions page shows its first 50 rows (the
// page's script fetches the list from the gateway and renders it), in a fresh page each
// time; p50-ms is the median. Its baseline, in the same run and browser, is the same
// page as rendered (its DOM with the scripts removed, and the console's stylesheet) from
// a plain http.FileServer, until the same row is visible.
func BenchmarkConsoleLoad(b *testing.B) {
	var index indexedJournal
	g := startGW(b, gwOpts{journal: func(j persistence.Journal) persistence.Journal {
		index = j.(indexedJournal)
		return j
	}})
	seedSessions(b, index, 10000)
	timer := startPageTimer(b, token)
	console := g.srv.URL + "/console/"

	static := staticCopy(b, timer, console, console, sessionRows, 49)
	for _, c := range []struct{ name, url string }{{"sessions=10000", console}, {"baseline=static", static + "/"}} {
		b.Run(c.name, func(b *testing.B) {
			times := make([]float64, 0, b.N)
			for i := 0; i < b.N; i++ {
				times = append(times, timer.load(b, "load", c.url, sessionRows, 49).MS)
			}
			slices.Sort(times)
			b.ReportMetric(times[len(times)/2], "p50-ms")
		})
	}
}

// staticCopy loads page (a console URL) until the nth match of selector is visible and
// serves what it rendered (its DOM without its scripts) with the console's stylesheets
// from a plain http.FileServer: the baseline of a page's load. It returns the server's URL.
func staticCopy(b *testing.B, timer *pageTimer, console, page, selector string, nth int) string {
	b.Helper()
	dump := timer.load(b, "dump", page, selector, nth)
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(dump.HTML), 0o600); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"console.css", "chroma.css"} {
		resp, err := http.Get(console + name)
		if err != nil {
			b.Fatal(err)
		}
		css, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d %v", name, resp.StatusCode, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), css, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	static := httptest.NewServer(http.FileServer(http.Dir(dir)))
	b.Cleanup(static.Close)
	return static.URL
}

// transcriptLanes is the session page's transcript lanes: the transcript has painted
// when the last sub-agent's lane is visible.
const transcriptLanes = `[data-testid="lanes"] > details.lane`

// BenchmarkConsoleSessionLoad is the console's session page of a completed session of
// 2,000 events with 30 sub-agents (each with its model answers, tool calls with
// arguments and results, and hand-off), in headless Chromium: navigation until the
// transcript has painted (the final result and the 30th sub-agent's lane visible: the
// page fetched GET /v1/sessions/{id}/transcript and rendered it), in a fresh page each
// time; p50-ms is the median. Its baseline, in the same run and browser, is the same
// page as rendered, scripts removed, from a plain http.FileServer.
func BenchmarkConsoleSessionLoad(b *testing.B) {
	var index indexedJournal
	g := startGW(b, gwOpts{journal: func(j persistence.Journal) persistence.Journal {
		index = j.(indexedJournal)
		return j
	}})
	const id, subAgents, events = "bench-transcript", 30, 2000
	seedDelegatedSession(b, index, id, subAgents, events)
	timer := startPageTimer(b, token)
	console := g.srv.URL + "/console/"
	page := console + "#/session/" + id
	static := staticCopy(b, timer, console, page, transcriptLanes, subAgents)

	for _, c := range []struct{ name, url string }{{"events=2000,subagents=30", page}, {"baseline=static", static + "/"}} {
		b.Run(c.name, func(b *testing.B) {
			times := make([]float64, 0, b.N)
			for i := 0; i < b.N; i++ {
				times = append(times, timer.load(b, "load", c.url, transcriptLanes, subAgents).MS)
			}
			slices.Sort(times)
			b.ReportMetric(times[len(times)/2], "p50-ms")
		})
	}
}

// seedDelegatedSession stores a completed session of exactly n events in which
// subAgents sub-agents each ran one step of the plan: answers with markdown, tool calls
// with JSON arguments and results, hand-offs; then the closing summary and the result.
func seedDelegatedSession(tb testing.TB, j indexedJournal, id string, subAgents, n int) {
	tb.Helper()
	var evs []*messages.Event
	add := func(p any) {
		ev := &messages.Event{}
		switch p := p.(type) {
		case *messages.SessionStarted:
			ev.Payload = &messages.Event_SessionStarted{SessionStarted: p}
		case *messages.PlanCreated:
			ev.Payload = &messages.Event_PlanCreated{PlanCreated: p}
		case *messages.StepStarted:
			ev.Payload = &messages.Event_StepStarted{StepStarted: p}
		case *messages.SubagentStarted:
			ev.Payload = &messages.Event_SubagentStarted{SubagentStarted: p}
		case *messages.LlmRequested:
			ev.Payload = &messages.Event_LlmRequested{LlmRequested: p}
		case *messages.LlmResponded:
			ev.Payload = &messages.Event_LlmResponded{LlmResponded: p}
		case *messages.ToolCalled:
			ev.Payload = &messages.Event_ToolCalled{ToolCalled: p}
		case *messages.ToolResult:
			ev.Payload = &messages.Event_ToolResult{ToolResult: p}
		case *messages.ArtifactWritten:
			ev.Payload = &messages.Event_ArtifactWritten{ArtifactWritten: p}
		case *messages.SubagentCompleted:
			ev.Payload = &messages.Event_SubagentCompleted{SubagentCompleted: p}
		case *messages.StepCompleted:
			ev.Payload = &messages.Event_StepCompleted{StepCompleted: p}
		case *messages.SessionCompleted:
			ev.Payload = &messages.Event_SessionCompleted{SessionCompleted: p}
		}
		evs = append(evs, ev)
	}
	add(&messages.SessionStarted{Goal: "Survey the actor model across 30 research threads", UserId: "bench"})
	plan := &messages.PlanCreated{PlanId: "plan-1"}
	for i := 1; i <= subAgents; i++ {
		plan.Steps = append(plan.Steps, &messages.PlanStep{Id: fmt.Sprintf("step-%d", i), Type: "research", Description: fmt.Sprintf("Research thread %d", i)})
	}
	add(plan)
	const closing = 3 // the closing call's request and answer, and session_completed
	per := (n - len(evs) - closing) / subAgents
	extra := (n - len(evs) - closing) % subAgents
	for i := 1; i <= subAgents; i++ {
		step, sa := fmt.Sprintf("step-%d", i), fmt.Sprintf("researcher-%d", i)
		budget := per
		if i <= extra {
			budget++
		}
		add(&messages.StepStarted{StepId: step, StepIndex: uint32(i - 1), StepType: "research", Description: fmt.Sprintf("Research thread %d", i), Attempt: 1})
		add(&messages.SubagentStarted{SubAgentId: sa, AgentType: "researcher", StepId: step, StepIndex: uint32(i - 1), Task: fmt.Sprintf("Goal: survey the actor model.\nStep: research thread %d.", i)})
		inner := budget - 4      // besides step_started, subagent_started, the hand-off and step_completed
		artifact := inner%2 == 1 // the first tool call writes an artifact (one event)
		if artifact {
			inner--
		}
		call := 0
		for ; inner >= 6; inner -= 4 { // tool rounds, leaving room for the last answer
			call++
			callID, tool, key := fmt.Sprintf("%s/%s/llm-%d", step, sa, call), fmt.Sprintf("c%d", call), fmt.Sprintf("%s/%s/tool-%d", id, step, call)
			add(&messages.LlmRequested{CallId: callID, StepId: step, Purpose: "subagent", SubAgentId: sa, Iteration: uint32(call)})
			add(&messages.LlmResponded{CallId: callID, StepId: step, SubAgentId: sa, DurationMs: 900, CostUsd: 0.002,
				Content: "Searching for sources.", ToolCalls: []*messages.ToolCallRequest{{Id: tool, Name: "web_search", Arguments: `{"query":"actor model thread"}`}}})
			add(&messages.ToolCalled{StepId: step, CallId: tool, Tool: "web_search", Args: fmt.Sprintf(`{"query":"actor model thread %d call %d","max_results":5}`, i, call), IdempotencyKey: key, Index: uint32(call), SubAgentId: sa})
			if artifact && call == 1 {
				add(&messages.ArtifactWritten{Path: fmt.Sprintf("%s/research/thread-%d.md", id, i), ArtifactType: "research", Filename: fmt.Sprintf("thread-%d.md", i),
					ContentType: "text/markdown", Size: 2048, StepId: step, SubAgentId: sa, CallId: tool, IdempotencyKey: key})
			}
			add(&messages.ToolResult{StepId: step, CallId: tool, Tool: "web_search", IdempotencyKey: key, SubAgentId: sa, DurationMs: 120,
				Result: `{"results":[{"title":"Actors","url":"https://example.com/actors","snippet":"An actor processes one message at a time."},{"title":"Journals","url":"https://example.com/journal","snippet":"Event sourcing stores every change."}]}`})
		}
		for ; inner >= 2; inner -= 2 { // answers
			call++
			callID := fmt.Sprintf("%s/%s/llm-%d", step, sa, call)
			add(&messages.LlmRequested{CallId: callID, StepId: step, Purpose: "subagent", SubAgentId: sa, Iteration: uint32(call)})
			add(&messages.LlmResponded{CallId: callID, StepId: step, SubAgentId: sa, DurationMs: 800, CostUsd: 0.001,
				Content: fmt.Sprintf("## Thread %d\n\nActors *isolate* state; see `mailbox` semantics.", i)})
		}
		add(&messages.SubagentCompleted{SubAgentId: sa, AgentType: "researcher", StepId: step, StepIndex: uint32(i - 1), Action: "continue",
			Result: &messages.SubagentResult{Status: "completed", Summary: fmt.Sprintf("Thread %d: actors isolate state behind mailboxes.", i), ToolsUsed: []string{"web_search"}, Confidence: 0.8,
				Researcher: &messages.ResearcherReport{Sources: []string{"https://example.com/actors"}, KeyFindings: []string{"one message at a time"}}}})
		add(&messages.StepCompleted{StepId: step, StepIndex: uint32(i - 1), Output: fmt.Sprintf("Thread %d: actors isolate state behind mailboxes.", i)})
	}
	add(&messages.LlmRequested{CallId: "final-1", Purpose: "synthesize"})
	add(&messages.LlmResponded{CallId: "final-1", Content: "# Survey\n\nActors isolate state.", DurationMs: 1500})
	add(&messages.SessionCompleted{Result: "# Survey of the actor model\n\nActors isolate state behind mailboxes; journals make them durable.\n\n```go\nfunc (a *Actor) Receive(ctx actor.Context) {}\n```\n"})
	if len(evs) != n {
		tb.Fatalf("seeded %d events, want %d", len(evs), n)
	}
	recs := make([]persistence.Record, len(evs))
	at := time.Now().Add(-time.Hour)
	for i, ev := range evs {
		ev.Seq, ev.SessionId, ev.AtUnixNano = uint64(i+1), id, at.Add(time.Duration(i)*time.Second).UnixNano()
		data, err := messages.EncodeEvent(ev)
		if err != nil {
			tb.Fatal(err)
		}
		recs[i] = persistence.Record{Type: ev.Type(), Data: data, At: ev.At()}
	}
	if _, err := j.AppendIndexed(context.Background(), id, 0, recs, persistence.IndexEntry{SessionID: id, Status: persistence.StatusCompleted}); err != nil {
		tb.Fatal(err)
	}
}
