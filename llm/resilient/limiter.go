package resilient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/fairshare"
)

// Limiter is the budget of one model endpoint: requests and tokens per minute, the
// concurrent calls in flight (shared between tenants by weighted fair queuing,
// llm/fairshare) and each tenant's calls per minute. A provider's rate limit is per API
// key, not per client object, so every Provider built for one endpoint (the sessions'
// client, the summarizer's, each fallback model's) must draw from the same Limiter: set
// Config.Limiter, usually from Limiters.For. It is safe for concurrent use.
type Limiter struct {
	rpm, tpm int
	reqs     *rate.Limiter
	tokens   *rate.Limiter

	// slots are the endpoint's concurrent calls; nil is unlimited.
	slots   *fairshare.Slots
	tenants Tenants
	obs     QuotaObserver
	log     *slog.Logger

	tmu sync.Mutex
	// trate holds the rate limiters of tenants with a calls-per-minute limit, at most
	// maxTenantRates of them.
	trate map[string]*tenantRate
}

// QuotaCallsPerMinute and QuotaQueue are the quota names a QuotaObserver hears of (the
// quota label of fathom_quota_crossings_total).
const (
	// QuotaCallsPerMinute is a tenant's llm_calls_per_minute: its calls are delayed.
	QuotaCallsPerMinute = "llm_calls_per_minute"
	// QuotaQueue is the bound of a tenant's queue for the endpoint's call slots: the
	// call fails (retryably).
	QuotaQueue = "llm_queue"
)

// maxTenantRates bounds Limiter.trate: past it, tenants whose bucket is full (as good as
// new) are dropped.
const maxTenantRates = 10_000

type tenantRate struct {
	lim *rate.Limiter
	// over is true from a delayed call to the next call that was not delayed.
	over bool
}

// TenantLimits are one tenant's limits on an endpoint.
type TenantLimits struct {
	// Weight is the tenant's weight in the fair queue of the endpoint's call slots;
	// 0 counts as 1.
	Weight int
	// CallsPerMinute limits the tenant's calls (each attempt) to the endpoint; a call
	// over it waits, it never fails. 0 is unlimited.
	CallsPerMinute int
}

// Tenants are the per-tenant limits: Named by tenant, Default for every other tenant
// (each of which gets its own budget of Default's size).
type Tenants struct {
	// Default applies to tenants not in Named.
	Default TenantLimits
	// Named are the limits of the tenants the configuration names.
	Named map[string]TenantLimits
}

// hasRates reports whether any tenant has a calls-per-minute limit.
func (t Tenants) hasRates() bool {
	if t.Default.CallsPerMinute > 0 {
		return true
	}
	for _, l := range t.Named {
		if l.CallsPerMinute > 0 {
			return true
		}
	}
	return false
}

// For returns tenant's limits.
func (t Tenants) For(tenant string) TenantLimits {
	if l, ok := t.Named[tenant]; ok {
		return l
	}
	return t.Default
}

// QuotaObserver hears about an endpoint's tenants: each slot granted and how long it
// was waited for, refusals, and quota crossings (metrics). Its methods must not block.
type QuotaObserver interface {
	fairshare.Observer
	// Crossed is called when tenant crosses quota (QuotaCallsPerMinute,
	// QuotaQueue): once when a rate limit starts delaying its calls, and at every
	// refusal of a full queue.
	Crossed(tenant, quota string)
}

// LimiterConfig is an endpoint's budget.
type LimiterConfig struct {
	// RequestsPerMinute limits calls; 0 means unlimited.
	RequestsPerMinute int
	// TokensPerMinute limits estimated tokens (prompt bytes/4 + MaxTokens); 0 means
	// unlimited.
	TokensPerMinute int
	// MaxConcurrent bounds the calls in flight; excess calls wait in their tenant's
	// queue (auth.TenantOf the call's context) and free slots go to tenants by weighted
	// fair queuing. 0 means unlimited: no queuing.
	MaxConcurrent int
	// QueueBound is the most calls of one tenant waiting for a slot; past it a call
	// fails retryably (HTTP 429 class). 0 means fairshare.DefaultQueueBound.
	QueueBound int
	// Tenants are the tenants' weights and calls per minute.
	Tenants Tenants
	// Observer, when set, hears about slots and quota crossings.
	Observer QuotaObserver
	// Logger receives quota crossings. Nil discards.
	Logger *slog.Logger
}

