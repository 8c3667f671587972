package session

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/fathom-agents/fathom/actors/dispatch"
	"github.com/fathom-agents/fathom/actors/release"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
)

// runner is the step-runner child of an agent actor (actors/agent; the orchestrator's or
// a sub-agent's): it builds the request from the committed (immutable) state, fitting
// the history into the context budget, makes one LLM call outside the grain's mailbox,
// counts the answer's tokens and reports a *core.LLMResult to its parent (which forwards
// it to the grain), then stops. Its goroutine is cancelled when the runner stops (the
// grain passivated, crashed or moved, or the session was cancelled). Retries, rate
// limits and the circuit breaker are the provider's (llm/resilient); what is left for
// the session is the decision to retry the whole step later.
type runner struct {
	deps      *Deps
	sessionID string
	callID    string
	stepID    string
	purpose   string
	reqSeq    uint64
	// state is the state that made the call pending. It is never mutated (the grain
	// swaps in new states), so the runner's goroutine may read it.
	state *messages.SessionState
	// hist is the state's history for a step call (the grain's core.HistoryCache; nil:
	// built from state). Never mutated either.
	hist []memory.Message
	// parent is the span the call belongs to (trace.go): a step, a sub-agent run or the
	// session's root.
	parent trace.SpanContext
	cancel context.CancelFunc
	// rel lets the props forget what made this runner (actors/release).
	rel *release.Handle
}

func newRunnerProps(d *Deps, sessionID string, p *messages.PendingCall, st *messages.SessionState, hist []memory.Message, parent trace.SpanContext) *actor.Props {
	return release.Props(func(h *release.Handle) actor.Actor {
		return &runner{rel: h, deps: d, sessionID: sessionID, callID: p.GetCallId(), stepID: p.GetStepId(), purpose: p.GetPurpose(), reqSeq: p.GetRequestedSeq(), state: st, hist: hist, parent: parent}
	}, dispatch.Props())
}

// Receive implements actor.Actor.
func (r *runner) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		r.onStarted(ctx)
	case *actor.Stopping, *actor.Restarting:
		if r.cancel != nil {
			r.cancel()
		}
	case *actor.Stopped:
		r.rel.Release()
	default:
		r.deps.Logger.Warn("step runner: unexpected message", "type", fmt.Sprintf("%T", msg), "session_id", r.sessionID)
	}
}

func (r *runner) onStarted(ctx actor.Context) {
	// The call runs on a warm worker of the dispatch pool: its stack (the request build,
	// tracing, the provider's client) is deep, and a new goroutine would grow and copy its
	// stack on every call. The result goes straight to the parent, not through this
	// actor's mailbox: one hand-over less per step. A call cancelled by a stop or restart
	// (abandoned; its end, if still due, is the parent's childGone) reports nothing.
	r.cancel = dispatch.RunCall(ctx, func(cctx context.Context) any {
		res := r.call(cctx)
		// The worker was the only reader: let go of the state and history (see
		// Grain.release).
		r.state, r.hist = nil, nil
		return res
	})
}

