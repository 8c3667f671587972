package agent_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/agent"
	"github.com/fathom-agents/fathom/actors/observer"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// testCalls makes LLM calls that answer after delay (never when delay < 0: they wait to
// be cancelled), after panicking on their first crashes runs, and tool calls that answer
// at once, after panicking on their first toolCrashes runs.
type testCalls struct {
	delay       time.Duration
	crashes     int32
	toolCrashes int32
	started     *atomic.Int32 // LLM call runs (nil: not counted)
	toolRuns    *atomic.Int32 // tool call runs (nil: not counted)
	// cancelled counts the calls whose context was cancelled (nil: not counted).
	cancelled *atomic.Int32
	// made counts the calls the actor asked for, LLM and tool calls (nil: not counted):
	// it asks while it handles the message that starts the call.
	made *atomic.Int32
}

func (c testCalls) count() {
	if c.made != nil {
		c.made.Add(1)
	}
}

func (c testCalls) LLMCall(_ *messages.SessionState, _ string, p *messages.PendingCall) agent.Call {
	c.count()
	id := p.GetCallId()
	return func(ctx context.Context) any {
		n := int32(1)
		if c.started != nil {
			n = c.started.Add(1)
		}
		if n <= c.crashes {
			panic(fmt.Sprintf("step runner crash %d", n))
		}
		wait := time.After(c.delay)
		if c.delay < 0 {
			wait = nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			if c.cancelled != nil {
				c.cancelled.Add(1)
			}
		}
		return &core.LLMResult{CallID: id}
	}
}

func (c testCalls) ToolCall(_ *messages.SessionState, _ string, pt *messages.PendingTool) agent.Call {
	c.count()
	return func(context.Context) any {
		n := int32(1)
		if c.toolRuns != nil {
			n = c.toolRuns.Add(1)
		}
		if n <= c.toolCrashes {
			panic(fmt.Sprintf("tool runner crash %d", n))
		}
		return &core.ToolResult{Key: pt.GetIdempotencyKey()}
	}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeGrain stands in for the session grain "partition-activator/s$1": it answers
// NeedWork with work() and hands what its agent actor reports to onReport, whose
// answer, when not nil, is sent to the actor as the next Work.
func fakeGrain(t *testing.T, sys *actor.ActorSystem, id string, calls testCalls, timeout time.Duration, work func() *agent.Work, onReport func(any) *agent.Work) {
	t.Helper()
	var child *actor.PID
	props := actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			child = ctx.SpawnPrefix(agent.Props(id, calls, 4, timeout, discard()), agent.ActorName(id))
		case *agent.NeedWork:
			if m.AgentID != id {
				t.Errorf("NeedWork from %q, want %q", m.AgentID, id)
			}
			ctx.Send(child, work())
		case *core.LLMResult, *core.ToolResult, *agent.CallLost, *agent.ToolLost:
			if w := onReport(m); w != nil {
				ctx.Send(child, w)
			}
		}
	}, actor.WithSupervisor(agent.Supervisor()))
	if _, err := sys.Root.SpawnNamed(props, "partition-activator/s$1"); err != nil {
		t.Fatal(err)
	}
}

// settle returns once the agent actor pid has handled every message queued to it before:
// Proto.Actor answers a Touch after them (the actor itself ignores it).
func settle(t *testing.T, sys *actor.ActorSystem, pid *actor.PID) {
	t.Helper()
	res, err := sys.Root.RequestFuture(pid, &actor.Touch{}, 5*time.Second).Result()
	if _, ok := res.(*actor.Touched); !ok || err != nil {
		t.Fatalf("touch %s: %v, %v", pid, res, err)
	}
}

// agentPID is the PID of agent id's actor under the fake grain.
func agentPID(t *testing.T, sys *actor.ActorSystem, id string) *actor.PID {
	t.Helper()
	var ids []string
	for _, bucket := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, pid := range bucket.Keys() {
			if rest, ok := strings.CutPrefix(pid, "partition-activator/s$1/"+agent.ActorName(id)+"$"); ok && !strings.Contains(rest, "/") {
				ids = append(ids, pid)
			}
		}
	}
	if len(ids) != 1 {
		t.Fatalf("agent actors %v, want one", ids)
	}
	return sys.NewLocalPID(ids[0])
}

