package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/agent"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
)

// slowSteps plans research step "a" then write step "b"; each step answer takes 300 ms
// so a test can set breakpoints while step a runs.
func slowSteps(t *testing.T) *mock.Script {
	t.Helper()
	s, err := mock.ParseScript([]byte(`{"rules":[{"system_match":"FATHOM-PHASE: synthesize","response":"closing summary"},{"system_match":"FATHOM-PHASE: plan","response":"{\"steps\":[{\"id\":\"a\",\"type\":\"research\",\"description\":\"one\"},{\"id\":\"b\",\"type\":\"write\",\"description\":\"two\"}]}"},{"system_match":"FATHOM-ROLE: (executor|researcher|writer)","response":"done {{.Step}}","delay_ms":300}],"default":"?"}`))
	if err != nil {
		t.Fatal(err)
	}
	return &s
}

func call() cluster.GrainCallOption { return cluster.WithTimeout(10 * time.Second) }

// waitInterrupted waits until session id sits at an interrupt and returns the state.
func waitInterrupted(t *testing.T, h *harness, id string) *messages.SessionState {
	t.Helper()
	var st *messages.SessionState
	testenv.Eventually(t, 15*time.Second, func() bool {
		r, err := h.state(id)
		st = r.GetState()
		return err == nil && st.GetStatus() == messages.SessionStatus_SESSION_STATUS_INTERRUPTED
	}, "session %s never interrupted", id)
	return st
}

// noToolStarted fails the test unless the actor of agent agentID (agent.Orchestrator or
// a sub_agent_id) of session id has started none of its tool calls from the Work the
// grain sent it so far — a recorded fact, not a wait: the grain sends Work after every
// commit and before it answers a GetState (which settles its commit pipeline), so once
// waitInterrupted returned the interrupted state is queued for the actor; the actor
// answers agent.Running after every message queued before it, and it starts a tool call
// while it handles the Work. So a held call that was started is running then, or ran
// its tool and ended (the caller's count of runs shows that one).
func noToolStarted(t *testing.T, h *harness, id, agentID string) {
	t.Helper()
	sys := h.node.Cluster().System()
	// Local PIDs are partition-activator/{session}${n}/{agent actor}.
	var actors []string
	for _, bucket := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, pid := range bucket.Keys() {
			parts := strings.Split(pid, "/")
			if len(parts) == 3 && parts[0] == "partition-activator" && strings.HasPrefix(parts[1], id+"$") &&
				strings.HasPrefix(parts[2], agent.ActorName(agentID)+"$") {
				actors = append(actors, pid)
			}
		}
	}
	if len(actors) != 1 {
		t.Fatalf("agent actors of %q in session %s: %v, want one", agentID, id, actors)
	}
	res, err := sys.Root.RequestFuture(sys.NewLocalPID(actors[0]), &agent.Running{}, 10*time.Second).Result()
	runs, ok := res.(*agent.Runs)
	if !ok || err != nil {
		t.Fatalf("ask the agent actor %s what it runs: %v, %v", actors[0], res, err)
	}
	if len(runs.Tools) > 0 {
		t.Fatalf("the held call started: tool calls %v run", runs.Tools)
	}
}

