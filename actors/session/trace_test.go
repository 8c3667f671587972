package session_test

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/telemetry"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// spanLog is an in-memory span exporter that outlives the nodes exporting into it (the
// SDK's forgets its spans when its provider shuts down, i.e. when a node stops).
type spanLog struct{ *tracetest.InMemoryExporter }

func (spanLog) Shutdown(context.Context) error { return nil }

func newSpanLog() spanLog { return spanLog{tracetest.NewInMemoryExporter()} }

// sessionTrace is the spans of the trace of a session's last run, indexed, and the
// roots of all its runs.
type sessionTrace struct {
	spans tracetest.SpanStubs
	byID  map[trace.SpanID]tracetest.SpanStub
	root  tracetest.SpanStub
	// runs are the roots of the session's runs, first first (root is the last).
	runs   tracetest.SpanStubs
	traces map[trace.TraceID]int
}

func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// waitSessionTrace waits until the root span of the run that ended session id (an
// invoke_agent orchestrator span without a parent and with a terminal fathom.status) was
// exported and returns every span of its trace. It fails unless each run of the session
// is a trace of its own with one root, every other span's parent in it and no span
// ending after its root but a tool call a cancel cut (cutByCancel).
func waitSessionTrace(t *testing.T, log spanLog, id string) *sessionTrace {
	t.Helper()
	var roots tracetest.SpanStubs
	var last tracetest.SpanStub
	testenv.Eventually(t, 15*time.Second, func() bool {
		roots = roots[:0]
		ended := false
		for _, s := range log.GetSpans() {
			if attr(s, "gen_ai.conversation.id") != id || s.Name != "invoke_agent orchestrator" || s.Parent.IsValid() {
				continue
			}
			roots = append(roots, s)
			switch attr(s, "fathom.status") {
			case "SESSION_STATUS_COMPLETED", "SESSION_STATUS_FAILED", "SESSION_STATUS_CANCELLED":
				ended, last = true, s
			}
		}
		return ended
	}, "no invoke_agent root span of the end of session %s among %d spans", id, len(log.GetSpans()))
	sort.Slice(roots, func(i, j int) bool { return roots[i].StartTime.Before(roots[j].StartTime) })
	tr := &sessionTrace{root: last, runs: roots, byID: map[trace.SpanID]tracetest.SpanStub{}, traces: map[trace.TraceID]int{}}
	byTrace := map[trace.TraceID]tracetest.SpanStubs{}
	rootOf := map[trace.TraceID]tracetest.SpanStub{}
	for _, r := range roots {
		if _, dup := rootOf[r.SpanContext.TraceID()]; dup {
			t.Fatalf("two runs of session %s in one trace: %v", id, names(roots))
		}
		rootOf[r.SpanContext.TraceID()] = r
	}
	for _, s := range log.GetSpans() {
		if attr(s, "fathom.session_id") == id || attr(s, "gen_ai.conversation.id") == id {
			tr.traces[s.SpanContext.TraceID()]++
		}
		if _, ok := rootOf[s.SpanContext.TraceID()]; ok {
			byTrace[s.SpanContext.TraceID()] = append(byTrace[s.SpanContext.TraceID()], s)
		}
	}
	if len(tr.traces) != len(roots) {
		t.Fatalf("the spans of session %s are in %d traces, want one per run (%d): %v", id, len(tr.traces), len(roots), tr.traces)
	}
	for tid, spans := range byTrace {
		root := rootOf[tid]
		ids := map[trace.SpanID]bool{}
		for _, s := range spans {
			ids[s.SpanContext.SpanID()] = true
		}
		for _, s := range spans {
			if s.SpanContext.SpanID() == root.SpanContext.SpanID() {
				continue
			}
			if !ids[s.Parent.SpanID()] {
				for _, x := range log.GetSpans() {
					t.Logf("exported: %s trace=%v id=%v parent=%v attrs=%v", x.Name, x.SpanContext.TraceID(), x.SpanContext.SpanID(), x.Parent.SpanID(), x.Attributes)
				}
				t.Fatalf("span %s (%v) has parent %v, which is not in its run's trace: %v", s.Name, s.Attributes, s.Parent.SpanID(), names(spans))
			}
			if s.EndTime.After(root.EndTime) && !cutByCancel(root, s) {
				t.Fatalf("span %s ends at %v, after its run's root (%v)", s.Name, s.EndTime, root.EndTime)
			}
		}
	}
	tr.spans = byTrace[last.SpanContext.TraceID()]
	for _, s := range tr.spans {
		tr.byID[s.SpanContext.SpanID()] = s
	}
	return tr
}

