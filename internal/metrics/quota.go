package metrics

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// OtherTenant is the tenant label of every tenant not named in the configuration.
const OtherTenant = "other"

// Quotas are the values of fathom_quota_crossings_total's quota label: the quota names
// of llm/resilient and of internal/quota.
var Quotas = []string{"llm_calls_per_minute", "llm_queue", "max_running_sessions", "tool_calls_per_minute", "max_tokens_per_day", "max_cost_usd_per_day", "max_artifact_bytes"}

// Quota records the tenants' use of the model endpoints' call slots and their quota
// crossings (Prometheus names in parentheses):
//
//   - fathom.llm.queue.wait, by tenant (fathom_llm_queue_wait_seconds): how long each
//     LLM call waited for one of its endpoint's call slots (0 when one was free)
//   - fathom.quota.crossings, by tenant and quota (fathom_quota_crossings_total): a
//     tenant's calls started being delayed by its llm_calls_per_minute, or a call was
//     refused because the tenant's queue for the slots was full (llm_queue); a start
//     was refused by its max_running_sessions; its tool calls started being delayed by
//     its tool_calls_per_minute; it reached its max_tokens_per_day or
//     max_cost_usd_per_day (once a day per node); an artifact write was refused by its
//     max_artifact_bytes
//   - fathom.start_queue.waiting, by tenant (fathom_start_queue_waiting): the starts
//     waiting in the tenant's start queue of this node (start_queue_timeout)
//
// The slots in use and the calls waiting are gauges (Sources.LLMSlots). The tenant label
// is the tenant's name for the tenants the node was configured with, OtherTenant for
// the rest; every crossing series of those starts at zero. It implements
// resilient.QuotaObserver and is safe for concurrent use.
type Quota struct {
	wait      metric.Float64Histogram
	crossings metric.Int64Counter
	waiting   metric.Int64UpDownCounter
	tenants   map[string]metric.MeasurementOption
	other     metric.MeasurementOption
	// crossed holds the option of each tenant label and quota.
	crossed map[[2]string]metric.MeasurementOption
}

// NewQuota creates the instruments on meter; tenants are the tenants with a label value
// of their own.
func NewQuota(meter metric.Meter, tenants []string) (*Quota, error) {
	q := &Quota{tenants: map[string]metric.MeasurementOption{}, crossed: map[[2]string]metric.MeasurementOption{}}
	var err error
	q.wait, err = meter.Float64Histogram("fathom.llm.queue.wait", metric.WithDescription("Time an LLM call waited for one of its endpoint's call slots, by tenant."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	if err == nil {
		q.crossings, err = meter.Int64Counter("fathom.quota.crossings", metric.WithDescription("Times a tenant crossed a quota, by tenant and quota."), metric.WithUnit("{crossing}"))
	}
	if err == nil {
		q.waiting, err = meter.Int64UpDownCounter("fathom.start_queue.waiting", metric.WithDescription("Starts waiting in a tenant's start queue (start_queue_timeout) on this node, by tenant."), metric.WithUnit("{start}"))
	}
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	labels := append([]string{OtherTenant}, tenants...)
	for _, t := range labels {
		if t == "" {
			continue
		}
		q.tenants[t] = metric.WithAttributeSet(attribute.NewSet(attribute.String("tenant", t)))
		q.waiting.Add(context.Background(), 0, q.tenants[t])
		for _, quota := range Quotas {
			o := metric.WithAttributeSet(attribute.NewSet(attribute.String("tenant", t), attribute.String("quota", quota)))
			q.crossed[[2]string{t, quota}] = o
			q.crossings.Add(context.Background(), 0, o)
		}
	}
	q.other = q.tenants[OtherTenant]
	return q, nil
}

// label is tenant's label value.
func (q *Quota) label(tenant string) string {
	if _, ok := q.tenants[tenant]; ok {
		return tenant
	}
	return OtherTenant
}

// Granted records a slot granted to tenant after waiting d.
func (q *Quota) Granted(tenant string, d time.Duration) {
	o, ok := q.tenants[tenant]
	if !ok {
		o = q.other
	}
	q.wait.Record(context.Background(), d.Seconds(), o)
}

// StartWaiting adds delta to tenant's count of starts waiting in its start queue
// (errcode.StartQueueObserver).
func (q *Quota) StartWaiting(tenant string, delta int) {
	q.waiting.Add(context.Background(), int64(delta), q.tenants[q.label(tenant)])
}

// Refused does nothing: a refusal is also a crossing of the llm_queue quota (Crossed).
func (q *Quota) Refused(string) {}

// Crossed counts a crossing of quota by tenant.
func (q *Quota) Crossed(tenant, quota string) {
	o, ok := q.crossed[[2]string{q.label(tenant), quota}]
	if !ok { // a quota this version does not list: still bounded by the tenants
		o = metric.WithAttributeSet(attribute.NewSet(attribute.String("tenant", q.label(tenant)), attribute.String("quota", quota)))
	}
	q.crossings.Add(context.Background(), 1, o)
}