func TestBreakpointBeforeStepAndResumeWithModifiedStep(t *testing.T) {
	h := startHarness(t, harnessOpts{script: slowSteps(t)})
	if _, err := h.start("bp", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	g := h.node.Session("bp")
	if _, err := g.SetBreakpoint(&messages.SetBreakpointRequest{CommandId: "c2", Breakpoint: &messages.Breakpoint{Id: "w", Position: "sideways"}}, call()); !sessiongrain.IsInvalidArgument(err) {
		t.Fatalf("bad position: err = %v, want INVALID_ARGUMENT", err)
	}
	if _, err := g.Resume(&messages.ResumeRequest{CommandId: "c2"}, call()); !sessiongrain.IsFailedPrecondition(err) {
		t.Fatalf("resume while running: err = %v, want FAILED_PRECONDITION", err)
	}
	if _, err := g.SetBreakpoint(&messages.SetBreakpointRequest{CommandId: "c3", Breakpoint: &messages.Breakpoint{Id: "w", StepType: "write"}}, call()); err != nil {
		t.Fatal(err)
	}
	if r, err := g.SetBreakpoint(&messages.SetBreakpointRequest{CommandId: "c3", Breakpoint: &messages.Breakpoint{Id: "w", StepType: "write"}}, call()); err != nil || !r.GetDuplicate() {
		t.Fatalf("repeated command: %v, %v; want a duplicate", r, err)
	}
	st := waitInterrupted(t, h, "bp")
	if it := st.GetInterrupt(); it.GetStepId() != "b" || it.GetPosition() != "before" || it.GetReason() != "breakpoint" ||
		st.GetSteps()[1].GetStatus() != messages.StepStatus_STEP_STATUS_PENDING || st.GetPending() != nil {
		t.Fatalf("interrupted state %v", st)
	}
	if _, err := g.Resume(&messages.ResumeRequest{CommandId: "c4", ModifiedStep: &messages.PlanStep{Id: "zzz", Description: "x"}}, call()); !sessiongrain.IsInvalidArgument(err) {
		t.Fatalf("modified step with another id: err = %v, want INVALID_ARGUMENT", err)
	}
	if _, err := g.Resume(&messages.ResumeRequest{CommandId: "c5", ModifiedStep: &messages.PlanStep{Id: "b", Description: "two, revised"}}, call()); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "bp", 20*time.Second)
	mustComplete(t, evs)
	if count(evs, "interrupt_triggered") != 1 || count(evs, "interrupt_resumed") != 1 || count(evs, "breakpoint_set") != 1 {
		t.Fatalf("events %v", evs)
	}
	for _, ev := range evs {
		if s := ev.GetStepStarted(); s != nil && s.GetStepId() == "b" && s.GetDescription() != "two, revised" {
			t.Fatalf("step b started as %v, not the modified step", s)
		}
		if r := ev.GetInterruptResumed(); r != nil && (r.GetBy() != "human" || r.GetAction() != "continue") {
			t.Fatalf("interrupt_resumed %v", r)
		}
	}
}

func TestPauseStopsAtTheNextStepBoundaryOnce(t *testing.T) {
	h := startHarness(t, harnessOpts{script: slowSteps(t)})
	if _, err := h.start("p", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	g := h.node.Session("p")
	if _, err := g.Pause(&messages.PauseRequest{CommandId: "c2"}, call()); err != nil {
		t.Fatal(err)
	}
	st := waitInterrupted(t, h, "p")
	if st.GetInterrupt().GetReason() != "pause" || len(st.GetBreakpoints()) != 0 {
		t.Fatalf("paused state %v", st)
	}
	if _, err := g.Resume(&messages.ResumeRequest{CommandId: "c3"}, call()); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "p", 20*time.Second)
	mustComplete(t, evs)
	if count(evs, "interrupt_triggered") != 1 { // the pause fired once, not at every step
		t.Fatalf("%d interrupts", count(evs, "interrupt_triggered"))
	}
}

// TestInterruptDeadlineTakesDefaultActionAcrossRestart: the deadline is state, so it
// fires on a new node after the first one stopped mid-interrupt.
func TestInterruptDeadlineTakesDefaultActionAcrossRestart(t *testing.T) {
	for _, action := range []string{"continue", "fail"} {
		t.Run(action, func(t *testing.T) {
			j := openJournal(t)
			t.Cleanup(func() { _ = j.Close() })
			h := startHarness(t, harnessOpts{journal: j, script: slowSteps(t)})
			if _, err := h.start("d", "c1", "goal"); err != nil {
				t.Fatal(err)
			}
			bp := &messages.Breakpoint{Id: "after-a", Position: "after", StepId: "a", TimeoutMs: 1500, DefaultAction: action}
			if _, err := h.node.Session("d").SetBreakpoint(&messages.SetBreakpointRequest{CommandId: "c2", Breakpoint: bp}, call()); err != nil {
				t.Fatal(err)
			}
			waitInterrupted(t, h, "d")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := h.node.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			h2 := startHarness(t, harnessOpts{journal: j, script: slowSteps(t)})
			if _, err := h2.state("d"); err != nil { // activates the grain on the new node
				t.Fatal(err)
			}
			evs := waitTerminal(t, j, "d", 20*time.Second)
			var resumed *messages.InterruptResumed
			for _, ev := range evs {
				if r := ev.GetInterruptResumed(); r != nil {
					resumed = r
				}
			}
			if resumed.GetBy() != "timeout" || resumed.GetAction() != action {
				t.Fatalf("interrupt_resumed %v", resumed)
			}
			last := evs[len(evs)-1]
			switch action {
			case "continue":
				mustComplete(t, evs)
			default:
				if last.GetSessionFailed() == nil || !strings.Contains(last.GetSessionFailed().GetError(), "timed out") {
					t.Fatalf("session ended with %v", last)
				}
			}
		})
	}
}

