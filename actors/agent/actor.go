package agent

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
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

// Names in a session's supervision tree, as paths show them (the observer classifies
// restarts by them).
const (
	// ActorPrefix prefixes an agent actor's name: agent-orchestrator, agent-{sub_agent_id}.
	ActorPrefix = "agent-"
	// StepRunnerName names an agent's LLM call (its step runner) in the supervision
	// events of a call that panicked: {agent actor}/step-runner$n. The call is a task of
	// the agent actor, not an actor of its own.
	StepRunnerName = "step-runner"
	// ToolRunnerName names an agent's tool calls the same way.
	ToolRunnerName = "tool-runner"
)

// ActorName is the name (prefix) of agent id's actor under its grain.
func ActorName(id string) string {
	if id == Orchestrator {
		return ActorPrefix + "orchestrator"
	}
	return ActorPrefix + id
}

// Call is one call of an agent, run by its actor on a worker of the dispatch pool (a
// plain task, not an actor): it makes the call under ctx and returns its result (a
// *core.LLMResult or a *core.ToolResult), which the actor forwards unchanged to the
// grain. ctx is cancelled when the call is abandoned — its watchdog fired, the grain
// abandoned it (Abandon), the actor stopped or restarts (the session passivated, moved,
// ended or was cancelled) — and what it returns then is dropped. A call that panics is
// run again like a crashed child, under Supervisor's limits, and reported lost past them.
type Call func(ctx context.Context) any

// Calls makes the calls of an agent; the session implements it.
type Calls interface {
	// LLMCall returns agent id's pending LLM call p, built from the state st (never
	// mutated).
	LLMCall(st *messages.SessionState, id string, p *messages.PendingCall) Call
	// ToolCall returns agent id's recorded tool call c.
	ToolCall(st *messages.SessionState, id string, c *messages.PendingTool) Call
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
	// CallLost reports that LLM call CallID ended without a result (it panicked past
	// its restart limit, or overran the call timeout). The grain ignores it when the
	// call is no longer pending, and fails the call otherwise.
	CallLost struct{ AgentID, CallID string }
	// ToolLost is CallLost for the tool call with idempotency key Key.
	ToolLost struct{ AgentID, Key string }
	// Drained answers Work with Drain once none of the actor's calls runs: the grain
	// may hand the session over without cutting a call.
	Drained struct{ AgentID string }
	// Abandon cancels LLM call CallID without a CallLost: the grain started it from a
	// state whose append failed, and reloads.
	Abandon struct{ CallID string }
	// Running asks the actor which calls it runs; it answers with *Runs once every
	// message queued before was handled. For tests: the calls are tasks of the actor,
	// not actors a test could find in the process registry.
	Running struct{}
	// Runs answers Running: the call id of the running LLM call ("" when none) and the
	// idempotency keys of the running tool calls.
	Runs struct {
		LLMCall string
		Tools   []string
	}
)

// Actor is an agent: the session's orchestrator or one of its sub-agents, a supervised
// child of the session grain that runs its agent's LLM call and tool calls as tasks on
// the dispatch pool (Call). It never decides and never writes: results go to the grain,
// which commits them and sends new Work.
type Actor struct {
	// rel lets the props forget what made this actor (actors/release).
	rel         *release.Handle
	id          string
	calls       Calls
	maxParallel int
	// callTimeout bounds an LLM call (0: none): a call still running after it is
	// cancelled, and the grain fails the call (CallLost), even if the provider ignores
	// its own deadline.
	callTimeout time.Duration
	log         *slog.Logger
	// watchdog fires callTimeout after the running LLM call started (one timer, reset
	// for every call).
	watchdog *time.Timer

	// llm is the running LLM call (nil: none).
	llm *task
	// tools are the running tool calls by idempotency key.
	tools map[string]*task
	// done are the calls this actor already ran in this generation: never started twice
	// (a result may still be on its way to the grain while older Work arrives).
	done       map[callKey]bool
	generation uint64
	// last is the newest Work: a call that ends frees room (an LLM call, a tool slot)
	// for what it says is due.
	last *Work
	// started numbers the calls started (their names in supervision events).
	started uint64
}

// callKey is a call: an LLM call by id or a tool call by idempotency key.
type callKey struct {
	tool bool
	key  string
}

// Props returns the props of agent id's actor. Its calls are run again when they panic
// up to 3 times a minute (Supervisor: an LLM call is made again; a tool call runs again
// under the same idempotency key); past that the grain fails the call. An LLM call still
// running after callTimeout (0: no bound) is cancelled, which fails it the same way.
func Props(id string, calls Calls, maxParallelTools int, callTimeout time.Duration, log *slog.Logger) *actor.Props {
	return release.Props(func(h *release.Handle) actor.Actor {
		return &Actor{rel: h, id: id, calls: calls, maxParallel: max(maxParallelTools, 1), callTimeout: callTimeout, log: log}
	}, dispatch.Props())
}

