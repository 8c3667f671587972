package session_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
)

// planRule answers the orchestrator's planning call with steps (JSON, escaped for a rule).
func planRule(steps string) string {
	return `{"system_match":"FATHOM-PHASE: plan","response":` + quote(`{"steps":`+steps+`}`) + `}`
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func rules(t *testing.T, rs ...string) *mock.Script {
	t.Helper()
	s, err := mock.ParseScript([]byte(`{"rules":[` + strings.Join(rs, ",") + `],"default":"?"}`))
	if err != nil {
		t.Fatal(err)
	}
	return &s
}

func subAgentTools(tools map[string][]string) func(*session.Config) {
	return func(c *session.Config) { c.SubAgentTools = tools }
}

func seqOf(evs []*messages.Event, typ, subAgentID string) uint64 {
	for _, ev := range evs {
		switch {
		case typ == "subagent_started" && ev.GetSubagentStarted().GetSubAgentId() == subAgentID,
			typ == "subagent_completed" && ev.GetSubagentCompleted().GetSubAgentId() == subAgentID:
			return ev.GetSeq()
		}
	}
	return 0
}

func completedResult(evs []*messages.Event, subAgentID string) *messages.SubagentResult {
	for _, ev := range evs {
		if c := ev.GetSubagentCompleted(); c.GetSubAgentId() == subAgentID {
			return c.GetResult()
		}
	}
	return nil
}

// TestDelegatedPlanRunsSubAgentsInParallel: research → (code ∥ write) → review, each in a
// sub-agent of its type with its own context; the independent code and write steps run
// at the same time; hand-offs (well-formed and malformed) reach the steps that depend
// on them; the orchestrator never sees a sub-agent's conversation.
func TestDelegatedPlanRunsSubAgentsInParallel(t *testing.T) {
	ex := &executions{}
	sc := rules(t,
		planRule(`[{"id":"r","type":"research","description":"find the facts"},`+
			`{"id":"c","type":"code","description":"compute it","dependencies":["r"]},`+
			`{"id":"w","type":"write","description":"draft it","dependencies":["r"]},`+
			`{"id":"v","type":"review","description":"check it","dependencies":["c","w"]}]`),
		`{"system_match":"FATHOM-ROLE: researcher","tool_match":"value of","response":`+quote("Found it.\n```json\n"+
			`{"status":"completed","summary":"facts found","key_findings":["k is 42"],"sources":["lookup"],"confidence":"90%"}`+"\n```")+`}`,
		`{"system_match":"FATHOM-ROLE: researcher","tool_calls":[{"name":"lookup","arguments":"{\"key\":\"k\"}"}]}`,
		`{"system_match":"FATHOM-ROLE: coder","delay_ms":700,"response":`+quote("```json\n"+
			`{"status":"completed","summary":"code done","files_created":["calc.py"],"tests_status":"passing","confidence":0.8}`+"\n```")+`}`,
		`{"system_match":"FATHOM-ROLE: writer","delay_ms":700,"response":"Here is my draft, and I forgot the JSON."}`,
		`{"system_match":"FATHOM-PHASE: synthesize","context_match":"looks good","response":"Closing: all four steps handed off."}`,
		`{"system_match":"FATHOM-ROLE: reviewer","context_match":"code done[\\s\\S]*forgot the JSON","response":`+quote(
			`{"status":"completed","summary":"looks good","verdict":"approve","issues":[]}`)+`}`,
	)
	h := startHarness(t, harnessOpts{script: sc, tools: testToolsWith(t, ex, nil),
		cfg: subAgentTools(map[string][]string{"researcher": {"lookup"}})})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "s1", 30*time.Second)
	mustComplete(t, evs)

	started := ofType(evs, "subagent_started")
	var kinds []string
	for _, ev := range started {
		kinds = append(kinds, ev.GetSubagentStarted().GetAgentType()+"="+ev.GetSubagentStarted().GetSubAgentId())
	}
	if got := strings.Join(kinds, ","); !strings.HasPrefix(got, "researcher=researcher-1,") || len(started) != 4 ||
		!strings.Contains(got, "coder=coder-1") || !strings.Contains(got, "writer=writer-1") || !strings.HasSuffix(got, "reviewer=reviewer-1") {
		t.Fatalf("sub-agents started: %s", got)
	}
	// Parallel: both independent sub-agents started before either handed off.
	cStart, wStart := seqOf(evs, "subagent_started", "coder-1"), seqOf(evs, "subagent_started", "writer-1")
	cDone, wDone := seqOf(evs, "subagent_completed", "coder-1"), seqOf(evs, "subagent_completed", "writer-1")
	if max(cStart, wStart) > min(cDone, wDone) {
		t.Fatalf("code and write did not overlap: started %d/%d, completed %d/%d", cStart, wStart, cDone, wDone)
	}
	// The reviewer started only after both dependencies completed.
	if v := seqOf(evs, "subagent_started", "reviewer-1"); v < max(cDone, wDone) {
		t.Fatalf("reviewer started at %d before its dependencies completed (%d, %d)", v, cDone, wDone)
	}

	// The researcher's tool call is its own, keyed by its id, run once.
	called := ofType(evs, "tool_called")
	if len(called) != 1 || called[0].GetToolCalled().GetSubAgentId() != "researcher-1" ||
		called[0].GetToolCalled().GetIdempotencyKey() != "s1/researcher-1/tool-1" || ex.get("s1/researcher-1/tool-1") != 1 {
		t.Fatalf("tool calls %v, executions %d", called, ex.get("s1/researcher-1/tool-1"))
	}
	// Every LLM call but planning and the closing summary is a sub-agent's.
	for _, ev := range ofType(evs, "llm_requested") {
		if r := ev.GetLlmRequested(); r.GetCallId() != "plan-1" && r.GetCallId() != "final-1" && r.GetSubAgentId() == "" {
			t.Fatalf("orchestrator step call %v in a fully delegated plan", r)
		}
	}

	// Hand-offs: interpretation parsed, facts merged, malformed output tolerated.
	if r := completedResult(evs, "researcher-1"); r.GetStatus() != "completed" || r.GetConfidence() != 0.9 ||
		len(r.GetResearcher().GetKeyFindings()) != 1 || r.GetToolsUsed()[0] != "lookup" || r.GetUsage().GetInputTokens() == 0 {
		t.Fatalf("researcher hand-off %v", r)
	}
	if r := completedResult(evs, "coder-1"); r.GetCoder().GetTestsStatus() != "passing" || r.GetDurationMs() < 500 {
		t.Fatalf("coder hand-off %v", r)
	}
	if r := completedResult(evs, "writer-1"); r.GetStatus() != "partial" || r.GetParseError() == "" || !strings.Contains(r.GetSummary(), "forgot the JSON") {
		t.Fatalf("writer hand-off %v", r)
	}
	// The orchestrator's closing summary (its input held the hand-offs) is the result.
	if last := evs[len(evs)-1].GetSessionCompleted(); last.GetResult() != "Closing: all four steps handed off." {
		t.Fatalf("session result %q", last.GetResult())
	}
	if out := ofType(evs, "step_completed")[3].GetStepCompleted().GetOutput(); !strings.Contains(out, "looks good") || !strings.Contains(out, "Verdict: approve") {
		t.Fatalf("review step output %q", out)
	}

	// State: four isolated contexts; the orchestrator's steps hold only the hand-offs.
	st, err := h.state("s1")
	if err != nil {
		t.Fatal(err)
	}
	sas := st.GetState().GetSubAgents()
	if len(sas) != 4 || len(sas["researcher-1"].GetTranscript()) != 4 { // brief, tool call, tool result, hand-off
		t.Fatalf("sub-agents %v", sas)
	}
	if r := st.GetState().GetSteps()[0]; r.GetLlmCalls() != 2 || r.GetToolCalls() != 1 { // the timeline's counts
		t.Fatalf("research step counts %d LLM and %d tool calls, want 2 and 1", r.GetLlmCalls(), r.GetToolCalls())
	}
	for _, step := range st.GetState().GetSteps() {
		if tr := step.GetTranscript(); len(tr) != 1 || tr[0].GetRole() != "assistant" || tr[0].GetContent() != step.GetOutput() {
			t.Fatalf("step %s transcript %v: only the hand-off belongs to the orchestrator", step.GetStep().GetId(), tr)
		}
	}
}

