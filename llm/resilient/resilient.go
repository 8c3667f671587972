// Package resilient wraps an llm.Provider with what a production model client needs:
// retries with jittered exponential backoff that honour Retry-After, request and token
// rate limits, a circuit breaker, and fallback to other providers or models.
//
// Only retryable failures (llm.IsRetryable: 429, 408, 5xx, timeouts, refused or reset
// connections) are retried and count against the breaker; a 400 is the caller's bug and
// is returned at once. While the breaker is open, calls fail fast with an error wrapping
// llm.ErrCircuitOpen (itself retryable) without touching the provider; after OpenFor one
// probe call is let through (half-open) and its outcome closes or re-opens the breaker.
//
// Rate limits belong to the endpoint, not to a Provider: Providers built for one
// endpoint (base URL and key) share one Limiter (Config.Limiter, from Limiters.For),
// while each keeps its own retries and breaker. The Limiter also bounds the endpoint's
// calls in flight (Config.MaxConcurrent), sharing its slots between the tenants the
// calls' contexts name (auth.TenantOf) by weighted fair queuing (llm/fairshare), and
// applies each tenant's calls per minute (Config.Tenants): every attempt waits for the
// budgets and holds a slot while it runs.
package resilient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/fathom-agents/fathom/llm"
)

// Config tunes the wrapper. Zero values take the defaults noted.
type Config struct {
	// MaxAttempts is the number of tries of one call, first included. Default 4.
	MaxAttempts int
	// BaseBackoff is the first retry's backoff before jitter. Default 500ms.
	BaseBackoff time.Duration
	// MaxBackoff caps a computed backoff (not a server's Retry-After). Default 30s.
	MaxBackoff time.Duration
	// RequestsPerMinute limits calls; 0 means unlimited.
	RequestsPerMinute int
	// TokensPerMinute limits estimated tokens (prompt bytes/4 + MaxTokens); 0 means unlimited.
	TokensPerMinute int
	// MaxConcurrent bounds the endpoint's calls in flight, shared between tenants by
	// weighted fair queuing (LimiterConfig.MaxConcurrent); 0 means unlimited.
	MaxConcurrent int
	// Tenants are the tenants' weights and calls per minute (LimiterConfig.Tenants).
	Tenants Tenants
	// Quota, when set, hears about call slots and quota crossings (metrics).
	Quota QuotaObserver
	// Limiter, when set, is the endpoint's shared budget (see Limiters) and replaces
	// RequestsPerMinute, TokensPerMinute, MaxConcurrent, Tenants and Quota: every
	// Provider built for one endpoint must share one, or the endpoint sees the limit
	// once per Provider.
	Limiter *Limiter
	// BreakerFailures is how many consecutive retryable failures open the breaker. Default 5.
	BreakerFailures uint32
	// BreakerOpenFor is how long the breaker stays open before a probe. Default 30s.
	BreakerOpenFor time.Duration
	// Logger receives retry and breaker transitions. Nil discards.
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 4
	}
	if c.BaseBackoff <= 0 {
		c.BaseBackoff = 500 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.BreakerFailures == 0 {
		c.BreakerFailures = 5
	}
	if c.BreakerOpenFor <= 0 {
		c.BreakerOpenFor = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// LimiterConfig is the endpoint budget c describes, for Limiters.ForConfig.
func (c Config) LimiterConfig() LimiterConfig {
	return LimiterConfig{RequestsPerMinute: c.RequestsPerMinute, TokensPerMinute: c.TokensPerMinute,
		MaxConcurrent: c.MaxConcurrent, Tenants: c.Tenants, Observer: c.Quota, Logger: c.Logger}
}

// Provider is a resilient llm.Provider.
type Provider struct {
	next    llm.Provider
	cfg     Config
	breaker *gobreaker.TwoStepCircuitBreaker[llm.Response]
	limiter *Limiter
}

var _ llm.Provider = (*Provider)(nil)

// New wraps p.
func New(p llm.Provider, cfg Config) *Provider {
	cfg.defaults()
	r := &Provider{next: p, cfg: cfg, limiter: cfg.Limiter}
	if r.limiter == nil && (cfg.RequestsPerMinute > 0 || cfg.TokensPerMinute > 0 || cfg.MaxConcurrent > 0 || cfg.Tenants.hasRates()) {
		r.limiter = NewLimiterFrom(cfg.LimiterConfig())
	}
	log := cfg.Logger
	r.breaker = gobreaker.NewTwoStepCircuitBreaker[llm.Response](gobreaker.Settings{
		Name:        p.Name(),
		MaxRequests: 1,
		Timeout:     cfg.BreakerOpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= cfg.BreakerFailures },
		IsSuccessful: func(err error) bool {
			return err == nil || !llm.IsRetryable(err) // a bad request says nothing about the provider's health
		},
		OnStateChange: func(name string, from, to gobreaker.State) {
			log.Warn("llm circuit breaker", "provider", name, "from", from.String(), "to", to.String())
		},
	})
	return r
}

// Name implements llm.Provider.
func (r *Provider) Name() string { return r.next.Name() }

// BreakerState is the breaker's state: "closed", "open" or "half-open".
func (r *Provider) BreakerState() string { return r.breaker.State().String() }

// Chat implements llm.Provider. Each attempt waits for the endpoint's budgets and holds
// one of its call slots (Config.MaxConcurrent) while it runs, never during a backoff.
// The breaker judges each attempt by Settings.IsSuccessful; one whose provider panics is
// reported to it as errPanicked (as gobreaker's one-step Execute reports a panic), and
// the panic goes on.
//
// The goroutine making a call waits on the network with this frame on its stack: so the
// breaker is used in its two steps (no closure and no frame of its own around the call),
// what follows a failed attempt is in retry, a function of its own, and the answer goes
// straight into the named result (a local llm.Response would be 152 bytes more in the
// wait; see llm.Provider).
func (r *Provider) Chat(ctx context.Context, req llm.Request) (resp llm.Response, err error) {
	// The attempt in flight's report to the breaker and release of its call slot: set
	// while the provider runs, so that a panic does not leave the breaker half-open or the
	// slot taken.
	var pending func(error)
	var held func()
	defer func() {
		if pending != nil {
			pending(errPanicked)
		}
		if held != nil {
			held()
		}
	}()
	var lastErr error
	for attempt := 1; ; attempt++ {
		var release func()
		if release, err = r.limiter.admit(ctx, req); err != nil {
			return llm.Response{}, err
		}
		held = release
		if attempt > 1 && req.OnRetry != nil {
			req.OnRetry(attempt)
		}
		if pending, err = r.breaker.Allow(); err == nil {
			resp, err = r.next.Chat(ctx, req)
			done := pending
			pending = nil
			done(err)
		}
		held = nil
		release()
		if err == nil {
			return resp, nil
		}
		if lastErr, err = r.retry(ctx, attempt, err, lastErr); err != nil {
			return llm.Response{}, err
		}
	}
}

// errPanicked is what the breaker is told of an attempt whose provider panicked.
var errPanicked = errors.New("llm provider panicked")

// retry acts on the failure err of attempt (lastErr: the previous attempt's): it
// returns the error to end the call with, or nil after waiting the backoff before the
// next attempt, with err as the new lastErr.
//
//go:noinline
func (r *Provider) retry(ctx context.Context, attempt int, err, lastErr error) (error, error) {
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		if lastErr != nil {
			return lastErr, fmt.Errorf("%w for %s (last error: %v)", llm.ErrCircuitOpen, r.next.Name(), lastErr)
		}
		return lastErr, fmt.Errorf("%w for %s", llm.ErrCircuitOpen, r.next.Name())
	}
	if !llm.IsRetryable(err) || attempt >= r.cfg.MaxAttempts {
		return err, err
	}
	delay := r.backoff(attempt, err)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay {
		return err, fmt.Errorf("not retrying: the next attempt (in %s) would pass the deadline: %w", delay.Round(time.Millisecond), err)
	}
	r.cfg.Logger.Info("llm call failed; retrying", "provider", r.next.Name(), "attempt", attempt, "delay", delay, "error", err)
	t := time.NewTimer(delay)
	select {
	case <-ctx.Done():
		t.Stop()
		return err, fmt.Errorf("%w (after: %v)", ctx.Err(), err)
	case <-t.C:
		return err, nil
	}
}

