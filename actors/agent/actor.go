package agent

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/dispatch"
	"github.com/fathom-agents/fathom/actors/release"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// Orchestrator is the id of a session's orchestrator agent. In the session's state it
// is the agent without a sub_agent_id: its pending call is state.pending_call, its
// pending tool calls the session's pending_tools.
const Orchestrator = ""

// Names of the actors in a session's supervision tree, as their paths show them (the
// observer classifies restarts by them).
const (
	// ActorPrefix prefixes an agent actor's name: agent-orchestrator, agent-{sub_agent_id}.
	ActorPrefix = "agent-"
	// StepRunnerName names an agent's LLM call child (its step runner).
	StepRunnerName = "step-runner"
	// ToolRunnerName names an agent's tool call children.
	ToolRunnerName = "tool-runner"
)

// ActorName is the name (prefix) of agent id's actor under its grain.
func ActorName(id string) string {
	if id == Orchestrator {
		return ActorPrefix + "orchestrator"
	}
	return ActorPrefix + id
}

// Calls makes the children that run an agent's calls; the session implements it.
// Each child reports its result to its parent (the Actor), which forwards it unchanged to
// the grain, and then stops.
type Calls interface {
	// LLMCall returns the props of a child making agent id's pending LLM call p, built
	// from the state st (never mutated).
	LLMCall(st *messages.SessionState, id string, p *messages.PendingCall) *actor.Props
	// ToolCall returns the props of a child running agent id's recorded call c.
	ToolCall(st *messages.SessionState, id string, c *messages.PendingTool) *actor.Props
}

// Messages between the grain and its agent actors. They never leave the process.
type (
	// Work tells the actor the session state; it starts what the state says is due for
	// its agent and is not running yet. Generation counts the grain's loads of the state
	// from the journal: after a reload (a write failed, its results were dropped) calls
	// this actor already ran may be due again.
	Work struct {
		State      *messages.SessionState
		Generation uint64
		// HoldTools keeps the pending tool calls from starting: the session is stopped
		// at an interrupt (for a sub-agent: a tool breakpoint in its turn).
		HoldTools bool
		// CallOnly marks a state that is still being appended (the commit pipeline): only
		// the LLM call starts, which has no effect the journal must know of first, and the
		// tool calls EarlyTools names (tools without effects, tools.NoEffects). Other tool
		// calls start only from a durable state.
		CallOnly bool
		// EarlyTools are the idempotency keys of the pending tool calls that may start
		// from a CallOnly state.
		EarlyTools map[string]bool
		// Drain marks a member that is draining (fathom node drain, a graceful stop): no
		// call starts, the calls running finish and report their results, and the actor
		// answers Drained once none runs.
		Drain bool
	}
	// NeedWork asks the grain for Work (sent when the actor starts or restarts).
	NeedWork struct{ AgentID string }
	// CallLost reports that the child making LLM call CallID stopped without a result
	// (it crashed past its restart limit, or overran the call timeout, or it was
	// started again while its result was on its way). The grain ignores it when the
	// call is no longer pending, and fails the call otherwise.
	CallLost struct{ AgentID, CallID string }
	// ToolLost is CallLost for the tool call with idempotency key Key.
	ToolLost struct{ AgentID, Key string }
	// Drained answers Work with Drain once none of the actor's calls runs: the grain
	// may hand the session over without cutting a call.
	Drained struct{ AgentID string }
	// Abandon stops the child making LLM call CallID without a CallLost: the grain
	// started it from a state whose append failed, and reloads.
	Abandon struct{ CallID string }
)

// Actor is an agent: the session's orchestrator or one of its sub-agents, a supervised
// child of the session grain that runs its agent's LLM call and tool calls in children
// of its own. It never decides and never writes: results go to the grain, which commits
// them and sends new Work.
type Actor struct {
	// rel lets the props forget what made this actor (actors/release).
	rel         *release.Handle
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
	// children maps a running child (its PID's id: children are local) to its call.
	children map[string]childCall
	// done are the calls this actor already ran in this generation: never started twice
	// (a result may still be on its way to the grain while older Work arrives).
	done map[childCall]bool
	// answered are the calls whose result was forwarded while their child runs.
	answered   map[childCall]bool
	generation uint64
	// last is the newest Work: a call that ends frees room (an LLM call, a tool slot)
	// for what it says is due.
	last *Work
}