// TestResumeModifiedStepMergesIntoTheStep: a modified_step in the documented {id, type,
// description} shape changes those fields only; the step keeps its dependencies, so its
// sub-agent still gets the hand-off of the step it depends on.
func TestResumeModifiedStepMergesIntoTheStep(t *testing.T) {
	h := startHarness(t, harnessOpts{script: slowSteps(t)})
	if _, err := h.start("ms", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	g := h.node.Session("ms")
	if _, err := g.SetBreakpoint(&messages.SetBreakpointRequest{CommandId: "c2", Breakpoint: &messages.Breakpoint{Id: "w", StepId: "b"}}, call()); err != nil {
		t.Fatal(err)
	}
	st := waitInterrupted(t, h, "ms")
	if deps := st.GetSteps()[1].GetStep().GetDependencies(); len(deps) != 1 || deps[0] != "a" {
		t.Fatalf("step b depends on %v before the resume, want [a]", deps)
	}
	bad := []*messages.PlanStep{
		{Id: "b", Type: "dance"},
		{Id: "b", Interrupt: "sideways"},
		{Id: "b", Dependencies: []string{"nope"}},
		{Id: "b", Dependencies: []string{"b"}},
	}
	for i, m := range bad {
		if _, err := g.Resume(&messages.ResumeRequest{CommandId: "bad" + string(rune('0'+i)), ModifiedStep: m}, call()); !sessiongrain.IsInvalidArgument(err) {
			t.Fatalf("modified_step %v: err = %v, want INVALID_ARGUMENT", m, err)
		}
	}
	if _, err := g.Resume(&messages.ResumeRequest{CommandId: "c3", ModifiedStep: &messages.PlanStep{Id: "b", Type: "write", Description: "two, revised"}}, call()); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "ms", 20*time.Second)
	mustComplete(t, evs)
	var task string
	for _, ev := range evs {
		if s := ev.GetSubagentStarted(); s != nil && s.GetStepId() == "b" {
			task = s.GetTask()
		}
	}
	if !strings.Contains(task, "Task: two, revised") || !strings.Contains(task, "Hand-offs of the steps this one depends on:\n- a: ") {
		t.Fatalf("step b's sub-agent brief lost the modification or the hand-off of step a:\n%s", task)
	}
	fs, err := h.state("ms")
	if err != nil {
		t.Fatal(err)
	}
	b := fs.GetState().GetSteps()[1].GetStep()
	if b.GetDescription() != "two, revised" || b.GetType() != "write" || len(b.GetDependencies()) != 1 || b.GetDependencies()[0] != "a" {
		t.Fatalf("step b after the resume: %v", b)
	}
}

// stepInterruptSteps plans human_input step "h" then write step "b" with its own
// interrupt before it (1.5 s, default action continue).
func stepInterruptSteps(t *testing.T) *mock.Script {
	t.Helper()
	return rules(t,
		`{"system_match":"FATHOM-PHASE: synthesize","response":"closing summary"}`,
		planRule(`[{"id":"h","type":"human_input","description":"which colour?"},{"id":"b","type":"write","description":"two","interrupt":"before","interrupt_timeout_ms":1500}]`),
		`{"system_match":"FATHOM-ROLE: writer","response":"done {{.Step}}"}`)
}

