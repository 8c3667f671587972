package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/errcode"
	"github.com/fathom-agents/fathom/internal/metrics"
	"github.com/fathom-agents/fathom/internal/quota"
	"github.com/fathom-agents/fathom/internal/telemetry"
	"github.com/fathom-agents/fathom/llm/resilient"
)

// meterScope is the instrumentation scope of the node's own metrics.
const meterScope = "github.com/fathom-agents/fathom/internal/node"

// MeterProvider is the node's meter provider (GET /metrics serves what it records): the
// gateway records its connections on it.
func (n *Node) MeterProvider() metric.MeterProvider { return n.tel.MeterProvider }

// telemetryConfig is cfg.Telemetry with the node's remoting address on the resource
// (fathom.node.address) when it is known before the member starts: an advertised
// address, or the bound host with a fixed port.
func telemetryConfig(cfg Config) telemetry.Config {
	tc := cfg.Telemetry
	addr := cfg.Cluster.AdvertisedHost
	if addr == "" && cfg.Cluster.Port != 0 {
		host := cfg.Cluster.Host
		if host == "" {
			host = "127.0.0.1"
		}
		addr = net.JoinHostPort(host, strconv.Itoa(cfg.Cluster.Port))
	}
	if addr != "" {
		tc.ExtraAttributes = append(slices.Clone(tc.ExtraAttributes), attribute.String("fathom.node.address", addr))
	}
	return tc
}

// mountPprof serves net/http/pprof's handlers under /debug/pprof/ on mux (Config.Pprof):
// the index, the named profiles (heap, goroutine, allocs, block, mutex, ...), a CPU
// profile (profile?seconds=N), an execution trace, the command line and symbols.
// They are mounted on the metrics listener's own mux only; the package's registration
// on http.DefaultServeMux is served by nothing of the node.
func mountPprof(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}

// metricLabels are the bounds of the metrics' labels: the node's configured models (the
// sessions' default, the fallbacks, the agents' models), the priced models and the
// registered tools.
func (n *Node) metricLabels(b *boot) metrics.Labels {
	l := metrics.Labels{Models: append([]string{b.session.Model}, n.cfg.LLM.FallbackModels...),
		Tenants: tenantLabels(n.cfg.LLM.Resilience.Tenants, n.cfg.Quotas)}
	for _, a := range b.session.Agents {
		l.Models = append(l.Models, a.Model)
	}
	for m := range b.session.Prices {
		l.PricedModels = append(l.PricedModels, m)
	}
	if b.tools != nil {
		l.Tools = b.tools.Registry
	}
	return l
}

