package session_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/messages"
)

// replanRule answers the orchestrator's re-plan call with steps when the re-plan brief
// matches context (a regular expression over the conversation).
func replanRule(context, steps string) string {
	return `{"system_match":"FATHOM-PHASE: replan","context_match":` + quote(context) + `,"response":` + quote(`{"steps":`+steps+`}`) + `}`
}

// researcherRules: the researcher hands off completed when its brief mentions the
// archive, and failed otherwise.
func researcherRules() []string {
	return []string{
		`{"system_match":"FATHOM-ROLE: researcher","context_match":"archive","response":` + quote(`{"status":"completed","summary":"found in the archive"}`) + `}`,
		`{"system_match":"FATHOM-ROLE: researcher","response":` + quote(`{"status":"failed","summary":"no sources","blockers":["the journal is paywalled"],"recommendations":["try another source"]}`) + `}`,
	}
}

// index returns the position of the first event in evs matching ok, or -1.
func index(evs []*messages.Event, ok func(*messages.Event) bool) int {
	for i, ev := range evs {
		if ok(ev) {
			return i
		}
	}
	return -1
}

// TestFailedStepIsReplanned: a sub-agent's step fails on every attempt; the orchestrator
// re-plans the remaining work (asked with the failed hand-off and the pending steps),
// records plan_revised, runs the new steps in new sub-agents, and the session completes
// with a closing summary that covers them.
func TestFailedStepIsReplanned(t *testing.T) {
	sc := rules(t, append(researcherRules(),
		planRule(`[{"id":"r","type":"research","description":"find the facts in the journal"},`+
			`{"id":"w","type":"write","description":"draft it","dependencies":["r"]}]`),
		replanRule(`Failed step[\s\S]*- r \(research\)[\s\S]*no sources[\s\S]*Blockers: the journal is paywalled[\s\S]*Pending steps[\s\S]*- w \(write\): draft it`,
			`[{"id":"r2","type":"research","description":"find the facts in the archive","dependencies":[]},`+
				`{"id":"w2","type":"write","description":"draft it from the archive notes","dependencies":["r2"]}]`),
		`{"system_match":"FATHOM-ROLE: writer","response":`+quote(`{"status":"completed","summary":"drafted"}`)+`}`,
		`{"system_match":"FATHOM-PHASE: synthesize","context_match":"r2 \\(research\\)[\\s\\S]*found in the archive[\\s\\S]*w2 \\(write\\)[\\s\\S]*drafted[\\s\\S]*revised 1 time","response":"Closing: the archive had it; the draft is done."}`,
	)...)
	h := startHarness(t, harnessOpts{script: sc})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "s1", 30*time.Second)
	mustComplete(t, evs)

	// Every attempt of r failed in researcher-1: two retries, then the re-plan.
	var actions []string
	for _, ev := range ofType(evs, "subagent_completed") {
		actions = append(actions, ev.GetSubagentCompleted().GetSubAgentId()+":"+ev.GetSubagentCompleted().GetAction())
	}
	if got := strings.Join(actions, ","); got != "researcher-1:retry,researcher-1:retry,researcher-1:replan,researcher-2:continue,writer-1:continue" {
		t.Fatalf("hand-off actions %s", got)
	}
	// In order: the re-plan decision, r's final step_failed, the re-plan call, its
	// answer, plan_revised, then the new step in a new sub-agent.
	decided := index(evs, func(ev *messages.Event) bool { return ev.GetSubagentCompleted().GetAction() == "replan" })
	want := []struct {
		what string
		ok   func(*messages.Event) bool
	}{
		{"step_failed r (final)", func(ev *messages.Event) bool {
			f := ev.GetStepFailed()
			return f.GetStepId() == "r" && f.GetAttempt() == 3 && !f.GetRetryable()
		}},
		{"llm_requested replan-1", func(ev *messages.Event) bool {
			r := ev.GetLlmRequested()
			return r.GetCallId() == "replan-1" && r.GetPurpose() == "replan" && r.GetStepId() == "r"
		}},
		{"llm_responded replan-1", func(ev *messages.Event) bool { return ev.GetLlmResponded().GetCallId() == "replan-1" }},
		{"plan_revised", func(ev *messages.Event) bool { return ev.GetPlanRevised() != nil }},
		{"step_started r2", func(ev *messages.Event) bool { return ev.GetStepStarted().GetStepId() == "r2" }},
		{"subagent_started researcher-2", func(ev *messages.Event) bool {
			s := ev.GetSubagentStarted()
			return s.GetSubAgentId() == "researcher-2" && s.GetStepId() == "r2" && !s.GetResumed()
		}},
	}
	for i, w := range want {
		if at := index(evs, w.ok); at != decided+1+i {
			t.Fatalf("%s at event %d, want %d (right after the re-plan decision at %d)", w.what, at, decided+1+i, decided)
		}
	}
	r := ofType(evs, "plan_revised")[0].GetPlanRevised()
	if r.GetPlanId() != "plan-2" || r.GetRevision() != 1 || r.GetFailedStepId() != "r" || strings.Join(r.GetReplacedStepIds(), ",") != "r,w" ||
		len(r.GetSteps()) != 2 || !strings.Contains(r.GetReason(), "no sources") {
		t.Fatalf("plan_revised %v", r)
	}
	if got := evs[len(evs)-1].GetSessionCompleted().GetResult(); got != "Closing: the archive had it; the draft is done." {
		t.Fatalf("result %q: the closing summary did not cover the new steps", got)
	}

	st, err := h.state("s1")
	if err != nil {
		t.Fatal(err)
	}
	s := st.GetState()
	var steps []string
	for _, step := range s.GetSteps() {
		steps = append(steps, step.GetStep().GetId()+":"+step.GetStatus().String())
	}
	if got := strings.Join(steps, ","); got != "r2:STEP_STATUS_COMPLETED,w2:STEP_STATUS_COMPLETED" || s.GetPlanId() != "plan-2" ||
		s.GetReplans() != 1 || strings.Join(s.GetRetiredStepIds(), ",") != "r" {
		t.Fatalf("state: steps %s, plan %s, replans %d, retired %v", got, s.GetPlanId(), s.GetReplans(), s.GetRetiredStepIds())
	}
	// Time travel addresses the revised list: step 1 is r2.
	tl, err := h.node.Session("s1").Timeline(&messages.TimelineRequest{}, call())
	if err != nil || len(tl.GetEntries()) != 2 || tl.GetEntries()[0].GetStepId() != "r2" {
		t.Fatalf("timeline %v, %v", tl, err)
	}
	at1, err := h.node.Session("s1").StateAt(&messages.StateAtRequest{StepIndex: 1}, call())
	if err != nil || at1.GetState().GetSteps()[0].GetStep().GetId() != "r2" || at1.GetState().GetSteps()[0].GetStatus() != messages.StepStatus_STEP_STATUS_COMPLETED {
		t.Fatalf("state at step 1: %v, %v", at1.GetState().GetSteps(), err)
	}
}

