package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/agent"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
)

// rawScript parses a mock script given whole.
func rawScript(t testing.TB, js string) *mock.Script {
	t.Helper()
	s, err := mock.ParseScript([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return &s
}

// waitStatus waits until session id has status and returns its state.
func waitStatus(t *testing.T, h *harness, id string, status messages.SessionStatus) *messages.SessionState {
	t.Helper()
	var st *messages.SessionState
	testenv.Eventually(t, 15*time.Second, func() bool {
		r, err := h.state(id)
		st = r.GetState()
		return err == nil && st.GetStatus() == status
	}, "session %s never reached %s", id, status)
	return st
}

// humanStepScript plans a human_input step "ask" (with an input schema and the given
// extra JSON fields) then a research step "use" whose answer shows what it saw.
func humanStepScript(t testing.TB, extra string) *mock.Script {
	return rawScript(t, `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"ask\",\"type\":\"human_input\",\"description\":\"How many copies?\",`+
		`\"input_schema\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":1}},\"required\":[\"n\"]}`+extra+`},`+
		`{\"id\":\"use\",\"type\":\"custom\",\"description\":\"print them\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","context_match":"\"n\":3","response":"printing three"},
		{"system_match":"FATHOM-ROLE: executor","response":"printing none"}]}`)
}

func TestHumanInputStepValidatesAndContinues(t *testing.T) {
	h := startHarness(t, harnessOpts{script: humanStepScript(t, "")})
	if _, err := h.start("hi", "c1", "print copies"); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, h, "hi", messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN)
	aw := st.GetAwaiting()
	if len(aw) != 1 || aw[0].GetRequestId() != "ask" || aw[0].GetKind() != "step" || aw[0].GetQuestion() != "How many copies?" ||
		!strings.Contains(aw[0].GetInputSchema(), `"minimum":1`) || aw[0].GetDefaultAction() != "continue" ||
		time.Until(time.Unix(0, aw[0].GetDeadlineUnixNano())) < 4*time.Minute {
		t.Fatalf("awaiting %v", aw)
	}
	if st.GetPending() != nil || st.GetSteps()[0].GetStatus() != messages.StepStatus_STEP_STATUS_IN_PROGRESS {
		t.Fatalf("state while awaiting: %v", st)
	}
	g := h.node.Session("hi")
	bad := []struct{ input, want string }{
		{`{"n":0}`, "/n"},
		{`{"m":3}`, "missing property 'n'"},
		{`three`, "does not match its input schema"}, // a bare string is a JSON string, not an object
	}
	for i, c := range bad {
		_, err := g.ProvideInput(&messages.ProvideInputRequest{CommandId: "bad" + c.input, StepId: "ask", Input: c.input}, call())
		if !sessiongrain.IsInvalidArgument(err) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("bad input %d %s: err = %v, want INVALID_ARGUMENT mentioning %q", i, c.input, err, c.want)
		}
	}
	if _, err := g.ProvideInput(&messages.ProvideInputRequest{CommandId: "other", StepId: "use", Input: "1"}, call()); !sessiongrain.IsFailedPrecondition(err) {
		t.Fatalf("input for a step that asks nothing: err = %v, want FAILED_PRECONDITION", err)
	}
	r, err := h.state("hi")
	if err != nil || r.GetState().GetSeq() != st.GetSeq() || len(r.GetState().GetAwaiting()) != 1 {
		t.Fatalf("refused answers changed the session: %v (seq %d, was %d)", err, r.GetState().GetSeq(), st.GetSeq())
	}
	if _, err := g.ProvideInput(&messages.ProvideInputRequest{CommandId: "good", StepId: "ask", Input: ` {"n": 3} `}, call()); err != nil {
		t.Fatal(err)
	}
	if resp, err := g.ProvideInput(&messages.ProvideInputRequest{CommandId: "good", StepId: "ask", Input: `{"n":3}`}, call()); err != nil || !resp.GetDuplicate() {
		t.Fatalf("retried input: %v, %v; want a duplicate", resp, err)
	}
	evs := waitTerminal(t, h.j, "hi", 20*time.Second)
	mustComplete(t, evs)
	rec := ofType(evs, "hitl_received")
	if len(rec) != 1 || rec[0].GetHitlReceived().GetInput() != `{"n":3}` || rec[0].GetHitlReceived().GetBy() != "human" || rec[0].GetCommandId() != "good" {
		t.Fatalf("hitl_received %v", rec)
	}
	done := ofType(evs, "step_completed")[0].GetStepCompleted()
	if done.GetStepId() != "ask" || done.GetOutput() != `{"n":3}` || done.GetOutputTokens() == 0 {
		t.Fatalf("step_completed %v", done)
	}
	if res := evs[len(evs)-1].GetSessionCompleted().GetResult(); res != "printing three" { // the answer is in the next step's history
		t.Fatalf("result %q", res)
	}
	if count(evs, "llm_requested") != 2 { // planner + step "use": the human step asks no model
		t.Fatalf("%d llm calls", count(evs, "llm_requested"))
	}
}