// TestFailedHandoffRetriesTheStepInTheSameContext: a sub-agent that hands off "failed"
// runs again (attempt 2) as the same sub-agent, its earlier context resumed, and the
// step completes.
func TestFailedHandoffRetriesTheStepInTheSameContext(t *testing.T) {
	sc := rules(t,
		planRule(`[{"id":"r","type":"research","description":"find the facts"}]`),
		`{"system_match":"FATHOM-ROLE: researcher","context_match":"attempt 2","response":`+quote(`{"status":"completed","summary":"second time lucky"}`)+`}`,
		`{"system_match":"FATHOM-ROLE: researcher","response":`+quote(`{"status":"failed","summary":"no sources"}`)+`}`,
	)
	h := startHarness(t, harnessOpts{script: sc})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "s1", 20*time.Second)
	mustComplete(t, evs)
	started := ofType(evs, "subagent_started")
	if len(started) != 2 || started[1].GetSubagentStarted().GetSubAgentId() != "researcher-1" || !started[1].GetSubagentStarted().GetResumed() ||
		!strings.Contains(started[1].GetSubagentStarted().GetTask(), "no sources") {
		t.Fatalf("sub-agent runs %v", started)
	}
	done := ofType(evs, "subagent_completed")
	if done[0].GetSubagentCompleted().GetAction() != "retry" || done[1].GetSubagentCompleted().GetAction() != "continue" {
		t.Fatalf("actions %v", done)
	}
	// The second run's call saw the first run's messages (its context resumed).
	var second *messages.LlmResponded
	for _, ev := range ofType(evs, "llm_responded") {
		if r := ev.GetLlmResponded(); r.GetCallId() == "researcher-1/llm-2" {
			second = r
		}
	}
	if second.GetContext().GetHistoryCount() != 3 { // first brief, first hand-off, second brief
		t.Fatalf("second run's context %v", second.GetContext())
	}
	if f := ofType(evs, "step_failed"); len(f) != 1 || !f[0].GetStepFailed().GetRetryable() {
		t.Fatalf("step_failed %v", f)
	}
}

