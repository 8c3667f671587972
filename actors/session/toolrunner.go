package session

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/fathom-agents/fathom/actors/agent"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// toolRunner is a call (agent.Call) an agent actor (actors/agent) runs on a worker of
// the dispatch pool: one recorded tool call through the executor (schema validation,
// timeout, panic recovery, sandbox routing), returning a *core.ToolResult the actor
// forwards to the grain. The actor abandoning the call cancels its context, and its
// result is then not reported.
type toolRunner struct {
	deps       *Deps
	sessionID  string
	subAgentID string
	tenant     string // the session's tenant: its tool_calls_per_minute delays the call
	user       string // the session's user_id and the sub-agent's type (memory tools)
	agentType  string
	model      string // the session's model: the result is counted with its tokenizer
	call       *messages.PendingTool
	// parent is the span the call belongs to (trace.go): a step or a sub-agent run.
	parent trace.SpanContext
}

func newToolRunner(d *Deps, sessionID, subAgentID string, st *messages.SessionState, c *messages.PendingTool, parent trace.SpanContext) agent.Call {
	r := &toolRunner{deps: d, sessionID: sessionID, subAgentID: subAgentID, tenant: st.GetTenant(), user: st.GetUserId(),
		agentType: st.GetSubAgents()[subAgentID].GetAgentType(), model: st.GetConfig().GetModel(), call: c, parent: parent}
	return func(ctx context.Context) any { return r.run(ctx) }
}

func (r *toolRunner) run(ctx context.Context) *core.ToolResult {
	c := r.call
	if r.parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, r.parent)
	}
	ctx, span := r.deps.Tracer.Start(ctx, "execute_tool "+c.GetTool(), trace.WithAttributes(
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIConversationID(r.sessionID),
		semconv.GenAIToolName(c.GetTool()),
		semconv.GenAIToolCallID(c.GetCallId()),
		attribute.String("fathom.session_id", r.sessionID),
		attribute.String("fathom.step_id", c.GetStepId()),
		attribute.String("fathom.idempotency_key", c.GetIdempotencyKey()),
		attribute.String("fathom.sub_agent_id", r.subAgentID),
	))
	defer span.End()
	if q := r.deps.Quotas; q != nil {
		// Over the tenant's tool_calls_per_minute the call waits; it never fails. A call
		// abandoned while it waits reports nothing (actors/agent drops it).
		if err := q.WaitToolCall(ctx, r.tenant); err != nil {
			return &core.ToolResult{Key: c.GetIdempotencyKey(), Res: tools.Result{CallID: c.GetCallId(), Err: tools.ExecutionError(c.GetTool(), "cancelled: "+err.Error(), true)}}
		}
	}
	ctx = auth.WithTenant(ctx, r.tenant) // the sandbox shares its connections by tenant
	res := r.deps.Tools.Run(ctx, tools.Call{
		ID: c.GetCallId(), Name: c.GetTool(), Args: json.RawMessage(c.GetArgs()), IdempotencyKey: c.GetIdempotencyKey(),
		SessionID: r.sessionID, StepID: c.GetStepId(), SubAgentID: r.subAgentID, UserID: r.user, AgentType: r.agentType,
	})
	if res.Err != nil {
		span.SetStatus(codes.Error, res.Err.Error())
		span.SetAttributes(attribute.String("error.type", string(res.Err.Type)))
	}
	res = capResult(ctx, r.deps, r.sessionID, c.GetCallId(), res)
	return &core.ToolResult{Key: c.GetIdempotencyKey(), Res: res, Tokens: r.deps.Config.CountMessageContext(ctx, r.model, core.ToolMessage(c.GetCallId(), res))}
}
