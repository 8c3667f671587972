package metrics_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fathom-agents/fathom/internal/metrics"
)

// TestGaugesReadTheirSources: each gauge reports its source at collection time; every
// status and breaker state is a series (0 when not current); a failing source leaves its
// gauges out without hiding the others.
func TestGaugesReadTheirSources(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	sandboxErr := error(nil)
	reg, err := metrics.RegisterGauges(meter, metrics.Sources{
		SessionsByState: func(context.Context) (map[string]int64, error) {
			return map[string]int64{"running": 3, "completed": 7}, nil
		},
		FeedSubscribers: func() int64 { return 4 },
		Sandbox: func(context.Context) (metrics.SandboxStats, error) {
			return metrics.SandboxStats{Size: 8, InUse: 5, Waiting: 2}, sandboxErr
		},
		Breakers: func() map[string]string { return map[string]string{"sessions": "open"} },
		PubSub:   func() metrics.PubSubCounts { return metrics.PubSubCounts{Published: 9, Skipped: 120, Dropped: 2} },
	})
	if err != nil {
		t.Fatal(err)
	}
	collect := func() map[string]map[attribute.Distinct]int64 {
		var rm metricdata.ResourceMetrics
		_ = reader.Collect(context.Background(), &rm) // a failing source is reported here; its gauges are left out
		out := map[string]map[attribute.Distinct]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				var dps []metricdata.DataPoint[int64]
				switch d := m.Data.(type) {
				case metricdata.Gauge[int64]:
					dps = d.DataPoints
				case metricdata.Sum[int64]: // a counter: monotonic, cumulative
					if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
						t.Fatalf("%s is a sum that is not a cumulative counter", m.Name)
					}
					dps = d.DataPoints
				default:
					t.Fatalf("%s is %T, want a gauge or a counter", m.Name, m.Data)
				}
				out[m.Name] = map[attribute.Distinct]int64{}
				for _, dp := range dps {
					out[m.Name][dp.Attributes.Equivalent()] = dp.Value
				}
			}
		}
		return out
	}
	set := func(kv ...string) attribute.Distinct {
		var attrs []attribute.KeyValue
		for i := 0; i+1 < len(kv); i += 2 {
			attrs = append(attrs, attribute.String(kv[i], kv[i+1]))
		}
		s := attribute.NewSet(attrs...)
		return s.Equivalent()
	}
	got := collect()
	for _, c := range []struct {
		name string
		key  attribute.Distinct
		want int64
	}{
		{"fathom.sessions", set("state", "running"), 3},
		{"fathom.sessions", set("state", "completed"), 7},
		{"fathom.sessions", set("state", "failed"), 0},
		{"fathom.feed.subscribers", set(), 4},
		{"fathom.sandbox.pool.size", set(), 8},
		{"fathom.sandbox.pool.in_use", set(), 5},
		{"fathom.sandbox.pool.waiting", set(), 2},
		{"fathom.llm.breaker.state", set("breaker", "sessions", "state", "open"), 1},
		{"fathom.llm.breaker.state", set("breaker", "sessions", "state", "closed"), 0},
		{"fathom.pubsub.messages", set("outcome", "published"), 9},
		{"fathom.pubsub.messages", set("outcome", "skipped"), 120},
		{"fathom.pubsub.messages", set("outcome", "dropped"), 2},
		{"fathom.pubsub.messages", set("outcome", "failed"), 0},
	} {
		if v, ok := got[c.name][c.key]; !ok || v != c.want {
			t.Errorf("%s %v = %d (present %v), want %d", c.name, c.key, v, ok, c.want)
		}
	}
	if n := len(got["fathom.sessions"]); n != len(metrics.Statuses) {
		t.Errorf("fathom.sessions has %d series, want one per status (%d)", n, len(metrics.Statuses))
	}
	sandboxErr = errors.New("pool not started")
	got = collect()
	if len(got["fathom.sandbox.pool.size"]) != 0 || got["fathom.feed.subscribers"][set()] != 4 {
		t.Errorf("with a failing sandbox source: %v", got)
	}
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
}