// Supervisor is the strategy the grain applies to its agent actors, and an agent actor
// to its calls that panic: restart a crashed actor (it asks for Work again) or run a
// call again, up to 3 times a minute; past that the actor stops, or the call is reported
// lost and the grain fails it.
func Supervisor() actor.SupervisorStrategy {
	return actor.NewOneForOneStrategy(3, time.Minute, actor.DefaultDecider)
}

// callStrategy is Supervisor, applied to the calls of every agent actor.
var callStrategy = Supervisor()

// callOverdue fires when the running LLM call may have run for callTimeout.
type callOverdue struct{}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *callEnded:
		a.onEnded(ctx, msg)
	case *Work:
		a.onWork(ctx, msg)
	case *actor.Started:
		a.onStarted(ctx)
	case *Abandon:
		a.onAbandon(msg)
	case *callOverdue:
		if t := a.llm; t != nil && a.callTimeout > 0 && time.Since(t.start) >= a.callTimeout {
			a.log.Warn("LLM call overdue; stopping it", "agent", a.name(), "call_id", t.key.key, "after", a.callTimeout)
			a.lose(ctx, t)
		}
	case *Running:
		runs := &Runs{}
		if a.llm != nil {
			runs.LLMCall = a.llm.key.key
		}
		for key := range a.tools {
			runs.Tools = append(runs.Tools, key)
		}
		ctx.Respond(runs)
	case *actor.Touch:
		// Proto.Actor answers it (once every message queued before it was handled).
	case *actor.Stopping, *actor.Restarting:
		// The session passivated, moved, ended or was cancelled, or the actor crashed:
		// its calls are abandoned (a restarted actor asks for Work and starts them again).
		a.cancelAll()
	case *actor.Stopped:
		// Proto.Actor may keep a stopped actor's context reachable for a while (its
		// parent's set of children keeps stale references until the slots are reused):
		// let go of the session's state, its history cache and the calls.
		a.rel.Release()
		a.calls, a.last, a.llm, a.watchdog = nil, nil, nil, nil
		a.tools, a.done = nil, nil
	default:
		if _, system := msg.(actor.SystemMessage); system {
			return
		}
		a.log.Warn("agent actor: unexpected message", "agent", a.name(), "type", fmt.Sprintf("%T", msg))
	}
}

func (a *Actor) onStarted(ctx actor.Context) {
	a.llm, a.tools, a.done, a.last = nil, map[string]*task{}, map[callKey]bool{}, nil
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
		if a.llm == nil && len(a.tools) == 0 {
			ctx.Send(ctx.Parent(), &Drained{AgentID: a.id})
		}
		return
	}
	p, pending, ok := due(w.State, a.id)
	if !ok {
		return
	}
	if w.Generation != a.generation {
		a.generation, a.done = w.Generation, map[callKey]bool{}
	}
	if p != nil && a.llm == nil && !a.done[callKey{key: p.GetCallId()}] {
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
		if a.tools[key] != nil || a.done[callKey{tool: true, key: key}] || awaitsHuman(w.State, key) || (w.CallOnly && !w.EarlyTools[key]) {
			continue
		}
		t := a.newTask(ctx, a.calls.ToolCall(w.State, a.id, c), callKey{tool: true, key: key})
		a.tools[key] = t
		a.done[t.key] = true
		t.run()
	}
}

// startCall starts LLM call p and its watchdog.
func (a *Actor) startCall(ctx actor.Context, st *messages.SessionState, p *messages.PendingCall) {
	t := a.newTask(ctx, a.calls.LLMCall(st, a.id, p), callKey{key: p.GetCallId()})
	a.llm = t
	a.done[t.key] = true
	if a.callTimeout > 0 {
		t.start = time.Now()
		if a.watchdog == nil {
			self, root := ctx.Self(), ctx.ActorSystem().Root
			a.watchdog = time.AfterFunc(a.callTimeout, func() { root.Send(self, &callOverdue{}) })
		} else {
			a.watchdog.Reset(a.callTimeout)
		}
	}
	t.run()
}

func (a *Actor) onAbandon(m *Abandon) {
	if a.last != nil && a.last.CallOnly {
		a.last = nil // its state will not be stored: wait for the grain's next Work
	}
	if a.llm == nil || a.llm.key.key != m.CallID {
		return
	}
	a.llm.cancel()
	a.end(a.llm)
}

// task is a running call: a Call on a worker of the dispatch pool, which sends its end
// (callEnded) to the actor unless it was cancelled.
type task struct {
	call   Call
	key    callKey
	ctx    context.Context
	cancel context.CancelFunc
	// self and root send the end to the actor.
	self *actor.PID
	root *actor.RootContext
	// start is when an LLM call started (its watchdog's reference).
	start time.Time
	// n numbers the call under its actor; stats are its panics (nil: none).
	n     uint64
	stats *actor.RestartStatistics
}

