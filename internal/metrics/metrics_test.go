package metrics_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fathom-agents/fathom/internal/metrics"
	"github.com/fathom-agents/fathom/messages"
)

func TestEventsBecomeMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	r, err := metrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"))
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
		"fathom.tool.calls": 1, "fathom.tool.errors": 1, "fathom.step.retries": 1} {
		if n := sumOf(name); n != want {
			t.Errorf("%s = %d, want %d", name, n, want)
		}
	}
	steps := got["fathom.step.duration"].(metricdata.Histogram[float64])
	if len(steps.DataPoints) != 1 || steps.DataPoints[0].Count != 1 || steps.DataPoints[0].Sum != 2 {
		t.Fatalf("step durations = %+v, want one of 2 s", steps.DataPoints)
	}
	cost := got["fathom.llm.cost.usd"].(metricdata.Sum[float64])
	if len(cost.DataPoints) != 1 || cost.DataPoints[0].Value != 0.25 {
		t.Fatalf("cost = %+v", cost.DataPoints)
	}
	if tok := got["gen_ai.client.token.usage"].(metricdata.Histogram[int64]); len(tok.DataPoints) != 2 {
		t.Fatalf("gen_ai.client.token.usage has %d series, want input and output", len(tok.DataPoints))
	}
}