// TestSubAgentKilledMidLoopResumesFromItsEvents: the node dies while a sub-agent's tool
// runs; the next node resumes the sub-agent from the journal: the tool whose result was
// recorded is not run again, the interrupted one is (same idempotency key).
func TestSubAgentKilledMidLoopResumesFromItsEvents(t *testing.T) {
	j := openJournal(t)
	defer j.Close()
	ex := &executions{}
	release := make(chan struct{})
	sc := rules(t,
		planRule(`[{"id":"r","type":"research","description":"find the facts"}]`),
		`{"system_match":"FATHOM-ROLE: researcher","tool_match":"released","response":`+quote(`{"status":"completed","summary":"done after the restart"}`)+`}`,
		`{"system_match":"FATHOM-ROLE: researcher","tool_match":"value of","tool_calls":[{"name":"sleepy","arguments":"{}"}]}`,
		`{"system_match":"FATHOM-ROLE: researcher","tool_calls":[{"name":"lookup","arguments":"{\"key\":\"k\"}"}]}`,
	)
	cfg := subAgentTools(map[string][]string{"researcher": {"lookup", "sleepy"}})
	h1 := startHarness(t, harnessOpts{journal: j, script: sc, cfg: cfg, tools: testToolsWith(t, ex, release)})
	if _, err := h1.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return ex.get("s1/researcher-1/tool-2") == 1 }, "sleepy did not start")
	stopNode(t, h1)
	close(release)
	h2 := startHarness(t, harnessOpts{journal: j, script: sc, cfg: cfg, tools: testToolsWith(t, ex, release)})
	if _, err := h2.state("s1"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, j, "s1", 20*time.Second)
	mustComplete(t, evs)
	if n := ex.get("s1/researcher-1/tool-1"); n != 1 {
		t.Fatalf("lookup (result recorded) ran %d times", n)
	}
	if n := ex.get("s1/researcher-1/tool-2"); n != 2 {
		t.Fatalf("sleepy (interrupted) ran %d times, want 2", n)
	}
	if called, results := len(ofType(evs, "tool_called")), len(ofType(evs, "tool_result")); called != 2 || results != 2 {
		t.Fatalf("%d tool_called, %d tool_result", called, results)
	}
	if n := len(ofType(evs, "subagent_started")); n != 1 {
		t.Fatalf("%d subagent_started: the run resumed, it did not start over", n)
	}
}

