package session

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/messages"
)

// maxLLMAttempts bounds the attempts of one LLM call on retryable errors (429, 5xx,
// timeouts). The engine issue replaces this with per-provider retry, rate limit and
// circuit breaker policies.
const maxLLMAttempts = 3

// runner is the step-runner child of a session grain: it makes one LLM call outside the
// grain's mailbox and reports an *llmResult to its parent, then stops. Its goroutine is
// cancelled when the runner stops (the grain passivated, crashed or moved).
type runner struct {
	deps      *Deps
	sessionID string
	callID    string
	stepID    string
	purpose   string
	req       llm.Request
	cancel    context.CancelFunc
}

// runnerDone carries the call's outcome from the runner's goroutine to its mailbox.
type runnerDone struct{ res *llmResult }

func newRunnerProps(d *Deps, sessionID string, p *messages.PendingCall, req llm.Request) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &runner{deps: d, sessionID: sessionID, callID: p.GetCallId(), stepID: p.GetStepId(), purpose: p.GetPurpose(), req: req}
	})
}

// Receive implements actor.Actor.
func (r *runner) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		r.onStarted(ctx)
	case *runnerDone:
		r.onDone(ctx, msg)
	case *actor.Stopping, *actor.Restarting:
		if r.cancel != nil {
			r.cancel()
		}
	case *actor.Stopped:
	default:
		r.deps.Logger.Warn("step runner: unexpected message", "type", fmt.Sprintf("%T", msg), "session_id", r.sessionID)
	}
}

func (r *runner) onStarted(ctx actor.Context) {
	cctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		res := r.call(cctx)
		root.Send(self, &runnerDone{res: res})
	}()
}

func (r *runner) onDone(ctx actor.Context, msg *runnerDone) {
	ctx.Send(ctx.Parent(), msg.res)
	ctx.Stop(ctx.Self())
}

// call makes the LLM call with bounded retries. It never panics: a panicking provider
// becomes an error result.
func (r *runner) call(ctx context.Context) (res *llmResult) {
	spanName := "session.step"
	if r.purpose == purposePlan {
		spanName = "session.plan"
	}
	ctx, span := r.deps.Tracer.Start(ctx, spanName, trace.WithAttributes(
		attribute.String("fathom.session_id", r.sessionID),
		attribute.String("fathom.step_id", r.stepID),
		attribute.String("fathom.call_id", r.callID),
	))
	defer span.End()
	res = &llmResult{callID: r.callID}
	defer func() {
		if p := recover(); p != nil {
			res = &llmResult{callID: r.callID, err: fmt.Errorf("llm provider panicked: %v", p)}
		}
		if res.err != nil {
			span.RecordError(res.err)
			span.SetStatus(codes.Error, res.err.Error())
		}
	}()
	log := r.deps.Logger.With("session_id", r.sessionID, "call_id", r.callID)
	for attempt := 1; ; attempt++ {
		resp, err := r.attempt(ctx)
		if err == nil {
			return &llmResult{
				callID: r.callID, content: resp.Content, finishReason: resp.FinishReason, model: resp.Model,
				duration: resp.Duration,
				usage: &messages.Usage{
					InputTokens:  uint64(max(resp.Usage.InputTokens, 0)),
					OutputTokens: uint64(max(resp.Usage.OutputTokens, 0)),
					TotalTokens:  uint64(max(resp.Usage.TotalTokens, 0)),
				},
			}
		}
		if attempt >= maxLLMAttempts || !llm.IsRetryable(err) || ctx.Err() != nil {
			return &llmResult{callID: r.callID, err: err}
		}
		wait := backoff(attempt, r.deps.Config.RetryBackoffMax)
		var apiErr *llm.APIError
		if errors.As(err, &apiErr) && apiErr.RetryAfter > 0 {
			wait = min(apiErr.RetryAfter, r.deps.Config.RetryBackoffMax)
		}
		log.Warn("llm call failed, retrying", "attempt", attempt, "wait", wait, "error", err)
		select {
		case <-ctx.Done():
			return &llmResult{callID: r.callID, err: ctx.Err()}
		case <-time.After(wait):
		}
	}
}

func (r *runner) attempt(ctx context.Context) (llm.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, r.deps.Config.LLMTimeout)
	defer cancel()
	ctx, span := r.deps.Tracer.Start(ctx, "chat "+r.req.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", r.deps.LLM.Name()),
		attribute.String("gen_ai.request.model", r.req.Model),
	))
	defer span.End()
	start := time.Now()
	resp, err := r.deps.LLM.Chat(ctx, r.req)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return llm.Response{}, fmt.Errorf("chat %s: %w", r.req.Model, err)
	}
	if resp.Duration == 0 {
		resp.Duration = time.Since(start)
	}
	span.SetAttributes(
		attribute.String("gen_ai.response.model", resp.Model),
		attribute.Int64("gen_ai.usage.input_tokens", resp.Usage.InputTokens),
		attribute.Int64("gen_ai.usage.output_tokens", resp.Usage.OutputTokens),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{resp.FinishReason}),
	)
	return resp, nil
}

// backoff is a jittered exponential delay: 200ms, 400ms, ... capped at limit.
func backoff(attempt int, limit time.Duration) time.Duration {
	d := 200 * time.Millisecond << min(attempt-1, 10)
	d = min(d, limit)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}