// cutByCancel reports whether span s of a run whose root is root may end after the root:
// the run was cancelled and s is a tool call the cancel cut (status error). The root
// ends when the cancel is committed; a cut call ends its span when its tool returns,
// which the run does not wait for (a tool may take its time to see the cancel).
func cutByCancel(root, s tracetest.SpanStub) bool {
	return attr(root, "fathom.status") == "SESSION_STATUS_CANCELLED" && strings.HasPrefix(s.Name, "execute_tool ") && s.Status.Code == codes.Error
}

func names(spans tracetest.SpanStubs) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}

// named returns the trace's spans called name.
func (tr *sessionTrace) named(name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range tr.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// parent returns s's parent span.
func (tr *sessionTrace) parent(s tracetest.SpanStub) tracetest.SpanStub {
	return tr.byID[s.Parent.SpanID()]
}

// TestSessionIsOneTrace: a session with a delegated research step (a researcher
// sub-agent calling a tool) and a step of the orchestrator's own (the executor calling a
// tool) is one trace: an invoke_agent root for the session (gen_ai.conversation.id, the
// orchestrator as gen_ai.agent.name), a session.step span per step under it, the
// researcher as a nested invoke_agent span under its step, execute_tool spans under the
// step or sub-agent that called them and chat spans under the calls that made them.
func TestSessionIsOneTrace(t *testing.T) {
	log := newSpanLog()
	script := &mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-PHASE: plan", Response: `{"steps":[{"id":"r","type":"research","description":"find a"},` +
			`{"id":"c","type":"custom","description":"use it","dependencies":["r"]}]}`},
		{SystemMatch: "FATHOM-ROLE: researcher", ToolMatch: "value of a", Response: `{"status":"completed","summary":"a found"}`},
		{SystemMatch: "FATHOM-ROLE: researcher", ToolCalls: []mock.ToolCallRule{{Name: "lookup", Arguments: `{"key":"a"}`}}},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: "value of b", Response: "used b"},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: []mock.ToolCallRule{{Name: "lookup", Arguments: `{"key":"b"}`}}},
	}, Default: "done"}
	h := startHarness(t, harnessOpts{script: script, cfg: subAgentTools(map[string][]string{"researcher": {"lookup"}}),
		telemetry: telemetry.Config{SpanExporter: log}})
	if _, err := h.start("traced", "c1", "find and use"); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, waitTerminal(t, h.j, "traced", 20*time.Second))
	stopNode(t, h) // the activation's span ends with it
	tr := waitSessionTrace(t, log, "traced")

	root := tr.root
	if root.Name != "invoke_agent orchestrator" || attr(root, "gen_ai.operation.name") != "invoke_agent" ||
		attr(root, "gen_ai.agent.name") != "orchestrator" || attr(root, "fathom.status") != "SESSION_STATUS_COMPLETED" {
		t.Fatalf("root span %s %v", root.Name, root.Attributes)
	}
	if !root.StartTime.Before(root.EndTime) {
		t.Fatalf("root span from %v to %v", root.StartTime, root.EndTime)
	}
	steps := map[string]tracetest.SpanStub{}
	for _, s := range tr.named("session.step") {
		steps[attr(s, "fathom.step_id")] = s
		if s.Parent.SpanID() != root.SpanContext.SpanID() {
			t.Fatalf("step span %s is under %s, not the root", attr(s, "fathom.step_id"), tr.parent(s).Name)
		}
	}
	if len(steps) != 2 || steps["r"].Name == "" || steps["c"].Name == "" {
		t.Fatalf("step spans %v", steps)
	}
	agents := tr.named("invoke_agent researcher")
	if len(agents) != 1 {
		t.Fatalf("%d researcher spans in %v", len(agents), names(tr.spans))
	}
	researcher := agents[0]
	if researcher.Parent.SpanID() != steps["r"].SpanContext.SpanID() || attr(researcher, "gen_ai.agent.name") != "researcher" ||
		attr(researcher, "gen_ai.operation.name") != "invoke_agent" || attr(researcher, "gen_ai.conversation.id") != "traced" {
		t.Fatalf("researcher span under %s: %v", tr.parent(researcher).Name, researcher.Attributes)
	}
	tools := tr.named("execute_tool lookup")
	if len(tools) != 2 {
		t.Fatalf("%d execute_tool spans in %v", len(tools), names(tr.spans))
	}
	under := map[trace.SpanID]bool{}
	for _, s := range tools {
		under[s.Parent.SpanID()] = true
	}
	if !under[researcher.SpanContext.SpanID()] || !under[steps["c"].SpanContext.SpanID()] {
		t.Fatalf("execute_tool spans are under %s and %s, want the researcher and step c", tr.parent(tools[0]).Name, tr.parent(tools[1]).Name)
	}
	var chats, inResearcher int
	for _, s := range tr.spans {
		if !strings.HasPrefix(s.Name, "chat ") {
			continue
		}
		chats++
		// The answer's attributes are on the chat span, set once the call returned.
		if attr(s, "gen_ai.response.model") == "" || attr(s, "gen_ai.usage.input_tokens") == "" || attr(s, "gen_ai.request.model") == "" {
			t.Fatalf("chat span %s lacks the request model or the answer's model and usage: %v", s.Name, s.Attributes)
		}
		call := tr.parent(s)
		if call.Name != "session.plan" && call.Name != "session.llm_call" {
			t.Fatalf("chat span under %s", call.Name)
		}
		if tr.parent(call).SpanContext.SpanID() == researcher.SpanContext.SpanID() {
			inResearcher++
		}
	}
	if chats < 5 || inResearcher != 2 {
		t.Fatalf("%d chat spans, %d of them the researcher's (want ≥5 and 2): %v", chats, inResearcher, names(tr.spans))
	}
	if len(tr.named("session.activation")) != 1 {
		t.Fatalf("activation spans: %v", names(tr.spans))
	}
	// A recording activation span carries each event it stored, by type.
	stored := map[string]bool{}
	for _, e := range tr.named("session.activation")[0].Events {
		stored[e.Name] = true
	}
	if !stored["session_started"] || !stored["llm_responded"] || !stored["session_completed"] {
		t.Fatalf("activation span events %v, want the stored events'", stored)
	}
}