// TestSubAgentAsksAHuman: a sub-agent's ask_human call waits in state for a human
// (AWAITING_HUMAN, hitl_requested tagged with its id); ProvideInput answers it, the
// answer is the call's tool result in the sub-agent's own context, and the run goes on.
func TestSubAgentAsksAHuman(t *testing.T) {
	sc := rules(t,
		planRule(`[{"id":"r","type":"research","description":"find the facts"}]`),
		`{"system_match":"FATHOM-ROLE: researcher","tool_match":"blue","response":`+quote(`{"status":"completed","summary":"the human chose blue"}`)+`}`,
		`{"system_match":"FATHOM-ROLE: researcher","tool_calls":[{"name":"ask_human","arguments":"{\"question\":\"Which color?\",\"options\":[\"red\",\"blue\"]}"}]}`,
	)
	h := startHarness(t, harnessOpts{script: sc, cfg: subAgentTools(map[string][]string{"researcher": {"ask_human"}})})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	var st *messages.SessionState
	testenv.Eventually(t, 10*time.Second, func() bool {
		r, err := h.state("s1")
		st = r.GetState()
		return err == nil && st.GetStatus() == messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN
	}, "session never waited for a human")
	req := st.GetAwaiting()[0]
	if req.GetSubAgentId() != "researcher-1" || req.GetQuestion() != "Which color?" || req.GetRequestId() != "s1/researcher-1/tool-1" {
		t.Fatalf("request %v", req)
	}
	g := h.node.Session("s1")
	if _, err := g.ProvideInput(&messages.ProvideInputRequest{CommandId: "i1", StepId: "r", Input: "green"}, call()); !sessiongrain.IsInvalidArgument(err) {
		t.Fatalf("an answer that is not an option: err = %v, want INVALID_ARGUMENT", err)
	}
	if _, err := g.ProvideInput(&messages.ProvideInputRequest{CommandId: "i2", StepId: "r", Input: "blue"}, call()); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "s1", 20*time.Second)
	mustComplete(t, evs)
	results := ofType(evs, "tool_result")
	if len(results) != 1 || results[0].GetToolResult().GetSubAgentId() != "researcher-1" || results[0].GetToolResult().GetResult() != `"blue"` {
		t.Fatalf("tool results %v", results)
	}
	if r := completedResult(evs, "researcher-1"); r.GetSummary() != "the human chose blue" {
		t.Fatalf("hand-off %v", r)
	}
}

// TestBlockedHandoffAsksAHuman: a sub-agent that hands off "blocked" makes the
// orchestrator ask a human (kind handoff); the answer resumes the same sub-agent with it
// in its brief. Without an answer by the step's deadline the plan goes on with the
// blocked hand-off.
func TestBlockedHandoffAsksAHuman(t *testing.T) {
	for _, answered := range []bool{true, false} {
		name := map[bool]string{true: "answered", false: "timeout"}[answered]
		t.Run(name, func(t *testing.T) {
			timeout := 60000
			if !answered {
				timeout = 300
			}
			sc := rules(t,
				planRule(fmt.Sprintf(`[{"id":"r","type":"research","description":"find the facts","interrupt_timeout_ms":%d}]`, timeout)),
				`{"system_match":"FATHOM-ROLE: researcher","context_match":"staging","response":`+quote(`{"status":"completed","summary":"used staging"}`)+`}`,
				`{"system_match":"FATHOM-ROLE: researcher","response":`+quote(`{"status":"blocked","summary":"no access","blockers":["which server?"]}`)+`}`,
			)
			h := startHarness(t, harnessOpts{script: sc})
			if _, err := h.start("s1", "c1", "goal"); err != nil {
				t.Fatal(err)
			}
			if answered {
				var st *messages.SessionState
				testenv.Eventually(t, 10*time.Second, func() bool {
					r, err := h.state("s1")
					st = r.GetState()
					return err == nil && st.GetStatus() == messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN
				}, "session never asked a human")
				if req := st.GetAwaiting()[0]; req.GetKind() != "handoff" || !strings.Contains(req.GetQuestion(), "which server?") {
					t.Fatalf("request %v", req)
				}
				if _, err := h.node.Session("s1").ProvideInput(&messages.ProvideInputRequest{CommandId: "i1", StepId: "r", Input: "use staging"}, call()); err != nil {
					t.Fatal(err)
				}
			}
			evs := waitTerminal(t, h.j, "s1", 20*time.Second)
			mustComplete(t, evs)
			done := ofType(evs, "subagent_completed")
			if done[0].GetSubagentCompleted().GetAction() != "ask_human" {
				t.Fatalf("first hand-off action %v", done[0])
			}
			out := ofType(evs, "step_completed")[0].GetStepCompleted().GetOutput()
			if answered {
				started := ofType(evs, "subagent_started")
				if len(started) != 2 || !started[1].GetSubagentStarted().GetResumed() || !strings.Contains(started[1].GetSubagentStarted().GetTask(), "A human answered: \"use staging\"") ||
					!strings.Contains(out, "used staging") {
					t.Fatalf("resumed run %v, output %q", started, out)
				}
				return
			}
			if r := ofType(evs, "hitl_received")[0].GetHitlReceived(); r.GetBy() != "timeout" || !strings.Contains(out, "blocked") {
				t.Fatalf("hitl_received %v, output %q", r, out)
			}
		})
	}
}