// childCall is a call: an LLM call by id or a tool call by idempotency key.
type childCall struct {
	tool bool
	key  string
}

// Props returns the props of agent id's actor. Its children (the calls) are restarted up
// to 3 times a minute (a restarted LLM child makes its call again; a tool child runs its
// call again under the same idempotency key); past that they stop and the grain fails
// the call. An LLM child still running after callTimeout (0: no bound) is stopped, which
// fails its call the same way.
func Props(id string, calls Calls, maxParallelTools int, callTimeout time.Duration, log *slog.Logger) *actor.Props {
	return release.Props(func(h *release.Handle) actor.Actor {
		return &Actor{rel: h, id: id, calls: calls, maxParallel: max(maxParallelTools, 1), callTimeout: callTimeout, log: log}
	}, actor.WithSupervisor(Supervisor()), dispatch.Props())
}

// Supervisor is the strategy an agent actor applies to its call children, and the grain
// to its agent actors: restart a crashed actor (it makes its call again, or asks for
// Work again) up to 3 times a minute; past that it stops, and the grain fails the call.
func Supervisor() actor.SupervisorStrategy {
	return actor.NewOneForOneStrategy(3, time.Minute, actor.DefaultDecider)
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
	case *Abandon:
		a.onAbandon(ctx, msg)
	case *actor.Terminated:
		// System messages overtake user messages: the child's result may still be queued
		// behind this. Look at it once everything queued before has been forwarded.
		ctx.Send(ctx.Self(), &childGone{who: msg.GetWho()})
	case *childGone:
		a.onChildGone(ctx, msg)
	case *callOverdue:
		if a.llmPID != nil && a.llmPID.Equal(msg.pid) {
			a.log.Warn("LLM call overdue; stopping it", "agent", a.name(), "call_id", a.llmCall, "after", a.callTimeout)
			ctx.Stop(msg.pid)
		}
	case *actor.Touch:
		// Proto.Actor answers it (once every message queued before it was handled); it is
		// no child's result.
	case *actor.Stopping, *actor.Restarting:
		a.stopWatchdog()
	case *actor.Stopped:
		// Proto.Actor may keep a stopped actor's context reachable for a while (its
		// parent's set of children keeps stale references until the slots are reused):
		// let go of the session's state, its history cache and the children's PIDs.
		a.rel.Release()
		a.calls, a.last, a.llmPID, a.watchdog = nil, nil, nil, nil
		a.tools, a.children, a.done, a.answered = nil, nil, nil, nil
	default:
		if _, system := msg.(actor.SystemMessage); system {
			return
		}
		// A child's result: the grain decides.
		a.onResult(msg)
		ctx.Send(ctx.Parent(), msg)
	}
}

// onResult frees what a child's result ends: the grain may answer with Work naming the
// next call before the child's end (childGone) is seen. The end of a child whose result
// was forwarded is not reported.
func (a *Actor) onResult(msg any) {
	switch r := msg.(type) {
	case *core.LLMResult:
		if r.CallID != "" && r.CallID == a.llmCall {
			a.llmCall, a.llmPID = "", nil
			a.stopWatchdog()
			a.answered[childCall{key: r.CallID}] = true
		}
	case *core.ToolResult:
		if a.tools[r.Key] {
			delete(a.tools, r.Key)
			a.answered[childCall{tool: true, key: r.Key}] = true
		}
	}
}

func (a *Actor) onStarted(ctx actor.Context) {
	a.llmCall, a.llmPID, a.tools, a.children, a.done, a.last = "", nil, map[string]bool{}, map[string]childCall{}, map[childCall]bool{}, nil
	a.answered = map[childCall]bool{}
	ctx.Send(ctx.Parent(), &NeedWork{AgentID: a.id})
}

