// Package quota enforces the tenants' limits of the configuration file (tenant_defaults,
// tenants; internal/config.TenantLimits) in the session grains, which ask it
// (session.Quotas):
//
//   - max_running_sessions: a start of a session of a tenant that runs its maximum is
//     refused (the grain answers RESOURCE_EXHAUSTED, the gateway 429 with Retry-After).
//     The tenant's sessions that have not ended (running, awaiting_human, interrupted)
//     are counted cluster-wide from the session index (persistence.TenantIndex), at
//     most once per CountTTL per tenant and node; the starts this node admits in
//     between are added to the count and the sessions it ends taken off. Two nodes admitting starts of one tenant within
//     the same CountTTL may let it run one or two sessions more than its maximum: the
//     check is best-effort under concurrent starts, exact on one node.
//   - max_tokens_per_day, max_cost_usd_per_day: before each LLM call a session of a
//     tenant whose usage of the UTC day has reached a limit fails with the budget's name
//     (tenant_max_tokens_per_day, tenant_max_cost_usd_per_day), as a session budget
//     fails it. The usage is the index's (every indexed append adds its answers' tokens
//     and cost to the tenant's row of the day), read at most once per UsageTTL per
//     tenant and node, plus the answers this node stored since.
//   - tool_calls_per_minute: a tool call over the tenant's rate waits; it never fails.
//   - max_artifact_bytes: the bytes of artifacts the tenant's sessions may write per UTC
//     day (Artifacts wraps the node's artifact store). A write that would take the day's
//     bytes over the limit is refused with an *artifact.QuotaError: the tool call that
//     made it fails (write_artifact), a tool result over the session's cap is kept
//     truncated, a fork is refused; the session goes on. The day's bytes are the index's
//     (every indexed append adds its artifact_written sizes to the tenant's row of the
//     day, with the tokens), read at most once per UsageTTL per tenant and node, plus the
//     writes this node admitted since. Every write counts, a rewrite of a path too.
//
// Each crossing is a warn log line and a count in fathom_quota_crossings_total
// (Observer). A failure to read the index admits (and is logged): the limits never stop
// a node whose index is briefly unreachable.
package quota

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/fathom-agents/fathom/internal/config"
	"github.com/fathom-agents/fathom/persistence"
)

// Quota names: the values of fathom_quota_crossings_total's quota label (the keys of
// the configuration file).
const (
	QuotaRunningSessions = "max_running_sessions"
	QuotaToolCalls       = "tool_calls_per_minute"
	QuotaTokensPerDay    = "max_tokens_per_day"
	QuotaCostPerDay      = "max_cost_usd_per_day"
	QuotaArtifactBytes   = "max_artifact_bytes"
)

// Budget names of the daily limits, as a session failed by one names it.
const (
	BudgetTokensPerDay = "tenant_max_tokens_per_day"
	BudgetCostPerDay   = "tenant_max_cost_usd_per_day"
)

// Defaults of Config.
const (
	DefaultCountTTL   = time.Second
	DefaultUsageTTL   = 2 * time.Second
	DefaultRetryAfter = 5 * time.Second
	// indexTimeout bounds each read of the index.
	indexTimeout = 2 * time.Second
	// maxEntries bounds each per-tenant table (counts, usage, tool rates).
	maxEntries = 4096
)

// Observer counts quota crossings (internal/metrics.Quota).
type Observer interface {
	Crossed(tenant, quota string)
}

// Config configures an Enforcer.
type Config struct {
	// Default are the limits of tenants not in Named (tenant_defaults).
	Default config.TenantLimits
	// Named are the limits of the tenants the configuration lists (tenants).
	Named map[string]config.TenantLimits
	// Index answers the counts and the usage; nil disables max_running_sessions and the
	// daily limits (a journal without a session index).
	Index persistence.TenantIndex
	// Observer counts the crossings; nil counts none.
	Observer Observer
	// Logger gets a warn line per crossing; nil means slog.Default().
	Logger *slog.Logger
	// CountTTL, UsageTTL: how long a count or a usage read from the index is used
	// (0: the defaults).
	CountTTL, UsageTTL time.Duration
	// RetryAfter is what a refused start is told to wait (0: DefaultRetryAfter).
	RetryAfter time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnEnded, when set, is told each session of a tenant with a max_running_sessions
	// that ends (Ended): the node's start queue tries the tenant's first waiting start at
	// once (internal/errcode.StartQueue.Kick).
	OnEnded func(tenant string)
}

// Enforcer enforces the limits. It is safe for concurrent use.
type Enforcer struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	running map[string]*countEntry
	usage   map[string]*usageEntry
	tools   map[string]*toolRate
}

// countEntry is a tenant's count of sessions that have not ended.
type countEntry struct {
	mu sync.Mutex
	at time.Time // when n was read from the index (zero: never)
	n  int
}