// TestToolBreakpointHoldsASubAgentsCall: a breakpoint before a tool stops the session
// when a sub-agent asks for that tool; the call does not run until Resume, then the
// sub-agent finishes.
func TestToolBreakpointHoldsASubAgentsCall(t *testing.T) {
	ex := &executions{}
	sc := rules(t,
		`{"system_match":"FATHOM-PHASE: plan","delay_ms":300,"response":`+quote(`{"steps":[{"id":"r","type":"research","description":"find the facts"}]}`)+`}`,
		`{"system_match":"FATHOM-ROLE: researcher","tool_match":"value of","response":`+quote(`{"status":"completed","summary":"looked it up"}`)+`}`,
		`{"system_match":"FATHOM-ROLE: researcher","tool_calls":[{"name":"lookup","arguments":"{\"key\":\"k\"}"}]}`,
	)
	h := startHarness(t, harnessOpts{script: sc, tools: testToolsWith(t, ex, nil), cfg: subAgentTools(map[string][]string{"researcher": {"lookup"}})})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	g := h.node.Session("s1")
	if _, err := g.SetBreakpoint(&messages.SetBreakpointRequest{CommandId: "b1", Breakpoint: &messages.Breakpoint{Id: "before-lookup", Tool: "lookup"}}, call()); err != nil {
		t.Fatal(err)
	}
	st := waitInterrupted(t, h, "s1")
	if it := st.GetInterrupt(); it.GetReason() != "tool" || it.GetStepId() != "r" || len(st.GetSubAgents()["researcher-1"].GetPendingTools()) != 1 {
		t.Fatalf("interrupt %v, sub-agent %v", it, st.GetSubAgents()["researcher-1"])
	}
	noToolStarted(t, h, "s1", "researcher-1")
	if n := ex.get("s1/researcher-1/tool-1"); n != 0 {
		t.Fatalf("the held call ran %d times before Resume", n)
	}
	if _, err := g.Resume(&messages.ResumeRequest{CommandId: "r1"}, call()); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "s1", 20*time.Second)
	mustComplete(t, evs)
	if n := ex.get("s1/researcher-1/tool-1"); n != 1 {
		t.Fatalf("the call ran %d times after Resume, want 1", n)
	}
}

// TestPlanReusesASubAgentInALaterStep: a plan step naming an earlier sub-agent in
// sub_agent_id continues that sub-agent's context (same id, resumed, its first run's
// messages in its next call) instead of starting a fresh one.
func TestPlanReusesASubAgentInALaterStep(t *testing.T) {
	sc := rules(t,
		planRule(`[{"id":"a","type":"research","description":"find the facts"},`+
			`{"id":"w","type":"write","description":"draft it","dependencies":["a"]},`+
			`{"id":"c","type":"research","description":"check the draft against your facts","dependencies":["w"],"sub_agent_id":"researcher-1"}]`),
		`{"system_match":"FATHOM-ROLE: researcher","response":`+quote(`{"status":"completed","summary":"researched"}`)+`}`,
		`{"system_match":"FATHOM-ROLE: writer","response":`+quote(`{"status":"completed","summary":"drafted"}`)+`}`,
		`{"system_match":"FATHOM-PHASE: synthesize","response":"closing"}`,
	)
	h := startHarness(t, harnessOpts{script: sc})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "s1", 20*time.Second)
	mustComplete(t, evs)
	if p := ofType(evs, "plan_created")[0].GetPlanCreated().GetSteps()[2]; p.GetSubAgentId() != "researcher-1" {
		t.Fatalf("plan step c %v: sub_agent_id not read", p)
	}
	var c *messages.SubagentStarted
	for _, ev := range ofType(evs, "subagent_started") {
		if s := ev.GetSubagentStarted(); s.GetStepId() == "c" {
			c = s
		}
	}
	if c.GetSubAgentId() != "researcher-1" || !c.GetResumed() {
		t.Fatalf("step c ran in %q (resumed %v), want researcher-1 resumed", c.GetSubAgentId(), c.GetResumed())
	}
	var second *messages.LlmResponded
	for _, ev := range ofType(evs, "llm_responded") {
		if r := ev.GetLlmResponded(); r.GetCallId() == "researcher-1/llm-2" {
			second = r
		}
	}
	if second.GetStepId() != "c" || second.GetContext().GetHistoryCount() != 3 { // a's brief, a's hand-off, c's brief
		t.Fatalf("researcher-1's call for step c: %v", second)
	}
}