// Validate reports a budget NewLimiterFrom cannot use.
func (c LimiterConfig) Validate() error {
	if c.RequestsPerMinute < 0 || c.TokensPerMinute < 0 || c.MaxConcurrent < 0 || c.QueueBound < 0 {
		return fmt.Errorf("llm limits: requests %d, tokens %d per minute, %d concurrent, queue %d: none may be negative",
			c.RequestsPerMinute, c.TokensPerMinute, c.MaxConcurrent, c.QueueBound)
	}
	return nil
}

// NewLimiter returns a budget of requestsPerMinute calls and tokensPerMinute estimated
// tokens (prompt bytes/4 + MaxTokens); 0 means unlimited. The request bucket holds a
// second's worth of calls (at least one), the token bucket a minute's worth.
func NewLimiter(requestsPerMinute, tokensPerMinute int) *Limiter {
	return NewLimiterFrom(LimiterConfig{RequestsPerMinute: requestsPerMinute, TokensPerMinute: tokensPerMinute})
}

// NewLimiterFrom returns the budget c describes (negative values count as 0).
func NewLimiterFrom(c LimiterConfig) *Limiter {
	l := &Limiter{rpm: max(0, c.RequestsPerMinute), tpm: max(0, c.TokensPerMinute), tenants: c.Tenants, obs: c.Observer, log: c.Logger}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.rpm > 0 {
		l.reqs = rate.NewLimiter(rate.Limit(float64(l.rpm)/60), max(1, l.rpm/60))
	}
	if l.tpm > 0 {
		l.tokens = rate.NewLimiter(rate.Limit(float64(l.tpm)/60), l.tpm)
	}
	if c.MaxConcurrent > 0 {
		fc := fairshare.Config{Slots: c.MaxConcurrent, QueueBound: max(0, c.QueueBound),
			Weight: func(tenant string) int { return c.Tenants.For(tenant).Weight }}
		if c.Observer != nil {
			fc.Observer = c.Observer
		}
		l.slots = fairshare.New(fc)
	}
	return l
}

// MaxConcurrent is the bound of calls in flight (0 = unlimited).
func (l *Limiter) MaxConcurrent() int {
	if l == nil || l.slots == nil {
		return 0
	}
	return l.slots.Stats().Slots
}

// Slots returns the use of the endpoint's call slots (zero when unlimited).
func (l *Limiter) Slots() fairshare.Stats {
	if l == nil || l.slots == nil {
		return fairshare.Stats{}
	}
	return l.slots.Stats()
}

// admit waits until a call of req fits the budgets (the tenant's calls per minute, the
// endpoint's requests and tokens) and a call slot is free for the call's tenant, and
// returns the func that gives the slot back.
func (l *Limiter) admit(ctx context.Context, req llm.Request) (release func(), err error) {
	if l == nil {
		return func() {}, nil
	}
	tenant := auth.TenantOf(ctx)
	if err := l.waitTenant(ctx, tenant); err != nil {
		return nil, err
	}
	if err := l.Wait(ctx, req); err != nil {
		return nil, err
	}
	if l.slots == nil {
		return func() {}, nil
	}
	release, err = l.slots.Acquire(ctx, tenant)
	var full *fairshare.QueueFullError
	if errors.As(err, &full) {
		l.log.Warn("tenant quota crossed: its queue for the model endpoint's call slots is full; the call fails retryably",
			"tenant", tenant, "quota", QuotaQueue, "bound", full.Bound)
		if l.obs != nil {
			l.obs.Crossed(tenant, QuotaQueue)
		}
		// Retryable as a 429 would be: the step is tried again later.
		return nil, fmt.Errorf("llm call slots: %w (%w)", err,
			&llm.APIError{StatusCode: http.StatusTooManyRequests, Type: "queue_full", Message: "too many calls of this tenant waiting"})
	}
	if err != nil {
		return nil, fmt.Errorf("llm call slots: %w", err)
	}
	return release, nil
}