// TestReplanKeepsRunningWorkAndForks: a step fails while an independent one is still
// running; the running sub-agent goes on during the re-plan, nothing new starts until
// plan_revised, the kept step stays (the new steps depend on it), and a fork at the kept
// step (which ended before the revision, at another index) continues to completion.
func TestReplanKeepsRunningWorkAndForks(t *testing.T) {
	sc := rules(t, append(researcherRules(),
		planRule(`[{"id":"r","type":"research","description":"find the facts in the journal","dependencies":[]},`+
			`{"id":"c","type":"code","description":"compute it","dependencies":[]},`+
			`{"id":"w","type":"write","description":"draft it","dependencies":["r","c"]}]`),
		// The re-plan answer comes late, so c finishes while it is in flight.
		`{"system_match":"FATHOM-PHASE: replan","delay_ms":1000,"response":`+
			quote(`{"steps":[{"id":"r2","type":"research","description":"find the facts in the archive","dependencies":[]},`+
				`{"id":"w2","type":"write","description":"draft it","dependencies":["r2","c"]}]}`)+`}`,
		`{"system_match":"FATHOM-ROLE: coder","delay_ms":200,"response":`+quote(`{"status":"completed","summary":"computed"}`)+`}`,
		`{"system_match":"FATHOM-ROLE: writer","context_match":"computed","response":`+quote(`{"status":"completed","summary":"drafted"}`)+`}`,
		`{"system_match":"FATHOM-PHASE: synthesize","response":"Closing."}`,
	)...)
	h := startHarness(t, harnessOpts{script: sc, cfg: func(c *session.Config) { c.StepAttempts = 1 }})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "s1", 30*time.Second)
	mustComplete(t, evs)
	asked := index(evs, func(ev *messages.Event) bool { return ev.GetLlmRequested().GetPurpose() == "replan" })
	revised := index(evs, func(ev *messages.Event) bool { return ev.GetPlanRevised() != nil })
	cDone := index(evs, func(ev *messages.Event) bool { return ev.GetStepCompleted().GetStepId() == "c" })
	if asked < 0 || !(asked < cDone && cDone < revised) {
		t.Fatalf("re-plan asked at %d, c completed at %d, plan revised at %d: c should finish during the re-plan", asked, cDone, revised)
	}
	for _, ev := range evs[asked:revised] {
		if ev.GetStepStarted() != nil || ev.GetSubagentStarted() != nil {
			t.Fatalf("%s at seq %d while the re-plan was in flight", ev.Type(), ev.GetSeq())
		}
	}
	if r := evs[revised].GetPlanRevised(); strings.Join(r.GetReplacedStepIds(), ",") != "r,w" {
		t.Fatalf("plan_revised replaced %v, want r,w", r.GetReplacedStepIds())
	}
	tl, err := h.node.Session("s1").Timeline(&messages.TimelineRequest{}, call())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range tl.GetEntries() {
		ids = append(ids, e.GetStepId())
	}
	if strings.Join(ids, ",") != "c,r2,w2" {
		t.Fatalf("timeline %v, want c,r2,w2 (kept first, then the new steps)", ids)
	}

	// Step 1 of the revised list is c; it ended at index 1 of the first plan.
	at1, err := h.node.Session("s1").StateAt(&messages.StateAtRequest{StepIndex: 1}, call())
	if err != nil {
		t.Fatal(err)
	}
	if got := at1.GetState().GetSteps(); len(got) != 3 || got[1].GetStep().GetId() != "c" || got[1].GetStatus() != messages.StepStatus_STEP_STATUS_COMPLETED {
		t.Fatalf("state at step 1 (the list as it was then): %v", got)
	}
	if _, err := h.node.Session("fork").Fork(&messages.ForkRequest{CommandId: "f1", SourceSessionId: "s1", StepIndex: 1}, call()); err != nil {
		t.Fatal(err)
	}
	forkEvs := waitTerminal(t, h.j, "fork", 30*time.Second)
	mustComplete(t, forkEvs)
	if n := len(ofType(forkEvs, "plan_revised")); n != 1 {
		t.Fatalf("the fork revised its plan %d times, want 1", n)
	}
}