// call makes the LLM call. It never panics: a panicking provider becomes an error result.
func (r *runner) call(ctx context.Context) (res *core.LLMResult) {
	spanName := "session.llm_call"
	switch r.purpose {
	case core.PurposePlan:
		spanName = "session.plan"
	case core.PurposeReplan:
		spanName = "session.replan"
	}
	if r.parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, r.parent)
	}
	ctx, span := r.deps.Tracer.Start(ctx, spanName, trace.WithAttributes(
		attribute.String("fathom.session_id", r.sessionID),
		attribute.String("fathom.step_id", r.stepID),
		attribute.String("fathom.call_id", r.callID),
	))
	defer span.End()
	defer func() {
		if p := recover(); p != nil {
			res = &core.LLMResult{CallID: r.callID, Err: fmt.Errorf("llm provider panicked: %v", p)}
		}
		if res.Err != nil {
			span.RecordError(res.Err)
			span.SetStatus(codes.Error, res.Err.Error())
		}
	}()
	req, info, err := buildContextRequest(ctx, r.deps, r.state, r.callID, r.hist)
	if err != nil {
		return &core.LLMResult{CallID: r.callID, Err: fmt.Errorf("build llm request: %w", err), Config: core.IsConfigError(err)}
	}
	if info != nil {
		span.SetAttributes(
			attribute.Int("fathom.context.total_tokens", int(info.GetTotalTokens())),
			attribute.Int("fathom.context.recent_count", int(info.GetRecentCount())),
			attribute.Int("fathom.context.semantic_count", int(info.GetSemanticCount())),
			attribute.Bool("fathom.context.has_summary", info.GetHasSummary()),
		)
	}
	if d := r.deps.Deltas; d != nil {
		var n, attempt uint32 = 0, 1
		req.OnRetry = func(a int) { attempt = uint32(a) }
		req.OnDelta = func(text string) {
			n++
			d.PublishDelta(r.sessionID, live.Delta{CallID: r.callID, StepID: r.stepID, Index: n, Attempt: attempt, AfterSeq: r.reqSeq, Text: text})
		}
	}
	resp, err := r.chat(ctx, req)
	if err != nil {
		return &core.LLMResult{CallID: r.callID, Err: err, Retryable: llm.IsRetryable(err) && ctx.Err() == nil}
	}
	out := &core.LLMResult{
		CallID: r.callID, Content: resp.Content, FinishReason: resp.FinishReason, Model: resp.Model,
		Duration: resp.Duration, CtxInfo: info, Thinking: core.ThinkingBlocks(resp.Thinking),
		Usage: &messages.Usage{
			InputTokens:  uint64(max(resp.Usage.InputTokens, 0)),
			OutputTokens: uint64(max(resp.Usage.OutputTokens, 0)),
			TotalTokens:  uint64(max(resp.Usage.TotalTokens, 0)),
			// Parts of the above: read from or written to the prompt cache, spent thinking.
			CachedInputTokens:     uint64(max(resp.Usage.CachedInputTokens, 0)),
			CacheWriteInputTokens: uint64(max(resp.Usage.CacheWriteInputTokens, 0)),
			ReasoningTokens:       uint64(max(resp.Usage.ReasoningTokens, 0)),
		},
	}
	r.deps.checkPrice(resp.Model, r.state.GetConfig().GetModel())
	for _, c := range resp.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, &messages.ToolCallRequest{Id: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	// Counted as it will be recorded (decide normalises the call ids the same way).
	msg := llm.Message{Role: "assistant", Content: resp.Content}
	for _, c := range core.NormaliseToolCalls(out.ToolCalls) {
		msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.GetId(), Name: c.GetName(), Arguments: c.GetArguments()})
	}
	// Counting a long answer stops when the call is cancelled (its result is then not
	// reported).
	out.Tokens = r.deps.Config.CountMessageContext(ctx, r.state.GetConfig().GetModel(), msg)
	return out
}

func (r *runner) chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, r.deps.Config.LLMTimeout)
	defer cancel()
	ctx, span := r.deps.Tracer.Start(ctx, "chat "+req.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(r.deps.LLM.Name()),
		semconv.GenAIRequestModel(req.Model),
	))
	defer span.End()
	start := time.Now()
	// The system prompt and the history keep a stable order, so the prompt's prefix is
	// cacheable: Anthropic gets cache breakpoints, OpenAI caches the prefix on its own.
	req.PromptCache = true
	// The endpoint's fair share and the tenant's limits (llm/resilient) read the tenant here.
	ctx = auth.WithTenant(ctx, r.state.GetTenant())
	resp, err := r.deps.LLM.Chat(ctx, req)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return llm.Response{}, fmt.Errorf("chat %s: %w", req.Model, err)
	}
	if resp.Duration == 0 {
		resp.Duration = time.Since(start)
	}
	span.SetAttributes(
		semconv.GenAIResponseModel(resp.Model),
		semconv.GenAIUsageInputTokensKey.Int64(resp.Usage.InputTokens),
		semconv.GenAIUsageOutputTokensKey.Int64(resp.Usage.OutputTokens),
		semconv.GenAIResponseFinishReasons(resp.FinishReason),
	)
	return resp, nil
}
