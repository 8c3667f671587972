package metrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Sources are what the node's gauges read at each collection (a scrape of GET
// /metrics). A nil source leaves its gauge out. Prometheus names in parentheses:
//
//   - fathom.sessions, by state (fathom_sessions{state}): the session index's sessions
//   - fathom.feed.subscribers (fathom_feed_subscribers): live event subscriptions
//   - fathom.sandbox.pool.size / .in_use / .waiting (fathom_sandbox_pool_size, ...):
//     connected sandbox connections (0 while the sandbox is unreachable), those running
//     an execution, executions waiting for one
//   - fathom.llm.breaker.state, by breaker and state (fathom_llm_breaker_state): 1 for
//     each breaker's current state (closed, half-open, open), 0 for the others
//   - fathom.llm.slots.in_use / fathom.llm.slots.waiting (fathom_llm_slots_in_use,
//     fathom_llm_slots_waiting): the model endpoint's call slots held by calls, and
//     the calls waiting for one (--llm-max-concurrent)
type Sources struct {
	// SessionsByState counts the indexed sessions by status.
	SessionsByState func(ctx context.Context) (map[string]int64, error)
	// FeedSubscribers counts the node's live subscriptions.
	FeedSubscribers func() int64
	// Sandbox reads the sandbox pool.
	Sandbox func(ctx context.Context) (SandboxStats, error)
	// Breakers returns each LLM circuit breaker's state by breaker name.
	Breakers func() map[string]string
	// LLMSlots reads the model endpoint's call slots: held and waited for.
	LLMSlots func() (inUse, waiting int64)
	// PubSub reads the cluster pub-sub publisher's counts since the node started (zero
	// before it joined the cluster).
	PubSub func() PubSubCounts
	// Timeout bounds one collection's reads. Default 2 s.
	Timeout time.Duration
}

// PubSubCounts are the messages the node's cluster pub-sub publisher handled, by what
// became of them (fathom.pubsub.messages).
type PubSubCounts struct {
	// Published were delivered to their topic; Skipped were not published because their
	// topic had no subscriber; Dropped found the queue full or the publisher closed;
	// Failed were in a publish call that failed.
	Published, Skipped, Dropped, Failed uint64
}

// PubSubOutcomes are the values of fathom_pubsub_messages_total's outcome label.
var PubSubOutcomes = []string{"published", "skipped", "dropped", "failed"}

// SandboxStats are the sandbox pool's gauges.
type SandboxStats struct {
	// Size is the number of connected connections; InUse how many run an execution;
	// Waiting the executions waiting for a connection.
	Size, InUse, Waiting int64
}

// Statuses are the values of fathom_sessions's state label: every status is reported,
// 0 when no session has it.
var Statuses = []string{"running", "awaiting_human", "interrupted", "completed", "failed", "cancelled"}

// BreakerStates are the values of fathom_llm_breaker_state's state label.
var BreakerStates = []string{"closed", "half-open", "open"}