// runAgent runs agent id under a fake grain that sends it st and records what it reports.
func runAgent(t *testing.T, id string, calls testCalls, timeout time.Duration, st *messages.SessionState) <-chan any {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard() }))
	t.Cleanup(sys.Shutdown)
	got := make(chan any, 16)
	fakeGrain(t, sys, id, calls, timeout, func() *agent.Work { return &agent.Work{State: st} },
		func(m any) *agent.Work { got <- m; return nil })
	return got
}

func next(t *testing.T, got <-chan any) any {
	t.Helper()
	select {
	case m := <-got:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("nothing reported")
		return nil
	}
}

// agents are the two kinds of agent an actor runs: the orchestrator and a sub-agent.
var agents = []string{agent.Orchestrator, "researcher-1"}

// state is a session state in which agent id has an LLM call pending (a tool call when
// withTool).
func state(id string, withTool bool) *messages.SessionState {
	call := &messages.PendingCall{CallId: id + "/llm-1"}
	var tools []*messages.PendingTool
	if withTool {
		call, tools = nil, []*messages.PendingTool{{IdempotencyKey: "s/" + id + "/tool-1"}}
	}
	if id == agent.Orchestrator {
		return &messages.SessionState{SessionId: "s", Pending: call, PendingTools: tools}
	}
	sa := &messages.SubagentState{Id: id, AgentType: "researcher", Running: true, Pending: call, PendingTools: tools}
	return &messages.SessionState{SessionId: "s", SubAgents: map[string]*messages.SubagentState{id: sa}}
}

// stateN is state with the agent's call (or tool call) number n pending.
func stateN(id string, withTool bool, n int) *messages.SessionState {
	st := state(id, withTool)
	for _, p := range []*messages.PendingCall{st.GetPending(), st.GetSubAgents()[id].GetPending()} {
		if p != nil {
			p.CallId = fmt.Sprintf("%s/llm-%d", id, n)
		}
	}
	for _, pt := range append(st.GetPendingTools(), st.GetSubAgents()[id].GetPendingTools()...) {
		pt.IdempotencyKey = fmt.Sprintf("s/%s/tool-%d", id, n)
	}
	return st
}

// TestActorForwardsResultsAndReportsOnlyLosses: a child's result reaches the grain, and
// the end of a child that answered is not reported: the grain's next report after the
// first call's result is the second call's. The orchestrator and a sub-agent run their
// calls alike.
func TestActorForwardsResultsAndReportsOnlyLosses(t *testing.T) {
	for _, id := range agents {
		for _, withTool := range []bool{false, true} {
			sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard() }))
			got := make(chan any, 16)
			fakeGrain(t, sys, id, testCalls{}, time.Minute, func() *agent.Work { return &agent.Work{State: stateN(id, withTool, 1)} },
				func(m any) *agent.Work {
					got <- m
					return &agent.Work{State: stateN(id, withTool, 2)}
				})
			for n := 1; n <= 2; n++ {
				switch m := next(t, got).(type) {
				case *core.LLMResult:
					if withTool || m.CallID != fmt.Sprintf("%s/llm-%d", id, n) {
						t.Fatalf("agent %q: report %d: %+v", id, n, m)
					}
				case *core.ToolResult:
					if !withTool || m.Key != fmt.Sprintf("s/%s/tool-%d", id, n) {
						t.Fatalf("agent %q: report %d: %+v", id, n, m)
					}
				default:
					t.Fatalf("agent %q: report %d is %T %+v, want the child's result", id, n, m, m)
				}
			}
			sys.Shutdown()
		}
	}
}

// TestActorStopsAnOverdueCall: an LLM child that never answers is stopped after the call
// timeout and reported lost (the grain fails the call): the orchestrator's stalled call
// by the same watchdog as a sub-agent's.
func TestActorStopsAnOverdueCall(t *testing.T) {
	for _, id := range agents {
		start := time.Now()
		got := runAgent(t, id, testCalls{delay: -1}, 100*time.Millisecond, state(id, false))
		m, ok := next(t, got).(*agent.CallLost)
		if !ok || m.AgentID != id || m.CallID != id+"/llm-1" || time.Since(start) < 100*time.Millisecond {
			t.Fatalf("agent %q: report %+v after %v", id, m, time.Since(start))
		}
	}
}

