package session

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"go.opentelemetry.io/otel/attribute"

	"github.com/fathom-agents/fathom/actors/agent"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// The grain's side of its agent actors: one supervised child for the orchestrator while
// the session runs and one per running sub-agent, told the committed state after every
// commit (Work), asked again when it restarts (NeedWork). Their calls (step and tool
// runners) report results the grain decides on; the grain never runs a call itself.

// agentCalls makes the calls of a session's agent actors (agent.Calls).
type agentCalls struct {
	deps      *Deps
	sessionID string
	// hist is the orchestrator's history as of its last step call, extended with each
	// call (core.HistoryCache): a step call's context costs the same at any history
	// length. Only the orchestrator's actor uses it (from its Receive).
	hist *core.HistoryCache
}

// LLMCall implements agent.Calls.
func (c agentCalls) LLMCall(st *messages.SessionState, id string, p *messages.PendingCall) agent.Call {
	if id == agent.Orchestrator {
		var hist []memory.Message
		if p.GetPurpose() == core.PurposeStep && c.hist != nil {
			hist = c.hist.History(st)
		}
		return newRunner(c.deps, c.sessionID, p, st, hist, callParent(c.deps, c.sessionID, st, "", p.GetStepId()))
	}
	sa := st.GetSubAgents()[id]
	if a, ok := c.deps.Config.Registry().ByName(sa.GetAgentType()); ok && a.Run != nil {
		return agent.FuncCall(a.Run, st, sa, c.deps.Config.Core, c.deps.Config.LLMTimeout, agent.Trace{
			Parent: callParent(c.deps, c.sessionID, st, id, ""), Tracer: c.deps.Tracer,
			Attrs: []attribute.KeyValue{attribute.String("fathom.session_id", c.sessionID), attribute.String("fathom.step_id", sa.GetStepId()),
				attribute.String("fathom.call_id", p.GetCallId()), attribute.String("gen_ai.agent.name", sa.GetAgentType())},
		})
	}
	return newRunner(c.deps, c.sessionID, p, st, nil, callParent(c.deps, c.sessionID, st, id, ""))
}

// ToolCall implements agent.Calls.
func (c agentCalls) ToolCall(st *messages.SessionState, id string, pt *messages.PendingTool) agent.Call {
	stepID := ""
	if id == agent.Orchestrator {
		stepID = pt.GetStepId()
	}
	return newToolRunner(c.deps, c.sessionID, id, st, pt, callParent(c.deps, c.sessionID, st, id, stepID))
}

// agents are the grain's agent actors, by agent id (agent.Orchestrator, sub_agent_id):
// they run the calls. The grain tells them the committed state after every commit
// (kick), answers a restarted one (needWork), starts the orchestrator's next LLM call
// early (startEarly) and drains them (drain.go).
type agents struct {
	deps *Deps
	id   string
	// log is the grain's logger (it follows the activation's span): the actors log with
	// the one current when they start.
	log  **slog.Logger
	pids map[string]*actor.PID
	// gen is the number of loads of the state from the journal (Work's generation).
	gen uint64
	// due is set while the orchestrator has a call due that its actor runs (kick).
	due bool
	// early is the call id of the orchestrator's call last started from a state still
	// being appended (startEarly).
	early string
	// draining is set once the member drains (drain.go): no call starts; drainWait are
	// the actors told so that have not answered Drained yet.
	draining  bool
	drainWait map[string]bool
}

// kick tells every agent actor the committed state st, starting the orchestrator's once
// it has a call due and one for every running sub-agent that has none; actors of agents
// that stopped running (every one, once the session ended) are stopped.
func (a *agents) kick(ctx cluster.GrainContext, st *messages.SessionState) {
	terminal := core.Terminal(st)
	for id, pid := range a.pids {
		if sa := st.GetSubAgents()[id]; terminal || (id != agent.Orchestrator && (sa == nil || !sa.GetRunning())) {
			ctx.Stop(pid)
			delete(a.pids, id)
			delete(a.drainWait, id)
		}
	}
	a.due = false
	if terminal {
		return
	}
	if orchestratorDue(st) {
		a.due = true
		a.tell(ctx, agent.Orchestrator, a.work(st, agent.Orchestrator))
	} else if pid, ok := a.pids[agent.Orchestrator]; ok {
		a.send(ctx, agent.Orchestrator, pid, a.work(st, agent.Orchestrator))
	}
	for id, sa := range st.GetSubAgents() {
		if sa.GetRunning() {
			a.tell(ctx, id, a.work(st, id))
		}
	}
}