// usageEntry is a tenant's usage of one UTC day.
type usageEntry struct {
	mu   sync.Mutex
	at   time.Time // when u was read from the index (zero: never)
	day  time.Time
	u    persistence.TenantUsage
	over [2]bool // the tokens and the cost limit were found crossed this day
}

// today brings u (locked by the caller) to now's UTC date, reading tenant's usage from
// the index when it is older than UsageTTL.
func (e *Enforcer) today(u *usageEntry, tenant string) {
	now := e.cfg.Now()
	day := persistence.UsageDay(now)
	if !u.day.Equal(day) {
		u.day, u.at, u.u, u.over = day, time.Time{}, persistence.TenantUsage{}, [2]bool{}
	}
	if e.cfg.Index == nil || (!u.at.IsZero() && now.Sub(u.at) < e.cfg.UsageTTL) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), indexTimeout)
	got, err := e.cfg.Index.TenantUsage(ctx, tenant, day)
	cancel()
	if err != nil {
		e.log.Warn("tenant quota: cannot read the tenant's usage of the day; its calls go on", "tenant", tenant, "error", err)
		return
	}
	u.at, u.u = now, got
}

// toolRate is a tenant's tool-call rate.
type toolRate struct {
	lim  *rate.Limiter
	over bool // from a delayed call to the next call that was not delayed
}