// TestActorRunsTheNextCallAtOnce: the grain answers each result with Work naming the
// next call, usually before the answered call's child has ended; the actor starts it
// without waiting for that end (or for more Work).
func TestActorRunsTheNextCallAtOnce(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard() }))
	t.Cleanup(sys.Shutdown)
	done := make(chan int, 1)
	n := 1
	work := func() *agent.Work {
		return &agent.Work{State: &messages.SessionState{SessionId: "s", Pending: &messages.PendingCall{CallId: fmt.Sprintf("llm-%d", n)}}}
	}
	fakeGrain(t, sys, agent.Orchestrator, testCalls{}, time.Minute, work, func(m any) *agent.Work {
		r, ok := m.(*core.LLMResult)
		if !ok || r.CallID != fmt.Sprintf("llm-%d", n) {
			return nil
		}
		if n == 20 {
			done <- n
			return nil
		}
		n++
		return work()
	})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the orchestrator's 20 calls in a row did not all run")
	}
}

// TestActorCallOnlyStartsNoTools: Work from a state still being appended starts the LLM
// call and no tool call; and an abandoned call is not reported lost.
func TestActorCallOnlyStartsNoTools(t *testing.T) {
	st := state(agent.Orchestrator, true)
	st.Pending = &messages.PendingCall{CallId: "llm-1"}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard() }))
	t.Cleanup(sys.Shutdown)
	got := make(chan any, 16)
	var started, made atomic.Int32
	fakeGrain(t, sys, agent.Orchestrator, testCalls{delay: -1, started: &started, made: &made}, time.Minute,
		func() *agent.Work { return &agent.Work{State: st, CallOnly: true} },
		func(m any) *agent.Work { got <- m; return nil })
	deadline := time.Now().Add(5 * time.Second)
	for started.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the LLM call did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The Work is handled: only the LLM call started, the tool call did not (it would
	// have been asked for then), and nothing is reported.
	settle(t, sys, agentPID(t, sys, agent.Orchestrator))
	if n := made.Load(); n != 1 {
		t.Fatalf("%d calls started, want the LLM call only", n)
	}
	select {
	case m := <-got:
		t.Fatalf("reported %T %+v", m, m)
	default:
	}
}