// tell sends w to agent id's actor, starting the actor if it has none.
func (a *agents) tell(ctx cluster.GrainContext, id string, w *agent.Work) {
	pid, ok := a.pids[id]
	if !ok {
		if a.pids == nil {
			a.pids = map[string]*actor.PID{}
		}
		calls := agentCalls{deps: a.deps, sessionID: a.id}
		if id == agent.Orchestrator {
			calls.hist = &core.HistoryCache{}
		}
		pid = ctx.SpawnPrefix(agent.Props(id, calls, a.deps.Config.MaxParallelTools, a.deps.Config.LLMTimeout+time.Minute, *a.log), agent.ActorName(id))
		a.pids[id] = pid
	}
	a.send(ctx, id, pid, w)
}

// orchestratorDue reports whether the orchestrator has a call to run in st: its pending
// LLM call, or a pending tool call not held (by an interrupt or a human's answer).
func orchestratorDue(st *messages.SessionState) bool {
	if st.GetPending() != nil {
		return true
	}
	for _, c := range st.GetPendingTools() {
		if !core.HeldTool(st, c) {
			return true
		}
	}
	return false
}

// work is the Work message for agent id's actor in state st.
func (a *agents) work(st *messages.SessionState, id string) *agent.Work {
	it := st.GetInterrupt()
	// The orchestrator's tools wait out every interrupt (core.HeldTool); a sub-agent's
	// only a tool breakpoint in its own turn.
	hold := it != nil
	if id != agent.Orchestrator {
		hold = it.GetReason() == core.ReasonTool && it.GetStepId() == st.GetSubAgents()[id].GetStepId()
	}
	return &agent.Work{State: st, Generation: a.gen, HoldTools: hold, Drain: a.draining}
}

// needWork answers an agent actor that restarted with the state st.
func (a *agents) needWork(ctx cluster.GrainContext, st *messages.SessionState, m *agent.NeedWork) {
	pid, ok := a.pids[m.AgentID]
	if !ok || core.Terminal(st) {
		return
	}
	if m.AgentID == agent.Orchestrator || st.GetSubAgents()[m.AgentID] != nil {
		a.send(ctx, m.AgentID, pid, a.work(st, m.AgentID))
	}
}

// startEarly starts the orchestrator's LLM call that next makes pending while next is
// still being appended, so the model works while the journal commits (with a fast model
// the step's engine work overlaps the commit instead of following it): the orchestrator's
// actor gets next as Work with CallOnly. It is safe because an LLM call has no side
// effect the journal must know of first: its result reaches the grain through the
// mailbox, after the commit returns, and is decided against the committed state; if the
// append fails, cancelEarly abandons the call and its result, if any, no longer matches
// a pending call. The orchestrator's tool calls that next makes pending start early too
// when their tools have no effects outside the session (tools.NoEffects) and nothing
// holds them (startableTools); every other tool call may have effects outside, so it starts
// only once its tool_called is durable. cur is the state before next. It reports whether
// it started an LLM call.
func (a *agents) startEarly(ctx cluster.GrainContext, cur, next *messages.SessionState) bool {
	if a.draining || core.Terminal(next) {
		return false
	}
	p := next.GetPending()
	call := p != nil && p.GetCallId() != cur.GetPending().GetCallId()
	tools := a.startableTools(cur, next)
	if !call && tools == nil {
		return false
	}
	if call {
		a.early = p.GetCallId()
	}
	a.tell(ctx, agent.Orchestrator, &agent.Work{State: next, Generation: a.gen, CallOnly: true, EarlyTools: tools})
	return call
}

