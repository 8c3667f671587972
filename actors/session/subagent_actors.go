package session

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"go.opentelemetry.io/otel/attribute"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/actors/subagent"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// The grain's side of its sub-agent actors: one supervised child per running sub-agent,
// told the committed state after every commit (Work), asked again when it restarts
// (NeedWork). Its children report results the grain decides on like its own runners'.

// subAgentCalls makes the children of a session's sub-agent actors.
type subAgentCalls struct {
	deps      *Deps
	sessionID string
}

// LLMCall implements subagent.Calls.
func (c subAgentCalls) LLMCall(st *messages.SessionState, sa *messages.SubagentState) *actor.Props {
	if agent, ok := c.deps.Config.Registry().ByName(sa.GetAgentType()); ok && agent.Run != nil {
		return subagent.FuncCallProps(agent.Run, st, sa, c.deps.Config, c.deps.Logger, subagent.Trace{
			Parent: callParent(c.sessionID, st, sa.GetId(), ""), Tracer: c.deps.Tracer,
			Attrs: []attribute.KeyValue{attribute.String("fathom.session_id", c.sessionID), attribute.String("fathom.step_id", sa.GetStepId()),
				attribute.String("fathom.call_id", sa.GetPending().GetCallId()), attribute.String("gen_ai.agent.name", sa.GetAgentType())},
		})
	}
	return newRunnerProps(c.deps, c.sessionID, sa.GetPending(), st, nil, callParent(c.sessionID, st, sa.GetId(), ""))
}

// ToolCall implements subagent.Calls.
func (c subAgentCalls) ToolCall(st *messages.SessionState, sa *messages.SubagentState, pt *messages.PendingTool) *actor.Props {
	return newToolRunnerProps(c.deps, c.sessionID, sa.GetId(), st.GetConfig().GetModel(), pt, callParent(c.sessionID, st, sa.GetId(), ""))
}

// kickSubAgents starts an actor for every running sub-agent that has none and tells every
// one of them the committed state; actors of sub-agents that stopped running are stopped.
func (g *Grain) kickSubAgents(ctx cluster.GrainContext) {
	terminal := core.Terminal(g.state)
	for id, pid := range g.subs {
		if sa := g.state.GetSubAgents()[id]; terminal || sa == nil || !sa.GetRunning() {
			ctx.Stop(pid)
			delete(g.subs, id)
		}
	}
	if terminal {
		return
	}
	for id, sa := range g.state.GetSubAgents() {
		if !sa.GetRunning() {
			continue
		}
		pid, ok := g.subs[id]
		if !ok {
			if g.subs == nil {
				g.subs = map[string]*actor.PID{}
			}
			pid = ctx.SpawnPrefix(subagent.Props(id, subAgentCalls{deps: g.deps, sessionID: g.id}, g.deps.Config.MaxParallelTools, g.deps.Config.LLMTimeout+time.Minute, g.log), "subagent-"+id)
			g.subs[id] = pid
			// Its Started asks for Work (NeedWork): nothing to send yet.
			continue
		}
		ctx.Send(pid, g.work(sa))
	}
}

// work is the Work message for sub-agent sa's actor.
func (g *Grain) work(sa *messages.SubagentState) *subagent.Work {
	it := g.state.GetInterrupt()
	return &subagent.Work{State: g.state, Generation: g.loads,
		HoldTools: it.GetReason() == core.ReasonTool && it.GetStepId() == sa.GetStepId()}
}

func (g *Grain) onNeedWork(ctx cluster.GrainContext, m *subagent.NeedWork) {
	if pid, ok := g.subs[m.SubAgentID]; ok && g.loadErr == nil && !g.fenced {
		if sa := g.state.GetSubAgents()[m.SubAgentID]; sa != nil {
			ctx.Send(pid, g.work(sa))
		}
	}
}

// onCallLost fails a sub-agent's LLM call whose runner stopped without an answer (it
// crashed past its restart limit, or its answer could not be committed). After a normal
// answer the call is no longer pending and this is a no-op.
func (g *Grain) onCallLost(ctx cluster.GrainContext, m *subagent.CallLost) {
	sa := g.state.GetSubAgents()[m.SubAgentID]
	if g.loadErr != nil || sa.GetPending().GetCallId() != m.CallID {
		return
	}
	g.log.Warn("sub-agent call runner stopped without an answer; failing the call", "sub_agent_id", m.SubAgentID, "call_id", m.CallID)
	g.onLLMResult(ctx, &core.LLMResult{CallID: m.CallID, Err: errors.New("sub-agent runner stopped without an answer (crashed)")})
}

// onToolLost is onCallLost for a tool call: the call gets an execution ToolError the
// model reads.
func (g *Grain) onToolLost(ctx cluster.GrainContext, m *subagent.ToolLost) {
	sa, pt := core.SubAgentByTool(g.state, m.Key)
	if g.loadErr != nil || sa == nil || sa.GetId() != m.SubAgentID {
		return
	}
	g.log.Warn("sub-agent tool runner stopped without a result; failing the call", "sub_agent_id", m.SubAgentID, "key", m.Key)
	res := tools.Result{CallID: pt.GetCallId(), Err: tools.ExecutionError(pt.GetTool(), fmt.Sprintf("the tool runner of call %s stopped without a result", pt.GetCallId()), true)}
	g.onToolResult(ctx, &core.ToolResult{Key: m.Key, Res: res, Tokens: g.deps.Config.CountMessage(g.state.GetConfig().GetModel(), core.ToolMessage(pt.GetCallId(), res))})
}