// TestHumanInputDeadlineAcrossRestart: the request's deadline is state, so its default
// action is taken on a new node after the first stopped while waiting.
func TestHumanInputDeadlineAcrossRestart(t *testing.T) {
	for _, action := range []string{"continue", "fail"} {
		t.Run(action, func(t *testing.T) {
			j := openJournal(t)
			t.Cleanup(func() { _ = j.Close() })
			sc := humanStepScript(t, `,\"interrupt_timeout_ms\":1500,\"default_action\":\"`+action+`\"`)
			h := startHarness(t, harnessOpts{journal: j, script: sc})
			if _, err := h.start("d", "c1", "goal"); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, h, "d", messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := h.node.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			h2 := startHarness(t, harnessOpts{journal: j, script: sc})
			if _, err := h2.state("d"); err != nil { // activates the grain on the new node
				t.Fatal(err)
			}
			evs := waitTerminal(t, j, "d", 20*time.Second)
			rec := ofType(evs, "hitl_received")
			if len(rec) != 1 || rec[0].GetHitlReceived().GetBy() != "timeout" || rec[0].GetHitlReceived().GetInput() != "" {
				t.Fatalf("hitl_received %v", rec)
			}
			switch action {
			case "continue":
				mustComplete(t, evs)
				if res := evs[len(evs)-1].GetSessionCompleted().GetResult(); res != "printing none" {
					t.Fatalf("result %q", res)
				}
			default:
				last := evs[len(evs)-1].GetSessionFailed()
				if last == nil || !strings.Contains(last.GetError(), "no human input") || count(evs, "step_failed") != 1 {
					t.Fatalf("session ended with %v", evs[len(evs)-1])
				}
			}
		})
	}
}

// askScript plans one research step (extra: JSON fields of the step) whose model asks
// a human with ask_human, then answers with what the tool returned.
func askScript(t testing.TB, extra string) *mock.Script {
	return rawScript(t, `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s\",\"type\":\"custom\",\"description\":\"pick a colour\"`+extra+`}]}"},
		{"tool_match":".","response":"the human said: {{.Tool}}"},
		{"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"ask_human","arguments":"{\"question\":\"Which colour?\",\"options\":[\"red\",\"blue\"]}"},{"name":"lookup","arguments":"{\"key\":\"k\"}"}]}]}`)
}