// TestTraceSurvivesNodeRestart: a session waiting for a human when its node stops
// finishes on a new node: the run after the answer is a trace of its own, made by the
// second node (its activation, its steps), whose root links to the first run's root,
// which the first node emitted.
func TestTraceSurvivesNodeRestart(t *testing.T) {
	log := newSpanLog()
	j := openJournal(t)
	t.Cleanup(func() { _ = j.Close() })
	sc := humanStepScript(t, "")
	h := startHarness(t, harnessOpts{journal: j, script: sc, telemetry: telemetry.Config{SpanExporter: log}})
	if _, err := h.start("moved", "c1", "print copies"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, h, "moved", messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN)
	stopNode(t, h)
	before := len(log.GetSpans())
	h2 := startHarness(t, harnessOpts{journal: j, script: sc, telemetry: telemetry.Config{SpanExporter: log}})
	if _, err := h2.node.Session("moved").ProvideInput(&messages.ProvideInputRequest{CommandId: "in", StepId: "ask", Input: `{"n":3}`}, call()); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, waitTerminal(t, j, "moved", 20*time.Second))
	stopNode(t, h2)
	tr := waitSessionTrace(t, log, "moved")
	if len(tr.runs) != 2 {
		t.Fatalf("%d runs, want 2: %v", len(tr.runs), names(tr.runs))
	}
	first := tr.runs[0]
	for i, s := range log.GetSpans() {
		if s.SpanContext.TraceID() == first.SpanContext.TraceID() && i >= before {
			t.Fatalf("the second node made span %s in the first run's trace", s.Name)
		}
		if s.SpanContext.TraceID() == tr.root.SpanContext.TraceID() && i < before {
			t.Fatalf("the first node made span %s in the second run's trace", s.Name)
		}
	}
	if acts := tr.named("session.activation"); len(acts) != 1 {
		t.Fatalf("%d activation spans in the second run's trace, want the second node's: %v", len(acts), names(tr.spans))
	}
	if len(tr.root.Links) != 1 || tr.root.Links[0].SpanContext.SpanID() != first.SpanContext.SpanID() {
		t.Fatalf("the second run's root links to %v, want the first run's root", tr.root.Links)
	}
	steps := tr.named("session.step")
	if len(steps) != 2 {
		t.Fatalf("step spans %v", names(tr.spans))
	}
	for _, s := range steps {
		if s.Parent.SpanID() != tr.root.SpanContext.SpanID() {
			t.Fatalf("step %s is not under the run's root", attr(s, "fathom.step_id"))
		}
	}
}