// TestReplanLimitReached: the re-planned step fails too and no re-plan is left: the
// session fails, saying so.
func TestReplanLimitReached(t *testing.T) {
	sc := rules(t,
		planRule(`[{"id":"r","type":"research","description":"find the facts"}]`),
		replanRule(`Failed step`, `[{"id":"r2","type":"research","description":"find the facts again"}]`),
		`{"system_match":"FATHOM-ROLE: researcher","response":`+quote(`{"status":"failed","summary":"no sources"}`)+`}`,
	)
	h := startHarness(t, harnessOpts{script: sc, cfg: func(c *session.Config) { c.StepAttempts, c.MaxReplans = 1, 1 }})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "s1", 30*time.Second)
	last := evs[len(evs)-1].GetSessionFailed()
	if last == nil || last.GetError() != "step r2: sub-agent researcher-2: failed: no sources (attempt 1 of 1); no re-plan is left (max_replans 1, 1 made)" {
		t.Fatalf("last event %v", evs[len(evs)-1])
	}
	if n := len(ofType(evs, "plan_revised")); n != 1 {
		t.Fatalf("%d plan_revised, want 1", n)
	}
	if a := ofType(evs, "subagent_completed")[1].GetSubagentCompleted().GetAction(); a != "fail" {
		t.Fatalf("second hand-off action %s, want fail", a)
	}
}

// TestReplannerReturnsGarbage: a re-planner answer that is no plan is asked again once
// with the error; a second one fails the session with the reason.
func TestReplannerReturnsGarbage(t *testing.T) {
	sc := rules(t,
		planRule(`[{"id":"r","type":"research","description":"find the facts"}]`),
		`{"system_match":"FATHOM-PHASE: replan","response":"I would rather not."}`,
		`{"system_match":"FATHOM-ROLE: researcher","response":`+quote(`{"status":"failed","summary":"no sources"}`)+`}`,
	)
	h := startHarness(t, harnessOpts{script: sc, cfg: func(c *session.Config) { c.StepAttempts = 1 }})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "s1", 30*time.Second)
	last := evs[len(evs)-1].GetSessionFailed()
	if last == nil || !strings.HasPrefix(last.GetError(), "re-planner returned an unusable plan: no JSON object in the answer") {
		t.Fatalf("last event %v", evs[len(evs)-1])
	}
	if evs[len(evs)-2].GetLlmResponded().GetCallId() != "replan-2" || len(ofType(evs, "plan_revised")) != 0 ||
		len(ofType(evs, "plan_failed")) != 1 || evs[len(evs)-3].GetLlmRequested().GetRepromptError() != "no JSON object in the answer" {
		t.Fatalf("events %v", evs[len(evs)-5:])
	}
}