// stillInterruptedPast fails unless session id stays interrupted until the wall clock
// is past at (plus a margin for the grain's timer to have fired), and returns its state.
func stillInterruptedPast(t *testing.T, h *harness, id string, at time.Time) *messages.SessionState {
	t.Helper()
	var st *messages.SessionState
	testenv.Eventually(t, 15*time.Second, func() bool {
		r, err := h.state(id)
		if err != nil {
			t.Fatalf("state: %v", err)
		}
		st = r.GetState()
		if st.GetStatus() != messages.SessionStatus_SESSION_STATUS_INTERRUPTED {
			t.Fatalf("the paused session went on (status %s): %v", st.GetStatus(), st)
		}
		return time.Now().After(at.Add(700 * time.Millisecond))
	}, "clock never passed %v", at)
	return st
}

// answerAndWaitForB answers step h of session id and waits until the session stops
// before step b; it returns that interrupt.
func answerAndWaitForB(t *testing.T, h *harness, id string) *messages.InterruptTriggered {
	t.Helper()
	waitStatus(t, h, id, messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN)
	g := h.node.Session(id)
	if _, err := g.ProvideInput(&messages.ProvideInputRequest{CommandId: "answer", StepId: "h", Input: "blue"}, call()); err != nil {
		t.Fatal(err)
	}
	var it *messages.InterruptTriggered
	testenv.Eventually(t, 15*time.Second, func() bool {
		r, err := h.state(id)
		it = r.GetState().GetInterrupt()
		return err == nil && it.GetStepId() == "b"
	}, "session %s never stopped before step b", id)
	return it
}

// TestPauseIsNotSwallowedByAStepInterrupt: a user's pause holds until resumed. A pause
// requested while the session sits at a step's own interrupt suspends that interrupt's
// deadline; a pause pending when a step's own interrupt is reached stops the session as
// a pause (no deadline). One resume goes on in both cases.
func TestPauseIsNotSwallowedByAStepInterrupt(t *testing.T) {
	h := startHarness(t, harnessOpts{script: stepInterruptSteps(t)})

	t.Run("pause while stopped at the step interrupt", func(t *testing.T) {
		if _, err := h.start("p1", "c1", "goal"); err != nil {
			t.Fatal(err)
		}
		it := answerAndWaitForB(t, h, "p1")
		if it.GetReason() != "step" || it.GetDeadlineUnixNano() == 0 {
			t.Fatalf("interrupt before b: %v, want the step's own (with a deadline)", it)
		}
		g := h.node.Session("p1")
		if _, err := g.Pause(&messages.PauseRequest{CommandId: "c2"}, call()); err != nil {
			t.Fatal(err)
		}
		stillInterruptedPast(t, h, "p1", time.Unix(0, it.GetDeadlineUnixNano()))
		if _, err := g.Resume(&messages.ResumeRequest{CommandId: "c3"}, call()); err != nil {
			t.Fatal(err)
		}
		evs := waitTerminal(t, h.j, "p1", 20*time.Second)
		mustComplete(t, evs)
		resumed := ofType(evs, "interrupt_resumed")
		if count(evs, "interrupt_triggered") != 1 || len(resumed) != 1 || resumed[0].GetInterruptResumed().GetBy() != "human" ||
			!resumed[0].GetInterruptResumed().GetPauseReleased() {
			t.Fatalf("interrupts: %d triggered, resumed %v", count(evs, "interrupt_triggered"), resumed)
		}
	})

	t.Run("pause pending when the step interrupt is reached", func(t *testing.T) {
		if _, err := h.start("p2", "c1", "goal"); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, h, "p2", messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN)
		g := h.node.Session("p2")
		if _, err := g.Pause(&messages.PauseRequest{CommandId: "c2"}, call()); err != nil {
			t.Fatal(err)
		}
		it := answerAndWaitForB(t, h, "p2")
		if it.GetReason() != "pause" || it.GetDeadlineUnixNano() != 0 {
			t.Fatalf("interrupt before b: %v, want the pause (no deadline)", it)
		}
		stillInterruptedPast(t, h, "p2", time.Now().Add(1500*time.Millisecond))
		if _, err := g.Resume(&messages.ResumeRequest{CommandId: "c3"}, call()); err != nil {
			t.Fatal(err)
		}
		evs := waitTerminal(t, h.j, "p2", 20*time.Second)
		mustComplete(t, evs)
		if n := count(evs, "interrupt_triggered"); n != 1 {
			t.Fatalf("%d interrupts, want 1 (the pause before b)", n)
		}
	})
}