// TestCallCrashIsRestartedByItsAgentActor: an LLM call or a tool call that panics (on
// its worker of the dispatch pool) is run again by its agent actor, as a crashed child
// was restarted, and the observer reports the restarts with the kinds and paths it gave
// a crashed runner child: step_runner (tool_runner) {agent actor}/step-runner$n, under
// an actor of kind agent. Past the restart limit the call is reported lost (CallLost,
// ToolLost), and the agent runs its next call. The orchestrator and a sub-agent alike.
func TestCallCrashIsRestartedByItsAgentActor(t *testing.T) {
	for _, tc := range []struct {
		id      string
		tool    bool
		crashes int32
	}{{agent.Orchestrator, false, 2}, {"researcher-1", false, 2}, {agent.Orchestrator, false, 4}, {"researcher-1", false, 4},
		{agent.Orchestrator, true, 2}, {agent.Orchestrator, true, 10}, {"researcher-1", true, 10}} {
		sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard() }))
		obs, err := observer.Spawn(sys, observer.Config{Node: "n1", Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		var runs, runsAtLoss atomic.Int32
		calls := testCalls{crashes: tc.crashes, started: &runs}
		kind, runner, reason := observer.KindStepRunner, agent.StepRunnerName, "step runner crash"
		if tc.tool {
			calls = testCalls{toolCrashes: tc.crashes, toolRuns: &runs}
			kind, runner, reason = observer.KindToolRunner, agent.ToolRunnerName, "tool runner crash"
		}
		got := make(chan any, 16)
		st := stateN(tc.id, tc.tool, 1)
		fakeGrain(t, sys, tc.id, calls, time.Minute,
			func() *agent.Work { return &agent.Work{State: st} },
			func(m any) *agent.Work {
				_, lost := m.(*agent.CallLost)
				if lost {
					runsAtLoss.Store(runs.Load())
				}
				got <- m
				if lost {
					return &agent.Work{State: stateN(tc.id, false, 2)} // the grain retries the step
				}
				return nil
			})
		switch m := next(t, got).(type) {
		case *core.LLMResult:
			if tc.tool || tc.crashes > 3 || m.CallID != tc.id+"/llm-1" || runs.Load() != tc.crashes+1 {
				t.Fatalf("agent %q: answer %+v after %d runs", tc.id, m, runs.Load())
			}
		case *core.ToolResult:
			if !tc.tool || tc.crashes > 3 || m.Key != "s/"+tc.id+"/tool-1" || runs.Load() != tc.crashes+1 {
				t.Fatalf("agent %q: tool result %+v after %d runs", tc.id, m, runs.Load())
			}
		case *agent.CallLost:
			if tc.tool || tc.crashes <= 3 || m.CallID != tc.id+"/llm-1" || m.AgentID != tc.id || runsAtLoss.Load() != 4 {
				t.Fatalf("agent %q: lost %+v after %d runs", tc.id, m, runsAtLoss.Load())
			}
			// The agent recovers: the step's next call runs (and panics no more: 4 runs
			// panicked).
			if r, ok := next(t, got).(*core.LLMResult); !ok || r.CallID != tc.id+"/llm-2" {
				t.Fatalf("agent %q: after the lost call, report %+v, want the next call's result", tc.id, r)
			}
		case *agent.ToolLost:
			if !tc.tool || tc.crashes <= 3 || m.Key != "s/"+tc.id+"/tool-1" || m.AgentID != tc.id || runs.Load() != 4 {
				t.Fatalf("agent %q: tool lost %+v after %d runs", tc.id, m, runs.Load())
			}
		default:
			t.Fatalf("agent %q: report %T", tc.id, m)
		}
		var recent []observer.Restart
		deadline := time.Now().Add(5 * time.Second)
		for want := int(min(tc.crashes, 4)); len(recent) < want; {
			if recent, err = obs.Recent(context.Background()); err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("agent %q: observer saw %+v, want %d records", tc.id, recent, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
		for i, r := range recent {
			parentPath := r.Actor[:strings.LastIndexByte(r.Actor, '/')]
			if kind, sid := observer.Classify(parentPath); kind != observer.KindAgent || sid != "s" {
				t.Errorf("agent %q: parent %s classified %s/%s, want %s", tc.id, parentPath, kind, sid, observer.KindAgent)
			}
			directive := "restart"
			if i == 3 {
				directive = "stop"
			}
			if r.Kind != kind || r.SessionID != "s" || !strings.HasPrefix(r.Actor, "partition-activator/s$1/"+agent.ActorName(tc.id)+"$") ||
				!strings.Contains(r.Actor, "/"+runner+"$") || !strings.Contains(r.Reason, reason) || r.Directive != directive {
				t.Errorf("agent %q: restart record %d %+v", tc.id, i, r)
			}
		}
		obs.Stop()
		sys.Shutdown()
	}
}

// TestAbandonedAndStoppedCallsAreCancelled: Abandon cancels the running LLM call's
// context, and neither its result nor a loss is reported; stopping the agent actor (the
// session passivated, ended or was cancelled) cancels its running calls.
func TestAbandonedAndStoppedCallsAreCancelled(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard() }))
	t.Cleanup(sys.Shutdown)
	var started, cancelled atomic.Int32
	got := make(chan any, 16)
	st := state(agent.Orchestrator, false)
	fakeGrain(t, sys, agent.Orchestrator, testCalls{delay: -1, started: &started, cancelled: &cancelled}, time.Minute,
		func() *agent.Work { return &agent.Work{State: st, CallOnly: true} },
		func(m any) *agent.Work { got <- m; return nil })
	waitFor := func(what string, n *atomic.Int32, want int32) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); n.Load() < want; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d, want %d", what, n.Load(), want)
			}
		}
	}
	waitFor("calls started", &started, 1)
	pid := agentPID(t, sys, agent.Orchestrator)
	sys.Root.Send(pid, &agent.Abandon{CallID: callOf(st, agent.Orchestrator)})
	waitFor("calls cancelled", &cancelled, 1)
	res, err := sys.Root.RequestFuture(pid, &agent.Running{}, 5*time.Second).Result()
	if r, ok := res.(*agent.Runs); !ok || err != nil || r.LLMCall != "" || len(r.Tools) != 0 {
		t.Fatalf("after Abandon the actor runs %+v (%v)", res, err)
	}
	// A new generation (the grain reloaded) starts the call again.
	sys.Root.Send(pid, &agent.Work{State: st, Generation: 1})
	waitFor("calls started", &started, 2)
	res, err = sys.Root.RequestFuture(pid, &agent.Running{}, 5*time.Second).Result()
	if r, ok := res.(*agent.Runs); !ok || err != nil || r.LLMCall != callOf(st, agent.Orchestrator) {
		t.Fatalf("the actor runs %+v (%v), want the restarted call", res, err)
	}
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	waitFor("calls cancelled", &cancelled, 2)
	time.Sleep(50 * time.Millisecond) // a late result would be on its way
	select {
	case m := <-got:
		t.Fatalf("reported %T %+v for cancelled calls", m, m)
	default:
	}
}
