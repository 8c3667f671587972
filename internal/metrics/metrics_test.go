package metrics_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fathom-agents/fathom/internal/metrics"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// registry is a tool registry holding tools named names.
func registry(t *testing.T, names ...string) *tools.Registry {
	t.Helper()
	var ts []tools.Tool
	for _, n := range names {
		ts = append(ts, tools.MustNew(n, "A tool.", tools.SandboxNone, func(context.Context, struct{}) (any, error) { return "ok", nil }))
	}
	r, err := tools.NewRegistry(ts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEventsBecomeMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	r, err := metrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"), metrics.Labels{Models: []string{"gpt-x"}, Tools: registry(t, "code_execute", "refund")})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) int64 { return t0.Add(d).UnixNano() }
	for _, ev := range []*messages.Event{
		{SessionId: "s", AtUnixNano: at(0), Payload: &messages.Event_SessionStarted{SessionStarted: &messages.SessionStarted{}}},
		{SessionId: "s", AtUnixNano: at(0), Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "a", StepType: "research"}}},
		{SessionId: "s", AtUnixNano: at(time.Second), Payload: &messages.Event_LlmResponded{LlmResponded: &messages.LlmResponded{
			Model: "gpt-x", DurationMs: 800, CostUsd: 0.25, Usage: &messages.Usage{InputTokens: 100, OutputTokens: 20}}}},
		{SessionId: "s", AtUnixNano: at(time.Second), Payload: &messages.Event_ToolCalled{ToolCalled: &messages.ToolCalled{Tool: "code_execute"}}},
		{SessionId: "s", AtUnixNano: at(time.Second), Payload: &messages.Event_ToolResult{ToolResult: &messages.ToolResult{Tool: "code_execute",
			Error: &messages.ToolFailure{ErrorType: "timeout"}}}},
		// A call a human rejected never ran: a rejection, not a call or an error.
		{SessionId: "s", AtUnixNano: at(time.Second), Payload: &messages.Event_ToolCalled{ToolCalled: &messages.ToolCalled{Tool: "refund"}}},
		{SessionId: "s", AtUnixNano: at(time.Second), Payload: &messages.Event_ToolResult{ToolResult: &messages.ToolResult{Tool: "refund",
			Error: &messages.ToolFailure{ErrorType: "rejected"}}}},
		{SessionId: "s", AtUnixNano: at(2 * time.Second), Payload: &messages.Event_StepCompleted{StepCompleted: &messages.StepCompleted{StepId: "a"}}},
		// A step that started before this process: no duration, no panic.
		{SessionId: "s", AtUnixNano: at(3 * time.Second), Payload: &messages.Event_StepFailed{StepFailed: &messages.StepFailed{StepId: "b", Retryable: true, RetryAtUnixNano: at(4 * time.Second)}}},
		{SessionId: "s", AtUnixNano: at(5 * time.Second), Payload: &messages.Event_SessionCompleted{SessionCompleted: &messages.SessionCompleted{}}},
	} {
		r.Event(ev)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			got[m.Name] = m.Data
		}
	}
	sumOf := func(name string) int64 {
		s, ok := got[name].(metricdata.Sum[int64])
		if !ok {
			t.Fatalf("%s: %T", name, got[name])
		}
		var n int64
		for _, dp := range s.DataPoints {
			n += dp.Value
		}
		return n
	}
	for name, want := range map[string]int64{"fathom.sessions.started": 1, "fathom.sessions.completed": 1, "fathom.llm.tokens": 120,
		"fathom.tool.calls": 1, "fathom.tool.errors": 1, "fathom.tool.rejections": 1, "fathom.step.retries": 1} {
		if n := sumOf(name); n != want {
			t.Errorf("%s = %d, want %d", name, n, want)
		}
	}
	steps := got["fathom.step.duration"].(metricdata.Histogram[float64])
	if len(steps.DataPoints) != 1 || steps.DataPoints[0].Count != 1 || steps.DataPoints[0].Sum != 2 {
		t.Fatalf("step durations = %+v, want one of 2 s", steps.DataPoints)
	}
	cost := got["fathom.llm.cost.usd"].(metricdata.Sum[float64])
	costs := map[string]float64{}
	for _, dp := range cost.DataPoints {
		m, _ := dp.Attributes.Value("model")
		costs[m.AsString()] = dp.Value
	}
	if len(costs) != 2 || costs["gpt-x"] != 0.25 || costs["other"] != 0 {
		t.Fatalf("cost = %v, want gpt-x 0.25 and other 0", costs)
	}
	if tok := got["gen_ai.client.token.usage"].(metricdata.Histogram[int64]); len(tok.DataPoints) != 2 {
		t.Fatalf("gen_ai.client.token.usage has %d series, want input and output", len(tok.DataPoints))
	}
	// Each series has its attributes (built once per model, tool, step type: the second
	// call of a model reuses them).
	r.Event(&messages.Event{SessionId: "s", AtUnixNano: at(6 * time.Second), Payload: &messages.Event_LlmResponded{LlmResponded: &messages.LlmResponded{
		Model: "gpt-x", DurationMs: 100, Usage: &messages.Usage{InputTokens: 1, OutputTokens: 2}}}})
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	series := map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			add := func(set attribute.Set, v string) {
				var kv []string
				for it := set.Iter(); it.Next(); {
					kv = append(kv, string(it.Attribute().Key)+"="+it.Attribute().Value.AsString())
				}
				series[m.Name+"{"+strings.Join(kv, ",")+"}"] = v
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					add(dp.Attributes, strconv.FormatInt(dp.Value, 10))
				}
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					add(dp.Attributes, strconv.FormatInt(dp.Sum, 10))
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					add(dp.Attributes, strconv.FormatFloat(dp.Sum, 'g', -1, 64))
				}
			}
		}
	}
	for k, want := range map[string]string{
		"fathom.llm.tokens{model=gpt-x,type=input}":                                                                 "101",
		"fathom.llm.tokens{model=gpt-x,type=output}":                                                                "22",
		"fathom.llm.call.duration{model=gpt-x}":                                                                     "0.9",
		"fathom.tool.calls{tool=code_execute}":                                                                      "1",
		"fathom.tool.errors{error_type=timeout,tool=code_execute}":                                                  "1",
		"fathom.tool.rejections{tool=refund}":                                                                       "1",
		"fathom.step.duration{outcome=completed,step_type=research}":                                                "2",
		"gen_ai.client.token.usage{gen_ai.operation.name=chat,gen_ai.request.model=gpt-x,gen_ai.token.type=input}":  "101",
		"gen_ai.client.token.usage{gen_ai.operation.name=chat,gen_ai.request.model=gpt-x,gen_ai.token.type=output}": "22",
	} {
		if series[k] != want {
			t.Errorf("%s = %q, want %q (series: %v)", k, series[k], want, series)
		}
	}
}
