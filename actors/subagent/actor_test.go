package subagent_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/subagent"
	"github.com/fathom-agents/fathom/messages"
)

// answer is what a test LLM child reports to its parent.
type answer struct{ callID string }

// testCalls makes LLM children that answer after delay (never when delay < 0) and tool
// children that answer at once.
type testCalls struct{ delay time.Duration }

func (c testCalls) LLMCall(_ *messages.SessionState, sa *messages.SubagentState) *actor.Props {
	id := sa.GetPending().GetCallId()
	return actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); !ok || c.delay < 0 {
			return
		}
		parent, self := ctx.Parent(), ctx.Self()
		time.AfterFunc(c.delay, func() {
			ctx.ActorSystem().Root.Send(parent, &answer{callID: id})
			ctx.ActorSystem().Root.Stop(self)
		})
	})
}

func (c testCalls) ToolCall(_ *messages.SessionState, _ *messages.SubagentState, pt *messages.PendingTool) *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); ok {
			ctx.Send(ctx.Parent(), &answer{callID: pt.GetIdempotencyKey()})
			ctx.Stop(ctx.Self())
		}
	})
}

// grain stands in for the session grain: it answers NeedWork with st and records what
// its sub-agent actor reports.
func runSubAgent(t *testing.T, calls testCalls, timeout time.Duration, st *messages.SessionState) <-chan any {
	t.Helper()
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	got := make(chan any, 16)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var child *actor.PID
	props := actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			child = ctx.Spawn(subagent.Props("researcher-1", calls, 4, timeout, log))
		case *subagent.NeedWork:
			ctx.Send(child, &subagent.Work{State: st})
		case *answer, *subagent.CallLost, *subagent.ToolLost:
			got <- m
		}
	})
	sys.Root.Spawn(props)
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

func state(withTool bool) *messages.SessionState {
	sa := &messages.SubagentState{Id: "researcher-1", AgentType: "researcher", Running: true,
		Pending: &messages.PendingCall{CallId: "researcher-1/llm-1"}}
	if withTool {
		sa.Pending = nil
		sa.PendingTools = []*messages.PendingTool{{IdempotencyKey: "s/researcher-1/tool-1"}}
	}
	return &messages.SessionState{SessionId: "s", SubAgents: map[string]*messages.SubagentState{"researcher-1": sa}}
}

// TestActorForwardsResultsBeforeTheChildsEnd: a child's result reaches the grain before
// the report that the child stopped, which the grain then ignores as stale.
func TestActorForwardsResultsBeforeTheChildsEnd(t *testing.T) {
	for _, withTool := range []bool{false, true} {
		got := runSubAgent(t, testCalls{}, time.Minute, state(withTool))
		if a, ok := next(t, got).(*answer); !ok {
			t.Fatalf("first report %T, want the child's answer", a)
		}
		switch m := next(t, got).(type) {
		case *subagent.CallLost:
			if withTool || m.CallID != "researcher-1/llm-1" {
				t.Fatalf("%+v", m)
			}
		case *subagent.ToolLost:
			if !withTool || m.Key != "s/researcher-1/tool-1" {
				t.Fatalf("%+v", m)
			}
		default:
			t.Fatalf("second report %T", m)
		}
	}
}

// TestActorStopsAnOverdueCall: an LLM child that never answers is stopped after the call
// timeout and reported lost (the grain fails the call).
func TestActorStopsAnOverdueCall(t *testing.T) {
	start := time.Now()
	got := runSubAgent(t, testCalls{delay: -1}, 100*time.Millisecond, state(false))
	m, ok := next(t, got).(*subagent.CallLost)
	if !ok || m.CallID != "researcher-1/llm-1" || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("report %+v after %v", m, time.Since(start))
	}
}
