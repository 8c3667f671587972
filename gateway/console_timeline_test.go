package gateway_test

import (
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
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

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
	for path, want := range map[string]string{"/console/timeline.js": "FathomTimeline", "/console/timeline.css": ".plan-graph", "/console/": `src="timeline.js"`} {
		resp, err := http.Get(g.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Fatalf("GET %s = %d, without %q", path, resp.StatusCode, want)
		}
	}
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
