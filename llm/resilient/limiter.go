package resilient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"golang.org/x/time/rate"

	"github.com/fathom-agents/fathom/llm"
)

// Limiter is the request and token budget of one model endpoint. A provider's rate
// limit is per API key, not per client object, so every Provider built for one endpoint
// (the sessions' client, the summarizer's, each fallback model's) must draw from the
// same Limiter: set Config.Limiter, usually from Limiters.For. It is safe for
// concurrent use.
type Limiter struct {
	rpm, tpm int
	reqs     *rate.Limiter
	tokens   *rate.Limiter
}

// NewLimiter returns a budget of requestsPerMinute calls and tokensPerMinute estimated
// tokens (prompt bytes/4 + MaxTokens); 0 means unlimited. The request bucket holds a
// second's worth of calls (at least one), the token bucket a minute's worth.
func NewLimiter(requestsPerMinute, tokensPerMinute int) *Limiter {
	l := &Limiter{rpm: requestsPerMinute, tpm: tokensPerMinute}
	if requestsPerMinute > 0 {
		l.reqs = rate.NewLimiter(rate.Limit(float64(requestsPerMinute)/60), max(1, requestsPerMinute/60))
	}
	if tokensPerMinute > 0 {
		l.tokens = rate.NewLimiter(rate.Limit(float64(tokensPerMinute)/60), tokensPerMinute)
	}
	return l
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
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l, ok := ls.m[e]; ok {
		return l
	}
	if ls.m == nil {
		ls.m = map[Endpoint]*Limiter{}
	}
	l := NewLimiter(requestsPerMinute, tokensPerMinute)
	ls.m[e] = l
	return l
}
