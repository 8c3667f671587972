package metrics_test

import (
	"context"
	"slices"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fathom-agents/fathom/internal/metrics"
)

// TestQuotaTenantLabelIsBounded: a tenant the node was not configured with is recorded
// as "other", so callers cannot add series; crossings count by tenant and quota, the
// starts waiting in a start queue by tenant.
func TestQuotaTenantLabelIsBounded(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	q, err := metrics.NewQuota(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"), []string{"default", "acme"})
	if err != nil {
		t.Fatal(err)
	}
	q.Granted("acme", 20*time.Millisecond)
	for i := range 50 {
		q.Granted("stranger-"+string(rune('a'+i%26)), time.Millisecond)
		q.Crossed("stranger-"+string(rune('a'+i%26)), "llm_calls_per_minute")
	}
	q.Crossed("acme", "llm_queue")
	q.StartWaiting("acme", 1)
	q.StartWaiting("acme", 1)
	q.StartWaiting("acme", -1)
	q.StartWaiting("stranger-z", 1)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	waits, crossings, waiting := map[string]uint64{}, map[string]int64{}, map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					v, _ := dp.Attributes.Value("tenant")
					waits[v.AsString()] = dp.Count
				}
			case metricdata.Sum[int64]:
				if m.Name == "fathom.start_queue.waiting" {
					for _, dp := range d.DataPoints {
						tn, _ := dp.Attributes.Value("tenant")
						waiting[tn.AsString()] = dp.Value
					}
					continue
				}
				for _, dp := range d.DataPoints {
					tn, _ := dp.Attributes.Value("tenant")
					qn, _ := dp.Attributes.Value("quota")
					crossings[tn.AsString()+"/"+qn.AsString()] = dp.Value
				}
			}
		}
	}
	if len(waits) != 2 || waits["acme"] != 1 || waits["other"] != 50 {
		t.Fatalf("queue waits by tenant %v, want acme 1, other 50", waits)
	}
	if len(waiting) != 3 || waiting["acme"] != 1 || waiting["other"] != 1 || waiting["default"] != 0 {
		t.Fatalf("waiting starts by tenant %v, want acme 1, other 1, default 0", waiting)
	}
	var keys []string
	for k := range crossings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var want []string // every tenant label (the configured ones, default, other) × every quota, from zero
	for _, tenant := range []string{"acme", "default", "other"} {
		for _, quota := range metrics.Quotas {
			want = append(want, tenant+"/"+quota)
		}
	}
	slices.Sort(want)
	if !slices.Equal(keys, want) || crossings["other/llm_calls_per_minute"] != 50 || crossings["acme/llm_queue"] != 1 {
		t.Fatalf("crossings %v, want the series %v with other/llm_calls_per_minute 50, acme/llm_queue 1", crossings, want)
	}
}