// TestFailedSessionTraceEndsOpenSpans: a session failing while a sub-agent runs ends the
// sub-agent's and the step's spans with the root, marked as errors.
func TestFailedSessionTraceEndsOpenSpans(t *testing.T) {
	log := newSpanLog()
	script := &mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-PHASE: plan", Response: `{"steps":[{"id":"r","type":"research","description":"loop"}]}`},
		{SystemMatch: "FATHOM-ROLE: researcher", ToolCalls: []mock.ToolCallRule{{Name: "lookup", Arguments: `{"key":"x"}`}}},
	}, Default: "done"}
	h := startHarness(t, harnessOpts{script: script, telemetry: telemetry.Config{SpanExporter: log}, cfg: func(c *session.Config) {
		c.SubAgentTools = map[string][]string{"researcher": {"lookup"}}
		c.MaxLLMCalls = 4
	}})
	if _, err := h.start("capped", "c1", "loop"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "capped", 20*time.Second)
	if evs[len(evs)-1].GetSessionFailed() == nil {
		t.Fatalf("the session ended with %s", evs[len(evs)-1].Type())
	}
	tr := waitSessionTrace(t, log, "capped")
	if tr.root.Status.Code.String() != "Error" {
		t.Fatalf("root status %v", tr.root.Status)
	}
	for _, name := range []string{"session.step", "invoke_agent researcher"} {
		spans := tr.named(name)
		if len(spans) != 1 || spans[0].Status.Code.String() != "Error" || spans[0].EndTime.After(tr.root.EndTime) {
			t.Fatalf("%s spans: %d (%v)", name, len(spans), spans)
		}
	}
}

var _ sdktrace.SpanExporter = spanLog{}