func TestAskHumanIsAnsweredByTheHuman(t *testing.T) {
	ex := &executions{}
	h := startHarness(t, harnessOpts{script: askScript(t, ""), tools: testToolsWith(t, ex, nil)})
	if _, err := h.start("ask", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, h, "ask", messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN)
	aw := st.GetAwaiting()
	if len(aw) != 1 || aw[0].GetKind() != "tool" || aw[0].GetRequestId() != "ask/s/tool-1" || aw[0].GetQuestion() != "Which colour?" ||
		len(aw[0].GetOptions()) != 2 || aw[0].GetCallId() == "" || aw[0].GetStepId() != "s" {
		t.Fatalf("awaiting %v", aw)
	}
	// The other call of the turn runs; the ask_human call waits for its human.
	testenv.Eventually(t, 10*time.Second, func() bool { return ex.get("ask/s/tool-2") == 1 }, "lookup never ran")
	g := h.node.Session("ask")
	if _, err := g.ProvideInput(&messages.ProvideInputRequest{CommandId: "c2", StepId: "s", Input: "green"}, call()); !sessiongrain.IsInvalidArgument(err) || !strings.Contains(err.Error(), "one of the options") {
		t.Fatalf("answer outside the options: err = %v", err)
	}
	if _, err := g.ProvideInput(&messages.ProvideInputRequest{CommandId: "c3", StepId: "s", RequestId: "nope", Input: "blue"}, call()); !sessiongrain.IsFailedPrecondition(err) {
		t.Fatalf("unknown request: err = %v, want FAILED_PRECONDITION", err)
	}
	if _, err := g.ProvideInput(&messages.ProvideInputRequest{CommandId: "c4", StepId: "s", RequestId: "ask/s/tool-1", Input: "blue"}, call()); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "ask", 20*time.Second)
	mustComplete(t, evs)
	var askResult *messages.ToolResult
	for _, ev := range ofType(evs, "tool_result") {
		if r := ev.GetToolResult(); r.GetTool() == "ask_human" {
			askResult = r
		}
	}
	if askResult.GetResult() != `"blue"` || askResult.GetError() != nil || askResult.GetTokens() == 0 {
		t.Fatalf("ask_human result %v (it must be the answer, never a tool runner's)", askResult)
	}
	if count(evs, "hitl_requested") != 1 || count(evs, "hitl_received") != 1 || count(evs, "llm_requested") != 3 {
		t.Fatalf("events %d hitl_requested, %d hitl_received, %d llm_requested", count(evs, "hitl_requested"), count(evs, "hitl_received"), count(evs, "llm_requested"))
	}
}

func TestAskHumanTimeoutContinuesWithoutAnswer(t *testing.T) {
	h := startHarness(t, harnessOpts{script: askScript(t, `,\"interrupt_timeout_ms\":800`)})
	if _, err := h.start("to", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "to", 20*time.Second)
	mustComplete(t, evs)
	rec := ofType(evs, "hitl_received")
	if len(rec) != 1 || rec[0].GetHitlReceived().GetBy() != "timeout" {
		t.Fatalf("hitl_received %v", rec)
	}
	if res := evs[len(evs)-1].GetSessionCompleted().GetResult(); !strings.Contains(res, "No answer from a human within 800ms") {
		t.Fatalf("result %q", res)
	}
}