// due is what st says agent id has to run: its pending LLM call and pending tool calls.
// ok is false when the agent does not run (the session ended, the sub-agent is not
// running).
func due(st *messages.SessionState, id string) (p *messages.PendingCall, tools []*messages.PendingTool, ok bool) {
	if core.Terminal(st) {
		return nil, nil, false
	}
	if id == Orchestrator {
		return st.GetPending(), st.GetPendingTools(), true
	}
	sa := st.GetSubAgents()[id]
	if sa == nil || !sa.GetRunning() {
		return nil, nil, false
	}
	return sa.GetPending(), sa.GetPendingTools(), true
}

func (a *Actor) onWork(ctx actor.Context, w *Work) {
	a.last = w
	if w.Drain {
		if len(a.children) == 0 {
			ctx.Send(ctx.Parent(), &Drained{AgentID: a.id})
		}
		return
	}
	p, pending, ok := due(w.State, a.id)
	if !ok {
		return
	}
	if w.Generation != a.generation {
		a.generation, a.done = w.Generation, map[childCall]bool{}
	}
	if p != nil && a.llmCall == "" && !a.done[childCall{key: p.GetCallId()}] {
		a.startCall(ctx, w.State, p)
	}
	if w.HoldTools || (w.CallOnly && len(w.EarlyTools) == 0) {
		return
	}
	for _, c := range pending {
		key := c.GetIdempotencyKey()
		if len(a.tools) >= a.maxParallel {
			break
		}
		if a.tools[key] || a.done[childCall{tool: true, key: key}] || awaitsHuman(w.State, key) || (w.CallOnly && !w.EarlyTools[key]) {
			continue
		}
		pid := ctx.SpawnPrefix(a.calls.ToolCall(w.State, a.id, c), ToolRunnerName)
		ctx.Watch(pid)
		a.tools[key] = true
		a.done[childCall{tool: true, key: key}] = true
		a.children[pid.GetId()] = childCall{tool: true, key: key}
	}
}

// startCall starts the child making LLM call p and its watchdog.
func (a *Actor) startCall(ctx actor.Context, st *messages.SessionState, p *messages.PendingCall) {
	pid := ctx.SpawnPrefix(a.calls.LLMCall(st, a.id, p), StepRunnerName)
	ctx.Watch(pid)
	a.llmCall, a.llmPID = p.GetCallId(), pid
	if a.callTimeout > 0 {
		self, root := ctx.Self(), ctx.ActorSystem().Root
		a.stopWatchdog()
		a.watchdog = time.AfterFunc(a.callTimeout, func() { root.Send(self, &callOverdue{pid: pid}) })
	}
	a.done[childCall{key: p.GetCallId()}] = true
	a.children[pid.GetId()] = childCall{key: p.GetCallId()}
}

func (a *Actor) onAbandon(ctx actor.Context, m *Abandon) {
	if a.last != nil && a.last.CallOnly {
		a.last = nil // its state will not be stored: wait for the grain's next Work
	}
	if a.llmPID == nil || a.llmCall != m.CallID {
		return
	}
	delete(a.children, a.llmPID.GetId())
	ctx.Stop(a.llmPID)
	a.llmCall, a.llmPID = "", nil
	a.stopWatchdog()
}

// childGone is a child's Terminated, re-queued behind the child's last messages.
type childGone struct{ who *actor.PID }

func (a *Actor) onChildGone(ctx actor.Context, t *childGone) {
	id := t.who.GetId()
	c, ok := a.children[id]
	if !ok {
		return
	}
	delete(a.children, id)
	if a.answered[c] {
		delete(a.answered, c)
	} else if c.tool {
		delete(a.tools, c.key)
		ctx.Send(ctx.Parent(), &ToolLost{AgentID: a.id, Key: c.key})
	} else {
		if a.llmCall == c.key {
			a.llmCall, a.llmPID = "", nil
			a.stopWatchdog()
		}
		ctx.Send(ctx.Parent(), &CallLost{AgentID: a.id, CallID: c.key})
	}
	if a.last != nil {
		a.onWork(ctx, a.last)
	}
}

func (a *Actor) stopWatchdog() {
	if a.watchdog != nil {
		a.watchdog.Stop()
	}
}

// name is the agent's name in logs.
func (a *Actor) name() string {
	if a.id == Orchestrator {
		return "orchestrator"
	}
	return a.id
}

// String names the actor in logs.
func (a *Actor) String() string { return fmt.Sprintf("agent %s", a.name()) }

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
