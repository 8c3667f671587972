package agent_test

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/agent"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// TestDrainLetsTheRunningCallFinishAndStartsNone: an agent told Work with Drain while
// its LLM call runs starts nothing new (neither the tool call the state has pending nor
// another LLM call), forwards the running call's result, and then answers Drained; told
// Drain again when idle, it answers Drained at once.
func TestDrainLetsTheRunningCallFinishAndStartsNone(t *testing.T) {
	for _, id := range agents {
		sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard() }))
		got := make(chan any, 16)
		var child *actor.PID
		var made atomic.Int32
		running := state(id, false)  // its LLM call pending
		drain := stateN(id, true, 2) // a tool call pending, and it would be the next call
		props := actor.PropsFromFunc(func(ctx actor.Context) {
			switch m := ctx.Message().(type) {
			case *actor.Started:
				child = ctx.SpawnPrefix(agent.Props(id, testCalls{delay: 200 * time.Millisecond, made: &made}, 4, time.Minute, discard()), agent.ActorName(id))
			case *agent.NeedWork:
				ctx.Send(child, &agent.Work{State: running})
				ctx.Send(child, &agent.Work{State: drain, Drain: true})
			case *core.LLMResult, *core.ToolResult, *agent.CallLost, *agent.ToolLost, *agent.Drained:
				got <- m
			}
		}, actor.WithSupervisor(agent.Supervisor()))
		if _, err := sys.Root.SpawnNamed(props, "partition-activator/s$1"); err != nil {
			t.Fatal(err)
		}
		if r, ok := next(t, got).(*core.LLMResult); !ok || r.CallID != callOf(running, id) {
			t.Fatalf("%q: first report %#v, want the running call's result", id, r)
		}
		if _, ok := next(t, got).(*agent.Drained); !ok {
			t.Fatalf("%q: after the running call's result, want Drained", id)
		}
		sys.Root.Send(child, &agent.Work{State: drain, Drain: true}) // the agent is idle now
		if m, ok := next(t, got).(*agent.Drained); !ok {
			t.Fatalf("%q: idle agent told Drain answered %#v, want Drained", id, m)
		}
		// Everything queued to it handled (the first call's end too), it started no call
		// but the first.
		settle(t, sys, child)
		if n := made.Load(); n != 1 {
			t.Fatalf("%q: a drained agent started %d calls, want only the one running before", id, n)
		}
		select {
		case m := <-got:
			t.Fatalf("%q: a drained agent reported %#v", id, m)
		default:
		}
		sys.Shutdown()
	}
}

// callOf is the call id of agent id's pending LLM call in st.
func callOf(st *messages.SessionState, id string) string {
	if id == agent.Orchestrator {
		return st.GetPending().GetCallId()
	}
	return st.GetSubAgents()[id].GetPending().GetCallId()
}