// TestConfigurationErrorFailsAtOnce: a sub-agent's prompt template that does not render
// with the node's configuration for this step (the override indexes a fourth tool for the
// step "check them"; the reviewer is configured with one, and the start-up render with
// sample steps does not reach it) fails every attempt the same way: the session fails at
// once with the reason, without retrying the step or re-planning.
func TestConfigurationErrorFailsAtOnce(t *testing.T) {
	dir := t.TempDir()
	tmpl := "FATHOM-ROLE: reviewer\nYou review the work.{{if eq .Step.Description \"check them\"}} Your fourth tool is {{index .Tools 3}}.{{end}}\n"
	if err := os.WriteFile(filepath.Join(dir, "reviewer.md.tmpl"), []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	sc := rules(t,
		planRule(`[{"id":"a","type":"research","description":"find the facts"},{"id":"v","type":"review","description":"check them","dependencies":["a"]}]`),
		`{"system_match":"FATHOM-ROLE: researcher","response":`+quote(`{"status":"completed","summary":"found"}`)+`}`,
		`{"system_match":"FATHOM-PHASE: replan","response":`+quote(`{"steps":[{"id":"v2","type":"review","description":"check them again"}]}`)+`}`,
	)
	h := startHarness(t, harnessOpts{script: sc, promptsDir: dir, cfg: subAgentTools(map[string][]string{"reviewer": {"read_artifact"}})})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "s1", 30*time.Second)
	last := evs[len(evs)-1].GetSessionFailed()
	if last == nil || !strings.Contains(last.GetError(), "configuration error") || !strings.Contains(last.GetError(), "reviewer.md.tmpl") {
		t.Fatalf("last event %v", evs[len(evs)-1])
	}
	var reviewers int
	for _, ev := range ofType(evs, "subagent_started") {
		if ev.GetSubagentStarted().GetAgentType() == "reviewer" {
			reviewers++
		}
	}
	done := ofType(evs, "subagent_completed")
	if reviewers != 1 || len(ofType(evs, "plan_revised")) != 0 || len(ofType(evs, "step_failed")) != 1 ||
		done[len(done)-1].GetSubagentCompleted().GetAction() != "fail" {
		t.Fatalf("%d reviewer runs, %d re-plans, %d step failures, %d events: want one run failing the session at once",
			reviewers, len(ofType(evs, "plan_revised")), len(ofType(evs, "step_failed")), len(evs))
	}
}

// TestUnconfiguredToolFailsAtOnce: a coder whose code_execute call meets a node without
// a sandbox (a configuration error) and hands off "failed" fails the session at once
// with the reason: another attempt or a re-planned step would meet the same node.
func TestUnconfiguredToolFailsAtOnce(t *testing.T) {
	sc := rules(t,
		planRule(`[{"id":"c","type":"code","description":"compute it"}]`),
		`{"system_match":"FATHOM-ROLE: coder","tool_match":"code_execute","response":`+quote(`{"status":"failed","summary":"could not run the program"}`)+`}`,
		`{"system_match":"FATHOM-ROLE: coder","tool_calls":[{"name":"code_execute","arguments":"{\"language\":\"python\",\"code\":\"print(1)\"}"}]}`,
		`{"system_match":"FATHOM-PHASE: replan","response":`+quote(`{"steps":[{"id":"c2","type":"code","description":"compute it again"}]}`)+`}`,
	)
	h := startHarness(t, harnessOpts{script: sc})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "s1", 30*time.Second)
	last := evs[len(evs)-1].GetSessionFailed()
	if last == nil || !strings.Contains(last.GetError(), "configuration error") || !strings.Contains(last.GetError(), "tool code_execute") {
		t.Fatalf("last event %v", evs[len(evs)-1])
	}
	var tr *messages.ToolResult
	for _, ev := range ofType(evs, "tool_result") {
		tr = ev.GetToolResult()
	}
	if !tr.GetError().GetConfig() || len(ofType(evs, "subagent_started")) != 1 || len(ofType(evs, "plan_revised")) != 0 || len(ofType(evs, "step_failed")) != 1 {
		t.Fatalf("tool result %v; %d runs, %d re-plans, %d step failures: want one run failing the session at once",
			tr, len(ofType(evs, "subagent_started")), len(ofType(evs, "plan_revised")), len(ofType(evs, "step_failed")))
	}
}