// tenantLabels are the tenants with a metrics label value of their own: those the
// configuration names (to the model client's limiter or to the quotas) and the default
// tenant (static tokens, the Go API).
func tenantLabels(t resilient.Tenants, q quota.Config) []string {
	names := []string{auth.DefaultTenant}
	seen := map[string]bool{auth.DefaultTenant: true}
	for name := range t.Named {
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	for name := range q.Named {
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	return names
}

// quotaObserver returns the node's quota metrics (fathom_quota_crossings_total,
// fathom_llm_queue_wait_seconds), made on first use.
func (n *Node) quotaObserver() (*metrics.Quota, error) {
	if n.quotaMetrics != nil {
		return n.quotaMetrics, nil
	}
	q, err := metrics.NewQuota(n.tel.MeterProvider.Meter(meterScope), tenantLabels(n.cfg.LLM.Resilience.Tenants, n.cfg.Quotas))
	if err != nil {
		return nil, err
	}
	n.quotaMetrics = q
	return q, nil
}

// observeJournal records the journal's append latency.
func (n *Node) observeJournal() error {
	j, err := metrics.NewJournal(n.tel.MeterProvider.Meter(meterScope))
	if err != nil {
		return err
	}
	n.journal.ObserveAppends(j.Append)
	return nil
}

// registerGauges registers the gauges read at each scrape: sessions by state from the
// index, feed subscribers, the sandbox pool and the LLM breakers.
func (n *Node) registerGauges() error {
	src := metrics.Sources{FeedSubscribers: func() int64 { return int64(n.feed.Subscribers()) }, SessionsByState: n.journal.CountByStatus,
		PubSub: func() metrics.PubSubCounts {
			p := n.events.topics.Load()
			if p == nil { // before the member joined
				return metrics.PubSubCounts{}
			}
			return metrics.PubSubCounts{Published: p.Published(), Skipped: p.Skipped(), Dropped: p.Dropped(), Failed: p.Failed()}
		}}
	if n.sandbox != nil {
		src.Sandbox = func(ctx context.Context) (metrics.SandboxStats, error) {
			st, err := n.sandbox.Stats(ctx)
			return metrics.SandboxStats{Size: int64(st.Up), InUse: int64(st.Busy), Waiting: int64(st.Waiting)}, err
		}
	}
	if len(n.breakers) > 0 {
		src.Breakers = func() map[string]string {
			out := make(map[string]string, len(n.breakers))
			for name, p := range n.breakers {
				out[name] = p.BreakerState()
			}
			return out
		}
	}
	if l := n.llmLimiter; l.MaxConcurrent() > 0 {
		src.LLMSlots = func() (int64, int64) {
			st := l.Slots()
			return int64(st.InUse), int64(st.Waiting)
		}
	}
	reg, err := metrics.RegisterGauges(n.tel.MeterProvider.Meter(meterScope), src)
	if err != nil {
		return err
	}
	n.gauges = reg
	return nil
}

// SandboxReady reports an error while the node's sandbox is unreachable (every
// connection of its pool fails); nil without a sandbox.
func (n *Node) SandboxReady(ctx context.Context) error {
	if n.sandbox == nil {
		return nil
	}
	st, err := n.sandbox.Stats(ctx)
	if err != nil {
		return err
	}
	if st.Unreachable {
		return fmt.Errorf("every connection to the sandbox fails (%d connections)", st.Connections)
	}
	return nil
}

// addBreaker names an LLM provider's circuit breaker for fathom_llm_breaker_state.
func (n *Node) addBreaker(name string, p *resilient.Provider) *resilient.Provider {
	if n.breakers == nil {
		n.breakers = map[string]*resilient.Provider{}
	}
	n.breakers[name] = p
	return p
}

// quotas returns the enforcer of the tenants' limits (Config.Quotas), nil when no
// tenant has a limit the node enforces. It is made once, with the node's start queue:
// the artifact store's writes and the session grains share it.
func (n *Node) quotas() (*quota.Enforcer, error) {
	if n.enforcer != nil {
		return n.enforcer, nil
	}
	qc := n.cfg.Quotas
	if !quota.Limited(qc) {
		return nil, nil
	}
	if qc.Index == nil {
		qc.Index = n.journal
	}
	if qc.Observer == nil && n.tel != nil {
		o, err := n.quotaObserver()
		if err != nil {
			return nil, err
		}
		qc.Observer = o
	}
	if qc.Logger == nil {
		qc.Logger = n.log.With("component", "quota")
	}
	var obs errcode.StartQueueObserver
	if o, ok := qc.Observer.(*metrics.Quota); ok {
		obs = o
	}
	n.startQueue = errcode.NewStartQueue(obs)
	if ended := qc.OnEnded; ended != nil {
		qc.OnEnded = func(tenant string) {
			ended(tenant)
			n.startQueue.Kick(tenant)
		}
	} else {
		qc.OnEnded = n.startQueue.Kick
	}
	n.enforcer = quota.New(qc)
	return n.enforcer, nil
}

// StartQueue is the node's queues of starts waiting for one of their tenant's
// max_running_sessions to end (start_queue_timeout; internal/errcode.StartQueue), which
// the gateway's starts and the Go API's share; nil (no queue: a start runs once) when no
// tenant has a limit the node enforces.
func (n *Node) StartQueue() *errcode.StartQueue { return n.startQueue }
