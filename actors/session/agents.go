package session

import (
	"errors"
	"fmt"
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
// commit (Work), asked again when it restarts (NeedWork). Their children (step and tool
// runners) report results the grain decides on; the grain never runs a call itself.

// agentCalls makes the children of a session's agent actors.
type agentCalls struct {
	deps      *Deps
	sessionID string
	// hist is the orchestrator's history as of its last step call, extended with each
	// call (core.HistoryCache): a step call's context costs the same at any history
	// length. Only the orchestrator's actor uses it (from its Receive).
	hist *core.HistoryCache
}

// LLMCall implements agent.Calls.
func (c agentCalls) LLMCall(st *messages.SessionState, id string, p *messages.PendingCall) *actor.Props {
	if id == agent.Orchestrator {
		var hist []memory.Message
		if p.GetPurpose() == core.PurposeStep && c.hist != nil {
			hist = c.hist.History(st)
		}
		return newRunnerProps(c.deps, c.sessionID, p, st, hist, callParent(c.deps, c.sessionID, st, "", p.GetStepId()))
	}
	sa := st.GetSubAgents()[id]
	if a, ok := c.deps.Config.Registry().ByName(sa.GetAgentType()); ok && a.Run != nil {
		return agent.FuncCallProps(a.Run, st, sa, c.deps.Config, c.deps.Logger, agent.Trace{
			Parent: callParent(c.deps, c.sessionID, st, id, ""), Tracer: c.deps.Tracer,
			Attrs: []attribute.KeyValue{attribute.String("fathom.session_id", c.sessionID), attribute.String("fathom.step_id", sa.GetStepId()),
				attribute.String("fathom.call_id", p.GetCallId()), attribute.String("gen_ai.agent.name", sa.GetAgentType())},
		})
	}
	return newRunnerProps(c.deps, c.sessionID, p, st, nil, callParent(c.deps, c.sessionID, st, id, ""))
}

// ToolCall implements agent.Calls.
func (c agentCalls) ToolCall(st *messages.SessionState, id string, pt *messages.PendingTool) *actor.Props {
	stepID := ""
	if id == agent.Orchestrator {
		stepID = pt.GetStepId()
	}
	return newToolRunnerProps(c.deps, c.sessionID, id, st, pt, callParent(c.deps, c.sessionID, st, id, stepID))
}

// kickAgents tells every agent actor the committed state, starting the orchestrator's
// once it has a call due and one for every running sub-agent that has none; actors of
// agents that stopped running (every one, once the session ended) are stopped.
func (g *Grain) kickAgents(ctx cluster.GrainContext) {
	terminal := core.Terminal(g.state)
	for id, pid := range g.agents {
		if sa := g.state.GetSubAgents()[id]; terminal || (id != agent.Orchestrator && (sa == nil || !sa.GetRunning())) {
			ctx.Stop(pid)
			delete(g.agents, id)
			delete(g.drainWait, id)
		}
	}
	g.due = false
	if terminal {
		return
	}
	if g.orchestratorDue() {
		g.due = true
		g.tell(ctx, agent.Orchestrator, g.work(agent.Orchestrator))
	} else if pid, ok := g.agents[agent.Orchestrator]; ok {
		g.sendWork(ctx, agent.Orchestrator, pid, g.work(agent.Orchestrator))
	}
	for id, sa := range g.state.GetSubAgents() {
		if sa.GetRunning() {
			g.tell(ctx, id, g.work(id))
		}
	}
}

// tell sends w to agent id's actor, starting the actor if it has none.
func (g *Grain) tell(ctx cluster.GrainContext, id string, w *agent.Work) {
	pid, ok := g.agents[id]
	if !ok {
		if g.agents == nil {
			g.agents = map[string]*actor.PID{}
		}
		calls := agentCalls{deps: g.deps, sessionID: g.id}
		if id == agent.Orchestrator {
			calls.hist = &core.HistoryCache{}
		}
		pid = ctx.SpawnPrefix(agent.Props(id, calls, g.deps.Config.MaxParallelTools, g.deps.Config.LLMTimeout+time.Minute, g.log), agent.ActorName(id))
		g.agents[id] = pid
	}
	g.sendWork(ctx, id, pid, w)
}

// orchestratorDue reports whether the orchestrator has a call to run: its pending LLM
// call, or a pending tool call not held (by an interrupt or a human's answer).
func (g *Grain) orchestratorDue() bool {
	if g.state.GetPending() != nil {
		return true
	}
	for _, c := range g.state.GetPendingTools() {
		if !core.HeldTool(g.state, c) {
			return true
		}
	}
	return false
}

// work is the Work message for agent id's actor.
func (g *Grain) work(id string) *agent.Work {
	it := g.state.GetInterrupt()
	// The orchestrator's tools wait out every interrupt (core.HeldTool); a sub-agent's
	// only a tool breakpoint in its own turn.
	hold := it != nil
	if id != agent.Orchestrator {
		hold = it.GetReason() == core.ReasonTool && it.GetStepId() == g.state.GetSubAgents()[id].GetStepId()
	}
	return &agent.Work{State: g.state, Generation: g.loads, HoldTools: hold, Drain: g.draining}
}

func (g *Grain) onNeedWork(ctx cluster.GrainContext, m *agent.NeedWork) {
	pid, ok := g.agents[m.AgentID]
	if !ok || g.loadErr != nil || g.fenced || core.Terminal(g.state) {
		return
	}
	if m.AgentID == agent.Orchestrator || g.state.GetSubAgents()[m.AgentID] != nil {
		g.sendWork(ctx, m.AgentID, pid, g.work(m.AgentID))
	}
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

// onCallLost fails an agent's LLM call whose runner stopped without an answer (it
// crashed past its restart limit or overran the call timeout). After a normal answer
// the call is no longer pending and this is a no-op.
func (g *Grain) onCallLost(ctx cluster.GrainContext, m *agent.CallLost) {
	if g.loadErr != nil || pendingCallOf(g.state, m.AgentID) != m.CallID {
		return
	}
	g.log.Warn("step runner stopped without an answer; failing the call", "agent", agent.ActorName(m.AgentID), "call_id", m.CallID)
	g.onLLMResult(ctx, &core.LLMResult{CallID: m.CallID, Err: errors.New("step runner stopped without an answer (crashed or hung)")})
}

// onToolLost is onCallLost for a tool call: the call gets an execution ToolError the
// model reads.
func (g *Grain) onToolLost(ctx cluster.GrainContext, m *agent.ToolLost) {
	pt := pendingToolOf(g.state, m.AgentID, m.Key)
	if g.loadErr != nil || pt == nil {
		return
	}
	g.log.Warn("tool runner stopped without a result; failing the call", "agent", agent.ActorName(m.AgentID), "key", m.Key)
	res := tools.Result{CallID: pt.GetCallId(), Err: tools.ExecutionError(pt.GetTool(), fmt.Sprintf("the tool runner of call %s stopped without a result", pt.GetCallId()), true)}
	g.onToolResult(ctx, &core.ToolResult{Key: m.Key, Res: res, Tokens: g.deps.Config.CountMessage(g.state.GetConfig().GetModel(), core.ToolMessage(pt.GetCallId(), res))})
}

// staleLoss reports whether a CallLost or ToolLost names a call that is no longer
// pending in the grain's (possibly optimistic) state: answered, so nothing to do and
// no need to wait for the commit pipeline. After a failed append the grain reloads and
// the call, if still pending, is made again.
func (g *Grain) staleLoss(msg any) bool {
	switch m := msg.(type) {
	case *agent.CallLost:
		return pendingCallOf(g.state, m.AgentID) != m.CallID
	case *agent.ToolLost:
		return pendingToolOf(g.state, m.AgentID, m.Key) == nil
	}
	return false
}