// backoff is full-jitter exponential backoff, but never less than the server's
// Retry-After.
func (r *Provider) backoff(attempt int, err error) time.Duration {
	exp := r.cfg.BaseBackoff << (attempt - 1)
	if exp <= 0 || exp > r.cfg.MaxBackoff {
		exp = r.cfg.MaxBackoff
	}
	d := exp/2 + rand.N(exp/2+1)
	var apiErr *llm.APIError
	if errors.As(err, &apiErr) && apiErr.RetryAfter > d {
		d = apiErr.RetryAfter
	}
	return d
}

func estimateTokens(req llm.Request) int {
	n := req.MaxTokens
	for _, m := range req.Messages {
		n += len(m.Content)/4 + 4
	}
	return max(n, 1)
}

// Fallback is a provider that tries each of its providers in order, moving on when one
// fails with a retryable error (after its own retries, or with its breaker open).
type Fallback struct {
	providers []llm.Provider
}

// NewFallback returns a provider trying primary, then each fallback.
func NewFallback(primary llm.Provider, fallbacks ...llm.Provider) *Fallback {
	return &Fallback{providers: append([]llm.Provider{primary}, fallbacks...)}
}

// Name implements llm.Provider.
func (f *Fallback) Name() string { return f.providers[0].Name() }

// Chat implements llm.Provider.
func (f *Fallback) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	var errs []error
	// Attempts are numbered across providers, so OnRetry sees 2, 3, ... whoever retries.
	attempt, onRetry := 1, req.OnRetry
	if onRetry != nil {
		req.OnRetry = func(int) { attempt++; onRetry(attempt) }
	}
	for i, p := range f.providers {
		if i > 0 && onRetry != nil {
			attempt++
			onRetry(attempt)
		}
		resp, err := p.Chat(ctx, req)
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", p.Name(), err))
		if !llm.IsRetryable(err) || ctx.Err() != nil {
			break
		}
	}
	return llm.Response{}, errors.Join(errs...)
}

// WithModel returns p with every request's model set to model (a fallback model on
// the same endpoint).
func WithModel(p llm.Provider, model string) llm.Provider { return modelOverride{p, model} }

type modelOverride struct {
	llm.Provider
	model string
}

func (m modelOverride) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	req.Model = m.model
	return m.Provider.Chat(ctx, req)
}
