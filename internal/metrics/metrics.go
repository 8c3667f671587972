// Package metrics turns a session's durable events into Fathom's domain metrics.
//
// Every metric is derived from an event after it is stored, so a number never counts work
// that was not recorded (a failed append counts nothing) and a replayed journal counts
// nothing twice (replays are not published). The session grain hands each stored event to
// [Recorder.Event]; the node builds one Recorder on its meter, which the telemetry package
// serves at GET /metrics (Prometheus names in parentheses):
//
//   - fathom.sessions.started / .completed / .failed / .cancelled, by tenant
//     (fathom_sessions_started_total, ...; the tenant label bounded as the quota metrics'
//     are: a tenant the node is not configured with is "other")
//   - fathom.step.duration, by step_type and outcome (fathom_step_duration_seconds)
//   - fathom.step.retries (fathom_step_retries_total)
//   - fathom.llm.call.duration, by model (fathom_llm_call_duration_seconds)
//   - fathom.llm.tokens, by model and type input|output (fathom_llm_tokens_total)
//   - fathom.llm.cost.usd, by model (fathom_llm_cost_usd_total)
//   - fathom.tool.calls, by tool (fathom_tool_calls_total): calls whose result is
//     recorded, but for rejected ones; fathom.tool.errors, by tool and error_type, of those
//     (fathom_tool_errors_total); fathom.tool.rejections, by tool: calls a human rejected
//     or nobody approved in time, they never ran (fathom_tool_rejections_total)
//   - gen_ai.client.token.usage and gen_ai.client.operation.duration, the OpenTelemetry GenAI
//     semantic-convention histograms (gen_ai.operation.name chat, gen_ai.request.model,
//     gen_ai.token.type)
//
// The operator gauges (sessions by state, feed subscribers, sandbox pool, LLM breakers,
// the model endpoint's call slots) are read at each collection from the node's parts
// (RegisterGauges); the journal's append latency is recorded by Journal; each LLM call's
// wait for a slot and the tenants' quota crossings by Quota (tenant label bounded the
// same way: a tenant the node is not configured with is "other"); the gateway records
// its own connections.
//
// Label values are bounded ([Labels]): a model the node is not configured with is
// recorded as "other", a tool it has not registered as "unknown", an unknown error type
// as "other"; step types come from the node's agents; never a session id. Every counter
// series of fixed labels (the session counters, the retries, tokens and cost of each
// configured model, calls, errors and rejections of each registered tool) is exported at
// zero from the start, so the first increment is an increase a query sees.
package metrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// maxOpenSteps bounds the start times kept for step durations; past it they are dropped
// (a step then records no duration) rather than grow without bound.
const maxOpenSteps = 100_000

// Recorder records the metrics of stored events. It is safe for concurrent use by every
// session grain of a node.
type Recorder struct {
	started, completed, failed metric.Int64Counter
	cancelled                  metric.Int64Counter
	stepDuration               metric.Float64Histogram
	stepRetries                metric.Int64Counter
	llmDuration                metric.Float64Histogram
	llmTokens                  metric.Int64Counter
	llmCost                    metric.Float64Counter
	toolCalls, toolErrors      metric.Int64Counter
	toolRejections             metric.Int64Counter
	genaiTokens                metric.Int64Histogram
	genaiDuration              metric.Float64Histogram

	labels *labelSet

	mu        sync.Mutex
	stepStart map[stepKey]stepStart

	// optMu guards opts: the attribute sets of measurements, built once per key (a
	// model, a tool, a step type and outcome). Building a set per measurement (sorting,
	// hashing, allocating) was most of what recording an LLM call cost.
	optMu sync.RWMutex
	opts  map[attrKey]metric.MeasurementOption
}

// maxAttrSets bounds Recorder.opts; past it, sets are built per measurement.
const maxAttrSets = 4096

// attrKey names an attribute set: what it is for and up to two values.
type attrKey struct{ kind, a, b string }