// waitTenant delays the call while tenant is over its calls per minute.
func (l *Limiter) waitTenant(ctx context.Context, tenant string) error {
	limits := l.tenants.For(tenant)
	if limits.CallsPerMinute <= 0 {
		return nil
	}
	now := time.Now()
	l.tmu.Lock()
	tr := l.tenantRate(tenant, limits.CallsPerMinute)
	r := tr.lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	crossed := d > 0 && !tr.over
	tr.over = d > 0
	l.tmu.Unlock()
	if d <= 0 {
		return nil
	}
	if crossed {
		l.log.Warn("tenant quota crossed: its LLM calls are delayed", "tenant", tenant, "quota", QuotaCallsPerMinute,
			"limit", limits.CallsPerMinute, "delay", d.Round(time.Millisecond))
		if l.obs != nil {
			l.obs.Crossed(tenant, QuotaCallsPerMinute)
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		r.Cancel()
		return fmt.Errorf("tenant %s rate limit (%d calls/min): %w", tenant, limits.CallsPerMinute, ctx.Err())
	case <-t.C:
		return nil
	}
}

// tenantRate returns tenant's rate limiter, making it on first use. Called with l.tmu
// held.
func (l *Limiter) tenantRate(tenant string, perMinute int) *tenantRate {
	if tr, ok := l.trate[tenant]; ok {
		return tr
	}
	if l.trate == nil {
		l.trate = map[string]*tenantRate{}
	}
	if len(l.trate) >= maxTenantRates {
		now := time.Now()
		for name, tr := range l.trate { // a full bucket is as good as a new one
			if !tr.over && tr.lim.TokensAt(now) >= float64(tr.lim.Burst()) {
				delete(l.trate, name)
			}
		}
		for name := range l.trate { // still full: drop some at random
			if len(l.trate) < maxTenantRates {
				break
			}
			delete(l.trate, name)
		}
	}
	tr := &tenantRate{lim: rate.NewLimiter(rate.Limit(float64(perMinute)/60), max(1, perMinute/60))}
	l.trate[tenant] = tr
	return tr
}

// RequestsPerMinute is the request budget (0 = unlimited).
func (l *Limiter) RequestsPerMinute() int { return l.rpm }

// TokensPerMinute is the token budget (0 = unlimited).
func (l *Limiter) TokensPerMinute() int { return l.tpm }

// Wait blocks until req fits the budget or ctx ends.
func (l *Limiter) Wait(ctx context.Context, req llm.Request) error {
	if l == nil {
		return nil
	}
	if l.reqs != nil {
		if err := l.reqs.Wait(ctx); err != nil {
			return fmt.Errorf("llm rate limit (%d requests/min): %w", l.rpm, err)
		}
	}
	if l.tokens != nil {
		n := min(estimateTokens(req), l.tpm)
		if err := l.tokens.WaitN(ctx, n); err != nil {
			return fmt.Errorf("llm rate limit (%d tokens/min): %w", l.tpm, err)
		}
	}
	return nil
}

// Endpoint identifies whose rate limit a call counts against: the API root and the key.
// The key is kept only as a hash, so an Endpoint can be logged and used as a map key
// without holding the secret.
type Endpoint struct {
	// BaseURL is the API root the client calls.
	BaseURL string
	// KeyID is a short hash of the API key ("" for none).
	KeyID string
}

// EndpointOf is the Endpoint of a client calling baseURL with apiKey.
func EndpointOf(baseURL, apiKey string) Endpoint {
	e := Endpoint{BaseURL: baseURL}
	if apiKey != "" {
		sum := sha256.Sum256([]byte(apiKey))
		e.KeyID = hex.EncodeToString(sum[:8])
	}
	return e
}

// Limiters hands out one Limiter per Endpoint, so clients built separately for the same
// endpoint share its budget. The zero value is ready to use and safe for concurrent use.
type Limiters struct {
	mu sync.Mutex
	m  map[Endpoint]*Limiter
}

// For returns e's Limiter, creating it with the given budget on first use. Later calls
// for e get the same Limiter whatever budget they pass: the first one configures it.
func (ls *Limiters) For(e Endpoint, requestsPerMinute, tokensPerMinute int) *Limiter {
	return ls.ForConfig(e, LimiterConfig{RequestsPerMinute: requestsPerMinute, TokensPerMinute: tokensPerMinute})
}

// ForConfig returns e's Limiter, creating it from c on first use; as with For, the
// first call configures it.
func (ls *Limiters) ForConfig(e Endpoint, c LimiterConfig) *Limiter {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l, ok := ls.m[e]; ok {
		return l
	}
	if ls.m == nil {
		ls.m = map[Endpoint]*Limiter{}
	}
	l := NewLimiterFrom(c)
	ls.m[e] = l
	return l
}