// TestCancelledSessionTrace: cancelling a session waiting on a tool ends its trace: the
// root (status error, "cancelled: REASON") and the cut-short step, with the tool's span
// under the step.
func TestCancelledSessionTrace(t *testing.T) {
	log := newSpanLog()
	started := make(chan struct{})
	type noArgs struct{}
	reg, err := tools.NewRegistry(tools.MustNew("hang", "Waits for the caller to go away.", tools.SandboxNone, func(ctx context.Context, _ noArgs) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	if err != nil {
		t.Fatal(err)
	}
	sc := rules(t,
		planRule(`[{"id":"a","type":"custom","description":"wait for it"}]`),
		`{"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"hang","arguments":"{}"}]}`,
	)
	h := startHarness(t, harnessOpts{script: sc, tools: &tools.Executor{Registry: reg, Timeout: time.Minute}, telemetry: telemetry.Config{SpanExporter: log}})
	if _, err := h.start("stopped", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the tool never started")
	}
	if _, err := h.node.Session("stopped").Cancel(&messages.CancelRequest{CommandId: "c2", Reason: "operator stop", By: "ops"}, call()); err != nil {
		t.Fatal(err)
	}
	tr := waitSessionTrace(t, log, "stopped")
	if tr.root.Status.Code.String() != "Error" || tr.root.Status.Description != "cancelled: operator stop" || attr(tr.root, "fathom.status") != "SESSION_STATUS_CANCELLED" {
		t.Fatalf("root %v %v", tr.root.Status, tr.root.Attributes)
	}
	steps := tr.named("session.step")
	if len(steps) != 1 || steps[0].Status.Code.String() != "Error" || steps[0].Parent.SpanID() != tr.root.SpanContext.SpanID() {
		t.Fatalf("step spans %v", steps)
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		for _, s := range log.GetSpans() {
			if s.Name == "execute_tool hang" {
				return s.Parent.SpanID() == steps[0].SpanContext.SpanID() && s.Status.Code == codes.Error
			}
		}
		return false
	}, "no execute_tool hang span with an error status (the cancel cut it) under the step")
}

// TestTraceRootEndsAtHumanWait: the root invoke_agent span of the first run is exported
// when the run stops at a wait for a human, not when the session ends, so a backend has
// the parent of the spans made so far while the session waits; the run after the answer
// is a trace of its own whose root links to the first run's and carries the totals, and
// the human step, cut by the wait, is a span in each run.
func TestTraceRootEndsAtHumanWait(t *testing.T) {
	log := newSpanLog()
	h := startHarness(t, harnessOpts{script: humanStepScript(t, ""), telemetry: telemetry.Config{SpanExporter: log}})
	if _, err := h.start("waits", "c1", "print copies"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, h, "waits", messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN)
	var root tracetest.SpanStub
	testenv.Eventually(t, 10*time.Second, func() bool {
		for _, s := range log.GetSpans() {
			if !s.Parent.IsValid() && attr(s, "gen_ai.conversation.id") == "waits" {
				root = s
				return true
			}
		}
		return false
	}, "no root span of session waits while it waits for a human (%d spans exported)", len(log.GetSpans()))
	if root.Name != "invoke_agent orchestrator" || attr(root, "fathom.run.ended_by") != "awaiting_human" ||
		attr(root, "fathom.status") != "SESSION_STATUS_AWAITING_HUMAN" || !root.StartTime.Before(root.EndTime) {
		t.Fatalf("root while waiting: %s %v from %v to %v", root.Name, root.Attributes, root.StartTime, root.EndTime)
	}
	if _, err := h.node.Session("waits").ProvideInput(&messages.ProvideInputRequest{CommandId: "in", StepId: "ask", Input: `{"n":3}`}, call()); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, waitTerminal(t, h.j, "waits", 20*time.Second))
	stopNode(t, h)
	tr := waitSessionTrace(t, log, "waits")
	if len(tr.runs) != 2 || tr.runs[0].SpanContext.SpanID() != root.SpanContext.SpanID() {
		t.Fatalf("runs %v, want the root of the wait then the run after the answer", names(tr.runs))
	}
	run := tr.root
	if run.SpanContext.TraceID() == root.SpanContext.TraceID() || attr(run, "fathom.status") != "SESSION_STATUS_COMPLETED" ||
		attr(run, "fathom.run.ended_by") != "completed" || run.StartTime.Before(root.EndTime) {
		t.Fatalf("the run after the answer: %v, from %v to %v (first run ended %v)", run.Attributes, run.StartTime, run.EndTime, root.EndTime)
	}
	if len(run.Links) != 1 || run.Links[0].SpanContext.SpanID() != root.SpanContext.SpanID() || run.Links[0].SpanContext.TraceID() != root.SpanContext.TraceID() {
		t.Fatalf("the run after the answer links to %v, want the first run's root", run.Links)
	}
	asks := 0
	for _, s := range log.GetSpans() {
		if s.Name == "session.step" && attr(s, "fathom.step_id") == "ask" {
			asks++
			split := attr(s, "fathom.split_by")
			if in := s.SpanContext.TraceID(); in == root.SpanContext.TraceID() && split != "awaiting_human" || in == run.SpanContext.TraceID() && split != "" {
				t.Fatalf("step ask in trace %v: fathom.split_by %q", in, split)
			}
		}
	}
	if asks != 2 {
		t.Fatalf("%d spans of step ask, want one per run", asks)
	}
	for _, s := range tr.named("session.step") {
		if s.Parent.SpanID() != run.SpanContext.SpanID() {
			t.Fatalf("step %s is under %s, not the run's root", attr(s, "fathom.step_id"), tr.parent(s).Name)
		}
	}
}