// The attribute sets' builders, by attrKey kind.
func modelAttrs(k attrKey) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("model", k.a)}
}
func modelTypeAttrs(k attrKey) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("model", k.a), attribute.String("type", k.b)}
}
func genaiAttrs(k attrKey) []attribute.KeyValue {
	return []attribute.KeyValue{semconv.GenAIOperationNameChat, semconv.GenAIRequestModel(k.a)}
}
func genaiTypeAttrs(k attrKey) []attribute.KeyValue {
	typ := semconv.GenAITokenTypeInput
	if k.b == "output" {
		typ = semconv.GenAITokenTypeOutput
	}
	return []attribute.KeyValue{semconv.GenAIOperationNameChat, semconv.GenAIRequestModel(k.a), typ}
}
func toolAttrs(k attrKey) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("tool", k.a)}
}
func toolErrorAttrs(k attrKey) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("tool", k.a), attribute.String("error_type", k.b)}
}
func stepAttrs(k attrKey) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("step_type", k.a), attribute.String("outcome", k.b)}
}

// attrs returns the measurement option of key's attribute set, built by build once.
func (r *Recorder) attrs(key attrKey, build func(attrKey) []attribute.KeyValue) metric.MeasurementOption {
	r.optMu.RLock()
	o, ok := r.opts[key]
	r.optMu.RUnlock()
	if ok {
		return o
	}
	o = metric.WithAttributeSet(attribute.NewSet(build(key)...))
	r.optMu.Lock()
	if len(r.opts) < maxAttrSets {
		r.opts[key] = o
	}
	r.optMu.Unlock()
	return o
}

type stepKey struct{ session, step string }

type stepStart struct {
	at       time.Time
	stepType string
}

// New creates the instruments on meter, their labels bounded by labels, and starts
// every counter series of fixed labels at zero.
func New(meter metric.Meter, labels Labels) (*Recorder, error) {
	r := &Recorder{stepStart: map[stepKey]stepStart{}, opts: map[attrKey]metric.MeasurementOption{}, labels: newLabelSet(labels)}
	var err error
	counter := func(dst *metric.Int64Counter, name, desc, unit string) {
		if err == nil {
			*dst, err = meter.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		}
	}
	seconds := func(dst *metric.Float64Histogram, name, desc string) {
		if err == nil {
			*dst, err = meter.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"),
				metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
		}
	}
	counter(&r.started, "fathom.sessions.started", "Sessions started.", "{session}")
	counter(&r.completed, "fathom.sessions.completed", "Sessions completed.", "{session}")
	counter(&r.failed, "fathom.sessions.failed", "Sessions failed.", "{session}")
	counter(&r.cancelled, "fathom.sessions.cancelled", "Sessions cancelled.", "{session}")
	seconds(&r.stepDuration, "fathom.step.duration", "Time from a step's start to its completion or failure.")
	counter(&r.stepRetries, "fathom.step.retries", "Failed step attempts that will be retried.", "{retry}")
	seconds(&r.llmDuration, "fathom.llm.call.duration", "Duration of LLM calls.")
	counter(&r.llmTokens, "fathom.llm.tokens", "Tokens used by LLM calls, by model and type (input, output).", "{token}")
	counter(&r.toolCalls, "fathom.tool.calls", "Tool calls that ran (counted when their result is recorded).", "{call}")
	counter(&r.toolErrors, "fathom.tool.errors", "Tool calls that ran and ended in an error, by tool and error type.", "{call}")
	counter(&r.toolRejections, "fathom.tool.rejections", "Tool calls a human rejected (or nobody approved in time): they never ran.", "{call}")
	seconds(&r.genaiDuration, "gen_ai.client.operation.duration", "GenAI operation duration.")
	if err == nil {
		r.llmCost, err = meter.Float64Counter("fathom.llm.cost.usd", metric.WithDescription("Cost of LLM calls in US dollars, from the node's price table."))
	}
	if err == nil {
		r.genaiTokens, err = meter.Int64Histogram("gen_ai.client.token.usage", metric.WithDescription("Measures number of input and output tokens used."), metric.WithUnit("{token}"),
			metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304))
	}
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	r.zero()
	return r, nil
}

// Event records the metrics of one stored event of a session of DefaultTenant (or
// from before tenancy); TenantEvent names the session's tenant.
func (r *Recorder) Event(ev *messages.Event) { r.TenantEvent("", ev) }

