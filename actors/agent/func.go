package agent

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/messages"
)

// funcCall is a Go-function agent's run (core.AgentFunc) in place of a model call: the
// function gets the brief, and its hand-off (or error) goes to the grain as the call's
// core.LLMResult, with the hand-off as the answer's text (core.FuncAnswer), so the grain
// records and reads it exactly like a model agent's. Its actor cancels its context when
// it abandons the call, and timeout (0: none) bounds it. A panic is an error result.
type funcCall struct {
	run     core.AgentFunc
	brief   core.Brief
	callID  string
	timeout time.Duration
	count   func(answer string) uint32
	// trace is the span the call belongs to (the sub-agent's run) and the tracer its own
	// span is started with, as a model agent's call gets them.
	trace Trace
}

// Trace places a call in its session's trace: Parent is the span it belongs to (the
// sub-agent's run; invalid: none) and Tracer starts the call's own span (nil: none) with
// Attrs.
type Trace struct {
	// Parent is the span the call belongs to.
	Parent trace.SpanContext
	// Tracer starts the call's span.
	Tracer trace.Tracer
	// Attrs are the span's attributes (session, step, call ids).
	Attrs []attribute.KeyValue
}

// FuncCall returns the call running sa's pending call with run, in session state st
// (never mutated), bounded by timeout (the shell's LLM call timeout); the answer is
// counted like a model's (cfg.CountMessage). Its actor abandoning it cancels the
// function's context and drops what it returns, while the call's own timeout is an error
// result the grain sees.
func FuncCall(run core.AgentFunc, st *messages.SessionState, sa *messages.SubagentState, cfg core.Config, timeout time.Duration, tr Trace) Call {
	brief := core.FuncBrief(st, sa)
	callID, model := sa.GetPending().GetCallId(), st.GetConfig().GetModel()
	count := func(answer string) uint32 {
		return cfg.CountMessage(model, llm.Message{Role: "assistant", Content: answer})
	}
	f := &funcCall{run: run, brief: brief, callID: callID, timeout: timeout, count: count, trace: tr}
	return f.exec
}

// exec runs the function under stop (cancelled when the call is abandoned) and its own
// timeout.
func (f *funcCall) exec(stop context.Context) any {
	cctx := stop
	if f.timeout > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(stop, f.timeout)
		defer cancel()
	}
	return f.call(cctx)
}

// call runs the function; it never panics.
func (f *funcCall) call(ctx context.Context) (res *core.LLMResult) {
	start := time.Now()
	model := core.FuncModel(f.brief.Agent)
	if f.trace.Parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, f.trace.Parent)
	}
	span := trace.SpanFromContext(ctx)
	if f.trace.Tracer != nil {
		ctx, span = f.trace.Tracer.Start(ctx, "session.llm_call", trace.WithAttributes(f.trace.Attrs...))
		defer span.End()
	}
	defer func() {
		if p := recover(); p != nil {
			res = &core.LLMResult{CallID: f.callID, Model: model, Err: fmt.Errorf("agent %s panicked: %v", f.brief.Agent, p)}
		}
		res.Duration = time.Since(start)
		if res.Err != nil && f.trace.Tracer != nil {
			span.RecordError(res.Err)
			span.SetStatus(codes.Error, res.Err.Error())
		}
	}()
	out, err := f.run(ctx, f.brief)
	switch {
	case err != nil:
		return &core.LLMResult{CallID: f.callID, Model: model, Err: fmt.Errorf("agent %s: %w", f.brief.Agent, err)}
	case out == nil:
		return &core.LLMResult{CallID: f.callID, Model: model, Err: fmt.Errorf("agent %s returned no hand-off", f.brief.Agent)}
	}
	answer := core.FuncAnswer(out)
	return &core.LLMResult{CallID: f.callID, Model: model, Content: answer, FinishReason: "stop", Usage: &messages.Usage{}, Tokens: f.count(answer)}
}