// startableTools are the idempotency keys of the orchestrator's tool calls pending in next
// and not in cur that may start before next is durable: their tools have no effects
// (tools.NoEffects) and no interrupt or human holds them. nil when there are none.
func (a *agents) startableTools(cur, next *messages.SessionState) map[string]bool {
	if len(next.GetPendingTools()) == 0 || next.GetInterrupt() != nil {
		return nil
	}
	var out map[string]bool
	for _, c := range next.GetPendingTools() {
		key := c.GetIdempotencyKey()
		if slices.ContainsFunc(cur.GetPendingTools(), func(o *messages.PendingTool) bool { return o.GetIdempotencyKey() == key }) || core.HeldTool(next, c) {
			continue
		}
		if !a.noEffects(c.GetTool()) {
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[key] = true
	}
	return out
}

// noEffects reports whether the node's tool named tool declares that its calls change
// nothing outside the session (tools.NoEffects).
func (a *agents) noEffects(tool string) bool {
	if a.deps == nil || a.deps.Tools == nil || a.deps.Tools.Registry == nil {
		return false
	}
	t, ok := a.deps.Tools.Registry.Get(tool)
	return ok && tools.HasNoEffects(t)
}

// cancelEarly undoes startEarly after a failed append. A tool call started early runs to
// its end (it has no effects); its result is decided against the reloaded state, which
// may no longer have the call pending.
func (a *agents) cancelEarly(ctx cluster.GrainContext, started bool) {
	if pid, ok := a.pids[agent.Orchestrator]; ok && started && a.early != "" {
		ctx.Send(pid, &agent.Abandon{CallID: a.early})
	}
	a.early = ""
}

// lostCall is the result that fails a call whose runner stopped without an answer (it
// crashed past its restart limit or overran the call timeout), as input to the decision
// against st (a *core.LLMResult or a *core.ToolResult), with what it is; nil when msg
// (a CallLost or a ToolLost) names a call no longer pending in st (answered: nothing to
// do). A lost tool call gets an execution ToolError the model reads.
func lostCall(st *messages.SessionState, msg any, d *Deps) (input any, what string) {
	switch m := msg.(type) {
	case *agent.CallLost:
		if pendingCallOf(st, m.AgentID) != m.CallID {
			return nil, ""
		}
		return &core.LLMResult{CallID: m.CallID, Err: errors.New("step runner stopped without an answer (crashed or hung)")},
			"step runner of " + agent.ActorName(m.AgentID) + " stopped without an answer; failing call " + m.CallID
	case *agent.ToolLost:
		pt := pendingToolOf(st, m.AgentID, m.Key)
		if pt == nil {
			return nil, ""
		}
		res := tools.Result{CallID: pt.GetCallId(), Err: tools.ExecutionError(pt.GetTool(), fmt.Sprintf("the tool runner of call %s stopped without a result", pt.GetCallId()), true)}
		return &core.ToolResult{Key: m.Key, Res: res, Tokens: d.Config.CountMessage(st.GetConfig().GetModel(), core.ToolMessage(pt.GetCallId(), res))},
			"tool runner of " + agent.ActorName(m.AgentID) + " stopped without a result; failing call " + m.Key
	}
	return nil, ""
}

// pendingCallOf is the call id of agent id's pending LLM call in st ("" when none).
func pendingCallOf(st *messages.SessionState, id string) string {
	if id == agent.Orchestrator {
		return st.GetPending().GetCallId()
	}
	return st.GetSubAgents()[id].GetPending().GetCallId()
}

// pendingToolOf is agent id's pending tool call with idempotency key in st (nil when none).
func pendingToolOf(st *messages.SessionState, id, key string) *messages.PendingTool {
	if id != agent.Orchestrator {
		sa, pt := core.SubAgentByTool(st, key)
		if sa == nil || sa.GetId() != id {
			return nil
		}
		return pt
	}
	for _, pt := range st.GetPendingTools() {
		if pt.GetIdempotencyKey() == key {
			return pt
		}
	}
	return nil
}