// TestPlanStepInterrupt: a step's own interrupt field stops the session like a
// breakpoint, with the step's timeout and default action.
func TestPlanStepInterrupt(t *testing.T) {
	sc := rawScript(t, `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"a\",\"type\":\"custom\",\"description\":\"one\",\"interrupt\":\"after\"},{\"id\":\"b\",\"type\":\"custom\",\"description\":\"two\",\"interrupt\":\"before\",\"interrupt_timeout_ms\":700,\"default_action\":\"fail\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","response":"done {{.Step}}"}]}`)
	h := startHarness(t, harnessOpts{script: sc})
	if _, err := h.start("pi", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	st := waitInterrupted(t, h, "pi")
	it := st.GetInterrupt()
	if it.GetReason() != "step" || it.GetPosition() != "after" || it.GetStepId() != "a" || it.GetBreakpointId() != "step:a" ||
		it.GetDefaultAction() != "continue" || time.Until(time.Unix(0, it.GetDeadlineUnixNano())) < 4*time.Minute {
		t.Fatalf("interrupt %v", it)
	}
	if _, err := h.node.Session("pi").Resume(&messages.ResumeRequest{CommandId: "c2"}, call()); err != nil {
		t.Fatal(err)
	}
	// Resuming after a starts b (its own "before" is for the same boundary), which runs;
	// so the session completes without a second interrupt.
	evs := waitTerminal(t, h.j, "pi", 20*time.Second)
	mustComplete(t, evs)
	if count(evs, "interrupt_triggered") != 1 {
		t.Fatalf("%d interrupts", count(evs, "interrupt_triggered"))
	}

	// With only the "before" interrupt of b, its 700 ms deadline fails the session. (One
	// cluster member at a time: two in one process race inside Proto.Actor's remoting.)
	stopNode(t, h)
	sc2 := rawScript(t, `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"a\",\"type\":\"custom\",\"description\":\"one\"},{\"id\":\"b\",\"type\":\"custom\",\"description\":\"two\",\"interrupt\":\"before\",\"interrupt_timeout_ms\":700,\"default_action\":\"fail\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","response":"done {{.Step}}"}]}`)
	h2 := startHarness(t, harnessOpts{script: sc2})
	if _, err := h2.start("pi2", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs = waitTerminal(t, h2.j, "pi2", 20*time.Second)
	last := evs[len(evs)-1].GetSessionFailed()
	if last == nil || !strings.Contains(last.GetError(), "interrupt before step b timed out") {
		t.Fatalf("session ended with %v", evs[len(evs)-1])
	}
}

// TestToolBreakpointHoldsTheCallUntilResume: a breakpoint on a tool stops the session
// before the call runs; Resume lets it run.
func TestToolBreakpointHoldsTheCallUntilResume(t *testing.T) {
	ex := &executions{}
	sc := rawScript(t, `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s\",\"type\":\"custom\",\"description\":\"find it\"}]}","delay_ms":300},
		{"tool_match":"value of","response":"found {{.Tool}}"},
		{"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"lookup","arguments":"{\"key\":\"k\"}"}]}]}`)
	h := startHarness(t, harnessOpts{script: sc, tools: testToolsWith(t, ex, nil)})
	if _, err := h.start("tb", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	g := h.node.Session("tb")
	if _, err := g.SetBreakpoint(&messages.SetBreakpointRequest{CommandId: "c2", Breakpoint: &messages.Breakpoint{Id: "x", Tool: "lookup", Position: "after"}}, call()); !sessiongrain.IsInvalidArgument(err) {
		t.Fatalf("tool breakpoint after: err = %v, want INVALID_ARGUMENT", err)
	}
	if _, err := g.SetBreakpoint(&messages.SetBreakpointRequest{CommandId: "c3", Breakpoint: &messages.Breakpoint{Id: "x", Tool: "lookup"}}, call()); err != nil {
		t.Fatal(err)
	}
	st := waitInterrupted(t, h, "tb")
	it := st.GetInterrupt()
	if it.GetReason() != "tool" || it.GetPosition() != "before" || it.GetStepId() != "s" || len(st.GetPendingTools()) != 1 {
		t.Fatalf("interrupted state: interrupt %v, pending %v", it, st.GetPendingTools())
	}
	noToolStarted(t, h, "tb", agent.Orchestrator)
	if n := ex.get("tb/s/tool-1"); n != 0 {
		t.Fatalf("held call ran %d times", n)
	}
	if _, err := g.Resume(&messages.ResumeRequest{CommandId: "c4", ModifiedStep: &messages.PlanStep{Id: "s", Description: "x"}}, call()); !sessiongrain.IsInvalidArgument(err) {
		t.Fatalf("modified step at a tool interrupt: err = %v, want INVALID_ARGUMENT", err)
	}
	if _, err := g.Resume(&messages.ResumeRequest{CommandId: "c5"}, call()); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "tb", 20*time.Second)
	mustComplete(t, evs)
	if ex.get("tb/s/tool-1") != 1 || evs[len(evs)-1].GetSessionCompleted().GetResult() != "found value of k" {
		t.Fatalf("after resume: ran %d times, result %v", ex.get("tb/s/tool-1"), evs[len(evs)-1])
	}
}
