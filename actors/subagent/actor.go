package subagent

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/dispatch"
	"github.com/fathom-agents/fathom/messages"
)

// Calls makes the children that run a sub-agent's calls; the session implements it.
// Each child reports its result to its parent (the Actor), which forwards it unchanged to
// the grain, and then stops.
type Calls interface {
	// LLMCall returns the props of a child making sa's pending LLM call, built from the
	// committed state st (never mutated).
	LLMCall(st *messages.SessionState, sa *messages.SubagentState) *actor.Props
	// ToolCall returns the props of a child running sa's recorded call c.
	ToolCall(st *messages.SessionState, sa *messages.SubagentState, c *messages.PendingTool) *actor.Props
}

// Messages between the grain and its sub-agent actors. They never leave the process.
type (
	// Work tells the actor the committed session state; it starts what the state says
	// is due for its sub-agent and is not running yet. Generation counts the grain's
	// loads of the state from the journal: after a reload (a write failed, its results
	// were dropped) calls this actor already ran may be due again.
	Work struct {
		State      *messages.SessionState
		Generation uint64
		// HoldTools keeps the pending tool calls from starting: the session is stopped
		// at a tool breakpoint in this sub-agent's turn.
		HoldTools bool
	}
	// NeedWork asks the grain for Work (sent when the actor starts or restarts).
	NeedWork struct{ SubAgentID string }
	// CallLost reports that the child making LLM call CallID stopped (it answered, or
	// crashed past its restart limit). The grain ignores it when the call is no longer
	// pending, and fails the call otherwise.
	CallLost struct{ SubAgentID, CallID string }
	// ToolLost is CallLost for the tool call with idempotency key Key.
	ToolLost struct{ SubAgentID, Key string }
)

// Actor is a sub-agent: a supervised child of the session grain that runs its
// sub-agent's LLM call and tool calls in children of its own. It never decides and never
// writes: results go to the grain, which commits them and sends new Work.
type Actor struct {
	id          string
	calls       Calls
	maxParallel int
	// callTimeout bounds an LLM child (0: none): a child still running after it is
	// stopped, and the grain fails the call (CallLost), even if the provider ignores its
	// own deadline.
	callTimeout time.Duration
	log         *slog.Logger
	llmPID      *actor.PID
	watchdog    *time.Timer

	llmCall string
	tools   map[string]bool
	// children maps a running child to its call id or tool key.
	children map[string]childCall
	// done are the calls this actor already ran in this generation: never started twice
	// (a result may still be on its way to the grain while older Work arrives).
	done       map[string]bool
	generation uint64
}

type childCall struct {
	tool bool
	key  string
}

// Props returns the props of sub-agent id's actor. Its children (the calls) are
// restarted up to 3 times a minute (a restarted LLM child makes its call again; a tool
// child runs its call again under the same idempotency key); past that they stop and the
// grain fails the call. An LLM child still running after callTimeout (0: no bound) is
// stopped, which fails its call the same way.
func Props(id string, calls Calls, maxParallelTools int, callTimeout time.Duration, log *slog.Logger) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &Actor{id: id, calls: calls, maxParallel: max(maxParallelTools, 1), callTimeout: callTimeout, log: log}
	}, actor.WithSupervisor(actor.NewOneForOneStrategy(3, time.Minute, actor.DefaultDecider)), dispatch.Props())
}

// callOverdue fires when the LLM child pid has run for callTimeout.
type callOverdue struct{ pid *actor.PID }

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.onStarted(ctx)
	case *Work:
		a.onWork(ctx, msg)
	case *actor.Terminated:
		// System messages overtake user messages: the child's result may still be queued
		// behind this. Look at it once everything queued before has been forwarded.
		ctx.Send(ctx.Self(), &childGone{who: msg.GetWho()})
	case *childGone:
		a.onChildGone(ctx, msg)
	case *callOverdue:
		if a.llmPID != nil && a.llmPID.Equal(msg.pid) {
			a.log.Warn("sub-agent LLM call overdue; stopping it", "sub_agent_id", a.id, "call_id", a.llmCall, "after", a.callTimeout)
			ctx.Stop(msg.pid)
		}
	case *actor.Stopping, *actor.Restarting:
		if a.watchdog != nil {
			a.watchdog.Stop()
		}
	case *actor.Stopped:
	default:
		if _, system := msg.(actor.SystemMessage); system {
			return
		}
		// A child's result: the grain decides.
		ctx.Send(ctx.Parent(), msg)
	}
}

func (a *Actor) onStarted(ctx actor.Context) {
	a.llmCall, a.tools, a.children, a.done = "", map[string]bool{}, map[string]childCall{}, map[string]bool{}
	ctx.Send(ctx.Parent(), &NeedWork{SubAgentID: a.id})
}

func (a *Actor) onWork(ctx actor.Context, w *Work) {
	sa := w.State.GetSubAgents()[a.id]
	if sa == nil || !sa.GetRunning() {
		return
	}
	if w.Generation != a.generation {
		a.generation, a.done = w.Generation, map[string]bool{}
	}
	if p := sa.GetPending(); p != nil && a.llmCall == "" && !a.done["llm:"+p.GetCallId()] {
		pid := ctx.SpawnPrefix(a.calls.LLMCall(w.State, sa), "llm")
		ctx.Watch(pid)
		a.llmCall, a.llmPID = p.GetCallId(), pid
		if a.callTimeout > 0 {
			self, root := ctx.Self(), ctx.ActorSystem().Root
			if a.watchdog != nil {
				a.watchdog.Stop()
			}
			a.watchdog = time.AfterFunc(a.callTimeout, func() { root.Send(self, &callOverdue{pid: pid}) })
		}
		a.done["llm:"+p.GetCallId()] = true
		a.children[pid.String()] = childCall{key: p.GetCallId()}
	}
	for _, c := range sa.GetPendingTools() {
		key := c.GetIdempotencyKey()
		if len(a.tools) >= a.maxParallel || w.HoldTools {
			break
		}
		if a.tools[key] || a.done["tool:"+key] || awaitsHuman(w.State, key) {
			continue
		}
		pid := ctx.SpawnPrefix(a.calls.ToolCall(w.State, sa, c), "tool")
		ctx.Watch(pid)
		a.tools[key] = true
		a.done["tool:"+key] = true
		a.children[pid.String()] = childCall{tool: true, key: key}
	}
}

// childGone is a child's Terminated, re-queued behind the child's last messages.
type childGone struct{ who *actor.PID }

func (a *Actor) onChildGone(ctx actor.Context, t *childGone) {
	id := t.who.String()
	c, ok := a.children[id]
	if !ok {
		return
	}
	delete(a.children, id)
	if c.tool {
		delete(a.tools, c.key)
		ctx.Send(ctx.Parent(), &ToolLost{SubAgentID: a.id, Key: c.key})
		return
	}
	if a.llmCall == c.key {
		a.llmCall, a.llmPID = "", nil
		if a.watchdog != nil {
			a.watchdog.Stop()
		}
	}
	ctx.Send(ctx.Parent(), &CallLost{SubAgentID: a.id, CallID: c.key})
}

// String names the actor in logs.
func (a *Actor) String() string { return fmt.Sprintf("subagent %s", a.id) }

// awaitsHuman reports whether the call with idempotency key waits for a human's answer
// (ask_human): the grain records the answer as its result; nothing runs it.
func awaitsHuman(st *messages.SessionState, key string) bool {
	for _, r := range st.GetAwaiting() {
		if r.GetRequestId() == key {
			return true
		}
	}
	return false
}