// RegisterGauges creates the instruments of src read at each collection on meter: gauges,
// and the pub-sub counter (fathom.pubsub.messages). Unregister the result to stop them.
func RegisterGauges(meter metric.Meter, src Sources) (metric.Registration, error) {
	if src.Timeout <= 0 {
		src.Timeout = 2 * time.Second
	}
	var (
		insts []metric.Observable
		errs  []error
	)
	gauge := func(name, desc, unit string) metric.Int64ObservableGauge {
		opts := []metric.Int64ObservableGaugeOption{metric.WithDescription(desc)}
		if unit != "" { // a unit of "1" would name the Prometheus gauge *_ratio
			opts = append(opts, metric.WithUnit(unit))
		}
		g, err := meter.Int64ObservableGauge(name, opts...)
		errs = append(errs, err)
		insts = append(insts, g)
		return g
	}
	var sessions, subscribers, size, inUse, waiting, breakers, slotsInUse, slotsWaiting metric.Int64ObservableGauge
	if src.SessionsByState != nil {
		sessions = gauge("fathom.sessions", "Sessions in the session index, by state.", "{session}")
	}
	if src.FeedSubscribers != nil {
		subscribers = gauge("fathom.feed.subscribers", "Live subscriptions to session events on this node.", "{subscription}")
	}
	if src.Sandbox != nil {
		size = gauge("fathom.sandbox.pool.size", "Connected sandbox connections of the pool (0 while the sandbox is unreachable).", "{connection}")
		inUse = gauge("fathom.sandbox.pool.in_use", "Sandbox connections running an execution.", "{connection}")
		waiting = gauge("fathom.sandbox.pool.waiting", "Executions waiting for a sandbox connection.", "{execution}")
	}
	if src.Breakers != nil {
		breakers = gauge("fathom.llm.breaker.state", "LLM circuit breakers: 1 for each breaker's current state.", "")
	}
	if src.LLMSlots != nil {
		slotsInUse = gauge("fathom.llm.slots.in_use", "The model endpoint's call slots held by LLM calls.", "{slot}")
		slotsWaiting = gauge("fathom.llm.slots.waiting", "LLM calls waiting for one of the model endpoint's call slots.", "{call}")
	}
	var pubsub metric.Int64ObservableCounter
	if src.PubSub != nil {
		c, err := meter.Int64ObservableCounter("fathom.pubsub.messages", metric.WithUnit("{message}"),
			metric.WithDescription("Messages of the node's cluster pub-sub publisher (session events, supervision records), by outcome: published, skipped (the topic had no subscriber), dropped (queue full or closed), failed (the publish call failed)."))
		errs = append(errs, err)
		insts = append(insts, c)
		pubsub = c
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("metrics gauges: %w", err)
	}
	if len(insts) == 0 {
		return noRegistration{}, nil
	}
	reg, err := meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, src.Timeout)
		defer cancel()
		var errs []error
		if sessions != nil {
			counts, err := src.SessionsByState(ctx)
			if err != nil {
				errs = append(errs, fmt.Errorf("count sessions: %w", err))
			} else {
				for _, s := range Statuses {
					o.ObserveInt64(sessions, counts[s], metric.WithAttributes(attribute.String("state", s)))
				}
			}
		}
		if subscribers != nil {
			o.ObserveInt64(subscribers, src.FeedSubscribers())
		}
		if size != nil {
			st, err := src.Sandbox(ctx)
			if err != nil {
				errs = append(errs, fmt.Errorf("sandbox pool: %w", err))
			} else {
				o.ObserveInt64(size, st.Size)
				o.ObserveInt64(inUse, st.InUse)
				o.ObserveInt64(waiting, st.Waiting)
			}
		}
		if breakers != nil {
			for name, state := range src.Breakers() {
				for _, s := range BreakerStates {
					v := int64(0)
					if s == state {
						v = 1
					}
					o.ObserveInt64(breakers, v, metric.WithAttributes(attribute.String("breaker", name), attribute.String("state", s)))
				}
			}
		}
		if slotsInUse != nil {
			used, waiting := src.LLMSlots()
			o.ObserveInt64(slotsInUse, used)
			o.ObserveInt64(slotsWaiting, waiting)
		}
		if pubsub != nil {
			c := src.PubSub()
			for i, v := range []uint64{c.Published, c.Skipped, c.Dropped, c.Failed} {
				o.ObserveInt64(pubsub, int64(v), metric.WithAttributes(attribute.String("outcome", PubSubOutcomes[i])))
			}
		}
		return errors.Join(errs...)
	}, insts...)
	if err != nil {
		return nil, fmt.Errorf("metrics gauges: %w", err)
	}
	return reg, nil
}

type noRegistration struct{ metric.Registration }

func (noRegistration) Unregister() error { return nil }

// Journal records the journal's append latency (fathom.journal.append.duration, by
// outcome ok or error: fathom_journal_append_duration_seconds).
type Journal struct {
	duration metric.Float64Histogram
}

// NewJournal creates the journal's instrument on meter.
func NewJournal(meter metric.Meter) (*Journal, error) {
	h, err := meter.Float64Histogram("fathom.journal.append.duration", metric.WithDescription("Time a caller waited for a journal append, by outcome."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return &Journal{duration: h}, nil
}

var (
	outcomeOK    = metric.WithAttributes(attribute.String("outcome", "ok"))
	outcomeError = metric.WithAttributes(attribute.String("outcome", "error"))
)

// Append records one append (a persistence.AppendObserver).
func (j *Journal) Append(d time.Duration, _ int, err error) {
	opt := outcomeOK
	if err != nil {
		opt = outcomeError
	}
	j.duration.Record(context.Background(), d.Seconds(), opt)
}