// TestForkTraceLinksToSource: a fork's root invoke_agent span, in the fork's own trace,
// carries a link to its source's root span and the fork point (source id and seq).
func TestForkTraceLinksToSource(t *testing.T) {
	log := newSpanLog()
	script := &mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-PHASE: plan", Response: `{"steps":[{"id":"a","type":"custom","description":"one"},{"id":"b","type":"custom","description":"two"}]}`},
	}, Default: "done"}
	h := startHarness(t, harnessOpts{script: script, telemetry: telemetry.Config{SpanExporter: log}})
	if _, err := h.start("origin", "c1", "two steps"); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, waitTerminal(t, h.j, "origin", 20*time.Second))
	src := waitSessionTrace(t, log, "origin")
	if _, err := h.node.Session("branch").Fork(&messages.ForkRequest{CommandId: "f1", SourceSessionId: "origin", StepIndex: 1}, call()); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "branch", 20*time.Second)
	mustComplete(t, evs)
	var forked *messages.SessionForked
	for _, ev := range evs {
		if f := ev.GetSessionForked(); f != nil {
			forked = f
		}
	}
	if forked == nil {
		t.Fatal("the fork recorded no session_forked")
	}
	tr := waitSessionTrace(t, log, "branch")
	if tr.root.SpanContext.TraceID() == src.root.SpanContext.TraceID() {
		t.Fatal("the fork's spans are in its source's trace")
	}
	if len(tr.root.Links) != 1 {
		t.Fatalf("the fork's root has %d links, want 1: %v", len(tr.root.Links), tr.root.Links)
	}
	l := tr.root.Links[0]
	if l.SpanContext.TraceID() != src.root.SpanContext.TraceID() || l.SpanContext.SpanID() != src.root.SpanContext.SpanID() {
		t.Fatalf("the fork's link points at %v/%v, want the source's root %v/%v",
			l.SpanContext.TraceID(), l.SpanContext.SpanID(), src.root.SpanContext.TraceID(), src.root.SpanContext.SpanID())
	}
	want := map[string]string{"fathom.fork.source_session_id": "origin", "fathom.fork.source_seq": strconv.FormatUint(forked.GetSourceSeq(), 10)}
	for k, v := range want {
		if attr(tr.root, k) != v {
			t.Fatalf("the fork's root has %s = %q, want %q", k, attr(tr.root, k), v)
		}
		found := false
		for _, kv := range l.Attributes {
			found = found || string(kv.Key) == k && kv.Value.String() == v
		}
		if !found {
			t.Fatalf("the link has no %s = %s: %v", k, v, l.Attributes)
		}
	}
	if len(src.root.Links) != 0 {
		t.Fatalf("the source's root has links: %v", src.root.Links)
	}
}
