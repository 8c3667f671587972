package session

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/fathom-agents/fathom/actors/dispatch"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// toolRunner is a child of a session grain that runs one recorded tool call through the
// executor (schema validation, timeout, panic recovery, sandbox routing) and reports a
// *toolResult to its parent, then stops. Stopping it cancels the call.
type toolRunner struct {
	deps       *Deps
	sessionID  string
	subAgentID string
	model      string // the session's model: the result is counted with its tokenizer
	call       *messages.PendingTool
	cancel     context.CancelFunc
}

type toolRunnerDone struct{ res *core.ToolResult }

func newToolRunnerProps(d *Deps, sessionID, subAgentID, model string, c *messages.PendingTool) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &toolRunner{deps: d, sessionID: sessionID, subAgentID: subAgentID, model: model, call: c}
	}, dispatch.Props())
}

// Receive implements actor.Actor.
func (r *toolRunner) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		cctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		self, root := ctx.Self(), ctx.ActorSystem().Root
		go func() { root.Send(self, &toolRunnerDone{res: r.run(cctx)}) }()
	case *toolRunnerDone:
		ctx.Send(ctx.Parent(), msg.res)
		ctx.Stop(ctx.Self())
	case *actor.Stopping, *actor.Restarting:
		if r.cancel != nil {
			r.cancel()
		}
	case *actor.Stopped:
	default:
		r.deps.Logger.Warn("tool runner: unexpected message", "type", fmt.Sprintf("%T", msg), "session_id", r.sessionID)
	}
}

func (r *toolRunner) run(ctx context.Context) *core.ToolResult {
	c := r.call
	ctx, span := r.deps.Tracer.Start(ctx, "execute_tool "+c.GetTool(), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", c.GetTool()),
		attribute.String("gen_ai.tool.call.id", c.GetCallId()),
		attribute.String("fathom.session_id", r.sessionID),
		attribute.String("fathom.step_id", c.GetStepId()),
		attribute.String("fathom.idempotency_key", c.GetIdempotencyKey()),
		attribute.String("fathom.sub_agent_id", r.subAgentID),
	))
	defer span.End()
	res := r.deps.Tools.Run(ctx, tools.Call{
		ID: c.GetCallId(), Name: c.GetTool(), Args: json.RawMessage(c.GetArgs()), IdempotencyKey: c.GetIdempotencyKey(),
		SessionID: r.sessionID, StepID: c.GetStepId(), SubAgentID: r.subAgentID,
	})
	if res.Err != nil {
		span.SetStatus(codes.Error, res.Err.Error())
		span.SetAttributes(attribute.String("error.type", string(res.Err.Type)))
	}
	return &core.ToolResult{Key: c.GetIdempotencyKey(), Res: res, Tokens: r.deps.Config.CountMessage(r.model, core.ToolMessage(c.GetCallId(), res))}
}