// callEnded is the end of a task's run: its result, or the panic that ended it.
type callEnded struct {
	t     *task
	res   any
	crash any
	stack []byte
}

func (a *Actor) newTask(ctx actor.Context, call Call, key callKey) *task {
	a.started++
	t := &task{call: call, key: key, self: ctx.Self(), root: ctx.ActorSystem().Root, n: a.started}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t
}

// run runs the call on a warm worker of the dispatch pool: its stack (the request build,
// tracing, the provider's client) is deep, and a new goroutine would grow and copy its
// stack on every call.
func (t *task) run() { dispatch.Run(t.exec) }

func (t *task) exec() {
	end := &callEnded{t: t}
	defer func() {
		if p := recover(); p != nil {
			end.res, end.crash, end.stack = nil, p, debug.Stack()
		}
		// A cancelled call was abandoned: its end, if still due, is the actor's.
		if t.ctx.Err() == nil {
			t.root.Send(t.self, end)
		}
	}()
	end.res = t.call(t.ctx)
}

// running reports whether t is one of the actor's running calls (not abandoned).
func (a *Actor) running(t *task) bool {
	if t.key.tool {
		return a.tools[t.key.key] == t
	}
	return a.llm == t
}

// end forgets the running call t.
func (a *Actor) end(t *task) {
	if t.key.tool {
		delete(a.tools, t.key.key)
		return
	}
	a.llm = nil
	if a.watchdog != nil {
		a.watchdog.Stop()
	}
}

// onEnded forwards a call's result to the grain, and starts what the newest Work says is
// due in the room it frees. The end of an abandoned call is dropped; a call that
// panicked is run again or reported lost (crashed).
func (a *Actor) onEnded(ctx actor.Context, e *callEnded) {
	t := e.t
	if !a.running(t) {
		return
	}
	if e.crash != nil {
		a.crashed(ctx, t, e)
		return
	}
	a.end(t)
	t.cancel() // frees the context's resources; the call has returned
	ctx.Send(ctx.Parent(), e.res)
	if a.last != nil {
		a.onWork(ctx, a.last)
	}
}

// lose cancels the running call t and reports it lost: the grain fails it.
func (a *Actor) lose(ctx actor.Context, t *task) {
	t.cancel()
	a.end(t)
	if t.key.tool {
		ctx.Send(ctx.Parent(), &ToolLost{AgentID: a.id, Key: t.key.key})
	} else {
		ctx.Send(ctx.Parent(), &CallLost{AgentID: a.id, CallID: t.key.key})
	}
	if a.last != nil {
		a.onWork(ctx, a.last)
	}
}

// crashed handles a call that panicked as Proto.Actor handles a crashed child under
// Supervisor: the failure is published on the event stream as a supervision event of
// {agent actor}/step-runner$n (tool-runner$n), which the observer logs, counts and keeps;
// the call runs again up to 3 times a minute, and past that it is reported lost.
func (a *Actor) crashed(ctx actor.Context, t *task, e *callEnded) {
	name := StepRunnerName
	if t.key.tool {
		name = ToolRunnerName
	}
	pid := actor.NewPID(ctx.Self().GetAddress(), fmt.Sprintf("%s/%s$%d", ctx.Self().GetId(), name, t.n))
	a.log.Error("agent call panicked", "agent", a.name(), "actor", pid.GetId(), "reason", e.crash, "stack", string(e.stack))
	if t.stats == nil {
		t.stats = actor.NewRestartStatistics()
	}
	callStrategy.HandleFailure(ctx.ActorSystem(), callSupervisor{a: a, ctx: ctx, t: t}, pid, t.stats, e.crash, nil)
}

// callSupervisor carries out the strategy's directive for a call that panicked.
type callSupervisor struct {
	a   *Actor
	ctx actor.Context
	t   *task
}

// Children implements actor.Supervisor.
func (s callSupervisor) Children() []*actor.PID { return nil }

// EscalateFailure implements actor.Supervisor: the call is lost (Supervisor never
// escalates).
func (s callSupervisor) EscalateFailure(any, any) { s.a.lose(s.ctx, s.t) }

// RestartChildren implements actor.Supervisor: the call runs again.
func (s callSupervisor) RestartChildren(...*actor.PID) { s.t.run() }

// ResumeChildren implements actor.Supervisor: the call runs again (it has nothing to
// resume).
func (s callSupervisor) ResumeChildren(...*actor.PID) { s.t.run() }

// StopChildren implements actor.Supervisor: the call is lost.
func (s callSupervisor) StopChildren(...*actor.PID) { s.a.lose(s.ctx, s.t) }

// cancelAll abandons every running call.
func (a *Actor) cancelAll() {
	if a.llm != nil {
		a.llm.cancel()
		a.end(a.llm)
	}
	for _, t := range a.tools {
		t.cancel()
	}
	clear(a.tools)
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