// TenantEvent records the metrics of one stored event of a session of tenant: the
// session counters carry the tenant label (Labels.Tenants), the rest do not.
func (r *Recorder) TenantEvent(tenant string, ev *messages.Event) {
	if r == nil || ev == nil {
		return
	}
	ctx := context.Background()
	at := time.Unix(0, ev.GetAtUnixNano())
	switch {
	case ev.GetSessionStarted() != nil:
		r.started.Add(ctx, 1, r.labels.tenant(tenant))
	case ev.GetSessionCompleted() != nil:
		r.completed.Add(ctx, 1, r.labels.tenant(tenant))
	case ev.GetSessionFailed() != nil:
		r.failed.Add(ctx, 1, r.labels.tenant(tenant))
	case ev.GetSessionCancelled() != nil:
		r.cancelled.Add(ctx, 1, r.labels.tenant(tenant))
	case ev.GetStepStarted() != nil:
		s := ev.GetStepStarted()
		r.mu.Lock()
		if len(r.stepStart) < maxOpenSteps {
			r.stepStart[stepKey{ev.GetSessionId(), s.GetStepId()}] = stepStart{at: at, stepType: s.GetStepType()}
		}
		r.mu.Unlock()
	case ev.GetStepCompleted() != nil:
		r.stepEnded(ctx, ev.GetSessionId(), ev.GetStepCompleted().GetStepId(), at, "completed")
	case ev.GetStepFailed() != nil:
		f := ev.GetStepFailed()
		outcome := "failed"
		if f.GetRetryable() && f.GetRetryAtUnixNano() > 0 {
			outcome = "retried"
			r.stepRetries.Add(ctx, 1)
		}
		r.stepEnded(ctx, ev.GetSessionId(), f.GetStepId(), at, outcome)
	case ev.GetLlmResponded() != nil:
		r.llm(ctx, ev.GetLlmResponded())
	case ev.GetToolResult() != nil:
		r.toolResult(ctx, ev.GetToolResult())
	}
}

// toolResult counts a call when its result is recorded: a rejected one apart, as it
// never ran.
func (r *Recorder) toolResult(ctx context.Context, res *messages.ToolResult) {
	r.zeroTools()
	tool, e := r.labels.tool(res.GetTool()), res.GetError()
	if e.GetErrorType() == string(tools.ErrRejected) {
		r.toolRejections.Add(ctx, 1, r.attrs(attrKey{"tool", tool, ""}, toolAttrs))
		return
	}
	r.toolCalls.Add(ctx, 1, r.attrs(attrKey{"tool", tool, ""}, toolAttrs))
	if e != nil {
		r.toolErrors.Add(ctx, 1, r.attrs(attrKey{"tool_error", tool, errorType(e.GetErrorType())}, toolErrorAttrs))
	}
}

func (r *Recorder) stepEnded(ctx context.Context, session, step string, at time.Time, outcome string) {
	k := stepKey{session, step}
	r.mu.Lock()
	s, ok := r.stepStart[k]
	delete(r.stepStart, k)
	r.mu.Unlock()
	if !ok || at.Before(s.at) {
		return // started before this process (or on another node): no duration to tell
	}
	r.stepDuration.Record(ctx, at.Sub(s.at).Seconds(), r.attrs(attrKey{"step", s.stepType, outcome}, stepAttrs))
}

func (r *Recorder) llm(ctx context.Context, resp *messages.LlmResponded) {
	model := r.labels.model(resp.GetModel())
	secs := float64(resp.GetDurationMs()) / 1000
	r.llmDuration.Record(ctx, secs, r.attrs(attrKey{"model", model, ""}, modelAttrs))
	in, out := int64(resp.GetUsage().GetInputTokens()), int64(resp.GetUsage().GetOutputTokens())
	r.llmTokens.Add(ctx, in, r.attrs(attrKey{"model_type", model, "input"}, modelTypeAttrs))
	r.llmTokens.Add(ctx, out, r.attrs(attrKey{"model_type", model, "output"}, modelTypeAttrs))
	if c := resp.GetCostUsd(); c > 0 {
		r.llmCost.Add(ctx, c, r.attrs(attrKey{"model", model, ""}, modelAttrs))
	}
	r.genaiDuration.Record(ctx, secs, r.attrs(attrKey{"genai", model, ""}, genaiAttrs))
	r.genaiTokens.Record(ctx, in, r.attrs(attrKey{"genai_type", model, "input"}, genaiTypeAttrs))
	r.genaiTokens.Record(ctx, out, r.attrs(attrKey{"genai_type", model, "output"}, genaiTypeAttrs))
}
