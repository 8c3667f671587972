package session

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/fathom-agents/fathom/actors/agent"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
)

// runner is the step runner of an agent actor (actors/agent; the orchestrator's or a
// sub-agent's): a call (agent.Call) the actor runs on a worker of the dispatch pool,
// outside the grain's mailbox, that builds the request from the committed (immutable)
// state, fitting the history into the context budget, makes one LLM call, counts the
// answer's tokens and returns a *core.LLMResult, which the actor forwards to the grain.
// Its context is cancelled when the actor abandons the call (the grain passivated,
// crashed or moved, or the session was cancelled). Retries, rate limits and the circuit
// breaker are the provider's (llm/resilient); what is left for the session is the
// decision to retry the whole step later.
type runner struct {
	deps      *Deps
	sessionID string
	callID    string
	stepID    string
	purpose   string
	reqSeq    uint64
	// state is the state that made the call pending. It is never mutated (the grain
	// swaps in new states), so the call may read it.
	state *messages.SessionState
	// hist is the state's history for a step call (the grain's core.HistoryCache; nil:
	// built from state). Never mutated either.
	hist []memory.Message
	// parent is the span the call belongs to (trace.go): a step, a sub-agent run or the
	// session's root.
	parent trace.SpanContext
}

func newRunner(d *Deps, sessionID string, p *messages.PendingCall, st *messages.SessionState, hist []memory.Message, parent trace.SpanContext) agent.Call {
	r := &runner{deps: d, sessionID: sessionID, callID: p.GetCallId(), stepID: p.GetStepId(), purpose: p.GetPurpose(), reqSeq: p.GetRequestedSeq(), state: st, hist: hist, parent: parent}
	return r.run
}

// run makes the call (agent.Call).
func (r *runner) run(ctx context.Context) any {
	res := r.call(ctx)
	// The call was the only reader: let go of the state and history (see Grain.release).
	r.state, r.hist = nil, nil
	return res
}

// call makes the LLM call. It never panics: a panicking provider becomes an error result.
//
// The goroutine running it waits on the network for the whole model call, with every
// frame from here down on its stack. So what the call prepares and what it makes of the
// answer (spans and their attributes, the request, the result and its token count) is
// done in functions of their own, never inlined, whose frames are gone while it waits:
// the collector halves a stack that uses less than a quarter of its size, and a call in
// flight is on every active session's account.
func (r *runner) call(ctx context.Context) (res *core.LLMResult) {
	ctx, span := r.startSpan(ctx)
	defer span.End()
	defer r.recovered(span, &res)
	req, info, err := r.request(ctx, span)
	if err != nil {
		return r.unbuilt(err)
	}
	// The chat call itself, in its client span, bounded by the session's LLM timeout.
	chatCtx, cancel, chatSpan := r.startChat(ctx, req)
	defer cancel()
	defer chatSpan.End()
	start := time.Now()
	resp, err := r.deps.LLM.Chat(chatCtx, *req)
	if err != nil {
		return r.failed(ctx, chatSpan, req, err)
	}
	return r.result(ctx, chatSpan, &resp, start, info)
}

// failed is the result of a chat call that failed with err (see call).
//
//go:noinline
func (r *runner) failed(ctx context.Context, chatSpan trace.Span, req *llm.Request, err error) *core.LLMResult {
	recordError(chatSpan, err)
	err = fmt.Errorf("chat %s: %w", req.Model, err)
	return &core.LLMResult{CallID: r.callID, Err: err, Retryable: llm.IsRetryable(err) && ctx.Err() == nil}
}

// recovered, deferred by call, turns a panic into an error result, and marks the span
// of a failed call.
func (r *runner) recovered(span trace.Span, res **core.LLMResult) {
	if p := recover(); p != nil {
		*res = &core.LLMResult{CallID: r.callID, Err: fmt.Errorf("llm provider panicked: %v", p)}
	}
	if (*res).Err != nil {
		recordError(span, (*res).Err)
	}
}

// unbuilt is the result of a call whose request could not be built (see call).
//
//go:noinline
func (r *runner) unbuilt(err error) *core.LLMResult {
	return &core.LLMResult{CallID: r.callID, Err: fmt.Errorf("build llm request: %w", err), Config: core.IsConfigError(err)}
}

// startSpan starts the call's span, under its parent (see call).
//
//go:noinline
func (r *runner) startSpan(ctx context.Context) (context.Context, trace.Span) {
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
	return r.deps.Tracer.Start(ctx, spanName, trace.WithAttributes(
		attribute.String("fathom.session_id", r.sessionID),
		attribute.String("fathom.step_id", r.stepID),
		attribute.String("fathom.call_id", r.callID),
	))
}

// recordError marks span failed with err.
func recordError(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// request builds the call's request from the state, fitting the history into the
// context budget, and hooks the live deltas (see call).
//
//go:noinline
func (r *runner) request(ctx context.Context, span trace.Span) (*llm.Request, *messages.ContextInfo, error) {
	req, info, err := buildContextRequest(ctx, r.deps, r.state, r.callID, r.hist)
	if err != nil {
		return nil, nil, err
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
	return &req, info, nil
}

// result is the call's result for the answer resp (started at start), with the answer's
// tokens counted as it will be recorded; the answer's attributes go on the chat call's
// span (see call).
//
//go:noinline
func (r *runner) result(ctx context.Context, chatSpan trace.Span, resp *llm.Response, start time.Time, info *messages.ContextInfo) *core.LLMResult {
	if resp.Duration == 0 {
		resp.Duration = time.Since(start)
	}
	chatSpan.SetAttributes(
		semconv.GenAIResponseModel(resp.Model),
		semconv.GenAIUsageInputTokensKey.Int64(resp.Usage.InputTokens),
		semconv.GenAIUsageOutputTokensKey.Int64(resp.Usage.OutputTokens),
		semconv.GenAIResponseFinishReasons(resp.FinishReason),
	)
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

// startChat starts the chat call: its context, bounded by the session's LLM timeout
// and carrying the session's tenant, and its client span; it marks req's prompt
// cacheable (see call).
//
//go:noinline
func (r *runner) startChat(ctx context.Context, req *llm.Request) (context.Context, context.CancelFunc, trace.Span) {
	ctx, cancel := context.WithTimeout(ctx, r.deps.Config.LLMTimeout)
	ctx, span := r.deps.Tracer.Start(ctx, "chat "+req.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(r.deps.LLM.Name()),
		semconv.GenAIRequestModel(req.Model),
	))
	// The system prompt and the history keep a stable order, so the prompt's prefix is
	// cacheable: Anthropic gets cache breakpoints, OpenAI caches the prefix on its own.
	req.PromptCache = true
	// The endpoint's fair share and the tenant's limits (llm/resilient) read the tenant here.
	return auth.WithTenant(ctx, r.state.GetTenant()), cancel, span
}