// New returns an Enforcer of cfg.
func New(cfg Config) *Enforcer {
	if cfg.CountTTL <= 0 {
		cfg.CountTTL = DefaultCountTTL
	}
	if cfg.UsageTTL <= 0 {
		cfg.UsageTTL = DefaultUsageTTL
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Enforcer{cfg: cfg, log: log, running: map[string]*countEntry{}, usage: map[string]*usageEntry{}, tools: map[string]*toolRate{}}
}

// Limits returns tenant's limits.
func (e *Enforcer) Limits(tenant string) config.TenantLimits {
	if l, ok := e.cfg.Named[tenant]; ok {
		return l
	}
	return e.cfg.Default
}

// crossed logs and counts a crossing of quota by tenant.
func (e *Enforcer) crossed(tenant, quota, msg string, args ...any) {
	e.log.Warn("tenant quota crossed: "+msg, append([]any{"tenant", tenant, "quota", quota}, args...)...)
	if e.cfg.Observer != nil {
		e.cfg.Observer.Crossed(tenant, quota)
	}
}

// entry returns m's entry of tenant, making it with mk; a full table first drops
// entries (any: each is only a cache).
func entry[T any](e *Enforcer, m map[string]*T, tenant string, mk func() *T) *T {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := m[tenant]; ok {
		return v
	}
	for name := range m {
		if len(m) < maxEntries {
			break
		}
		delete(m, name)
	}
	v := mk()
	m[tenant] = v
	return v
}

// AdmitStart decides a start of a session of tenant: "" admits it (and counts it as
// running until the next read of the index); otherwise the refusal's message, and how
// long the caller should wait before it tries again.
func (e *Enforcer) AdmitStart(ctx context.Context, tenant string) (refusal string, retryAfter time.Duration) {
	limit := e.Limits(tenant).MaxRunningSessions
	if limit <= 0 || e.cfg.Index == nil {
		return "", 0
	}
	c := entry(e, e.running, tenant, func() *countEntry { return &countEntry{} })
	c.mu.Lock()
	defer c.mu.Unlock()
	now := e.cfg.Now()
	if c.at.IsZero() || now.Sub(c.at) >= e.cfg.CountTTL {
		qctx, cancel := context.WithTimeout(ctx, indexTimeout)
		n, err := e.cfg.Index.CountSessions(qctx, tenant, persistence.RunningStatuses)
		cancel()
		if err != nil {
			e.log.Warn("tenant quota: cannot count the tenant's running sessions; the start is admitted", "tenant", tenant,
				"quota", QuotaRunningSessions, "error", err)
			return "", 0
		}
		c.at, c.n = now, n
	}
	if c.n >= limit {
		e.crossed(tenant, QuotaRunningSessions, "a start was refused", "running", c.n, "limit", limit)
		return fmt.Sprintf("tenant %s runs %d sessions (max_running_sessions %d): retry when one has ended, or raise the tenant's max_running_sessions in the node's config file",
			tenant, c.n, limit), e.cfg.RetryAfter
	}
	c.n++
	return "", 0
}

// StartQueue returns tenant's start_queue_timeout: how long a start AdmitStart refused
// may wait, retried by the caller (the gateway, the Go API), for one of the tenant's
// sessions to end.
func (e *Enforcer) StartQueue(tenant string) time.Duration {
	return e.Limits(tenant).StartQueueTimeout
}

// DailyBudget returns why tenant may make no more LLM calls today (its usage of the UTC
// day, plus tokens and cost not stored yet, has reached max_tokens_per_day or
// max_cost_usd_per_day), or "" when it may.
func (e *Enforcer) DailyBudget(tenant string, tokens uint64, cost float64) string {
	l := e.Limits(tenant)
	if (l.MaxTokensPerDay == 0 && l.MaxCostUSDPerDay <= 0) || e.cfg.Index == nil {
		return ""
	}
	u := entry(e, e.usage, tenant, func() *usageEntry { return &usageEntry{} })
	u.mu.Lock()
	defer u.mu.Unlock()
	e.today(u, tenant)
	used, spent := u.u.Tokens+tokens, u.u.CostUSD+cost
	if limit := l.MaxTokensPerDay; limit > 0 && used >= limit {
		if !u.over[0] {
			u.over[0] = true
			e.crossed(tenant, QuotaTokensPerDay, "its sessions make no more LLM calls today", "tokens", used, "limit", limit)
		}
		return fmt.Sprintf("tenant budget exceeded: tenant %s used %d tokens today, UTC (%s %d): raise the tenant's max_tokens_per_day in the node's config file, or wait for the next UTC day",
			tenant, used, BudgetTokensPerDay, limit)
	}
	if limit := l.MaxCostUSDPerDay; limit > 0 && spent >= limit {
		if !u.over[1] {
			u.over[1] = true
			e.crossed(tenant, QuotaCostPerDay, "its sessions make no more LLM calls today", "cost_usd", spent, "limit", limit)
		}
		return fmt.Sprintf("tenant budget exceeded: tenant %s spent $%.6f today, UTC (%s %g): raise the tenant's max_cost_usd_per_day in the node's config file, or wait for the next UTC day",
			tenant, spent, BudgetCostPerDay, limit)
	}
	return ""
}

// Used adds an answer's tokens and cost, just stored by this node, to tenant's usage
// until the next read of the index (which counts them).
func (e *Enforcer) Used(tenant string, tokens uint64, cost float64) {
	l := e.Limits(tenant)
	if (l.MaxTokensPerDay == 0 && l.MaxCostUSDPerDay <= 0) || (tokens == 0 && cost == 0) {
		return
	}
	u := entry(e, e.usage, tenant, func() *usageEntry { return &usageEntry{} })
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.day.Equal(persistence.UsageDay(e.cfg.Now())) {
		return // the day turned: the next DailyBudget reads it
	}
	u.u.Tokens += tokens
	u.u.CostUSD += cost
}

// Ended takes a session of tenant that has just ended off the tenant's count until the
// next read of the index (which no longer counts it), and tells Config.OnEnded. A
// session whose end this node stores after that read is taken off twice: one start more
// may be admitted until the next read.
func (e *Enforcer) Ended(tenant string) {
	if e.Limits(tenant).MaxRunningSessions <= 0 {
		return
	}
	e.mu.Lock()
	c := e.running[tenant]
	e.mu.Unlock()
	if c != nil {
		c.mu.Lock()
		if c.n > 0 {
			c.n--
		}
		c.mu.Unlock()
	}
	if e.cfg.OnEnded != nil {
		e.cfg.OnEnded(tenant)
	}
}

// WaitToolCall delays a tool call of tenant while the tenant is over its
// tool_calls_per_minute; it fails only when ctx ends first.
func (e *Enforcer) WaitToolCall(ctx context.Context, tenant string) error {
	perMinute := e.Limits(tenant).ToolCallsPerMinute
	if perMinute <= 0 {
		return nil
	}
	tr := entry(e, e.tools, tenant, func() *toolRate {
		return &toolRate{lim: rate.NewLimiter(rate.Limit(float64(perMinute)/60), max(1, perMinute/60))}
	})
	now := e.cfg.Now()
	e.mu.Lock()
	r := tr.lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	crossed := d > 0 && !tr.over
	tr.over = d > 0
	e.mu.Unlock()
	if d <= 0 {
		return nil
	}
	if crossed {
		e.crossed(tenant, QuotaToolCalls, "its tool calls are delayed", "limit", perMinute, "delay", d.Round(time.Millisecond))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		r.Cancel()
		return fmt.Errorf("tenant %s tool-call rate (%d calls/min): %w", tenant, perMinute, ctx.Err())
	case <-t.C:
		return nil
	}
}

// Limited reports whether cfg sets a limit the Enforcer enforces for some tenant.
func Limited(cfg Config) bool {
	limited := func(l config.TenantLimits) bool {
		return l.MaxRunningSessions > 0 || l.ToolCallsPerMinute > 0 || l.MaxTokensPerDay > 0 || l.MaxCostUSDPerDay > 0 || l.MaxArtifactBytes > 0
	}
	if limited(cfg.Default) {
		return true
	}
	for _, l := range cfg.Named {
		if limited(l) {
			return true
		}
	}
	return false
}
