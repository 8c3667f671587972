package resilient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/llm/openai"
	"github.com/fathom-agents/fathom/llm/resilient"
)

// server serves script over real HTTP; the returned client is the production one.
func server(t *testing.T, script string) (*mock.Server, llm.Provider) {
	t.Helper()
	s, err := mock.ParseScript([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	m := mock.New(mock.Config{Script: s})
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return m, c
}

var hello = llm.Request{Messages: []llm.Message{{Role: "user", Content: "hello"}}}

func TestRetriesHonourRetryAfter(t *testing.T) {
	m, c := server(t, `{"rules":[{"match":".*","status":429,"retry_after_s":1,"times":1}],"default":"fine"}`)
	p := resilient.New(c, resilient.Config{BaseBackoff: time.Millisecond})
	start := time.Now()
	resp, err := p.Chat(context.Background(), hello)
	if err != nil || resp.Content != "fine" {
		t.Fatalf("%q %v", resp.Content, err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("retried after %s, before the server's Retry-After of 1s", waited)
	}
	if m.Requests() != 2 {
		t.Fatalf("%d requests, want 2", m.Requests())
	}
}

func TestNonRetryableIsNotRetried(t *testing.T) {
	m, c := server(t, `{"rules":[{"match":".*","status":400,"error_message":"bad model"}]}`)
	p := resilient.New(c, resilient.Config{BaseBackoff: time.Millisecond, BreakerFailures: 1})
	for i := 0; i < 3; i++ {
		if _, err := p.Chat(context.Background(), hello); err == nil || !strings.Contains(err.Error(), "bad model") {
			t.Fatalf("err %v", err)
		}
	}
	if m.Requests() != 3 || p.BreakerState() != "closed" {
		t.Fatalf("%d requests, breaker %s: a 400 must neither retry nor trip the breaker", m.Requests(), p.BreakerState())
	}
}

func TestBreakerOpensFailsFastAndRecovers(t *testing.T) {
	// Six 500s, then healthy.
	m, c := server(t, `{"rules":[{"match":".*","status":500,"error_message":"down","times":6}],"default":"back"}`)
	p := resilient.New(c, resilient.Config{MaxAttempts: 3, BaseBackoff: time.Millisecond, BreakerFailures: 3, BreakerOpenFor: 300 * time.Millisecond})
	_, err := p.Chat(context.Background(), hello)
	if err == nil || m.Requests() != 3 {
		t.Fatalf("first call: %v after %d requests", err, m.Requests())
	}
	if p.BreakerState() != "open" {
		t.Fatalf("breaker %s after 3 consecutive failures", p.BreakerState())
	}
	_, err = p.Chat(context.Background(), hello)
	if !errors.Is(err, llm.ErrCircuitOpen) || !llm.IsRetryable(err) || m.Requests() != 3 {
		t.Fatalf("open breaker: %v (retryable %v) after %d requests", err, llm.IsRetryable(err), m.Requests())
	}
	waitHalfOpen(t, p) // one probe goes through and fails (500 #4)
	if _, err := p.Chat(context.Background(), hello); err == nil || m.Requests() != 4 || p.BreakerState() != "open" {
		t.Fatalf("failed probe: %v, %d requests, breaker %s", err, m.Requests(), p.BreakerState())
	}
	// Let the rest of the storm pass, then the next probe closes the breaker.
	for m.Requests() < 6 {
		waitHalfOpen(t, p)
		_, _ = p.Chat(context.Background(), hello)
	}
	waitHalfOpen(t, p)
	resp, err := p.Chat(context.Background(), hello)
	if err != nil || resp.Content != "back" || p.BreakerState() != "closed" {
		t.Fatalf("after recovery: %q %v, breaker %s", resp.Content, err, p.BreakerState())
	}
}

// waitHalfOpen polls the breaker until its open period has passed.
func waitHalfOpen(t *testing.T, p *resilient.Provider) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.BreakerState() != "half-open" {
		if time.Now().After(deadline) {
			t.Fatalf("breaker still %s after 5 s", p.BreakerState())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDeadlineStopsRetriesEarly(t *testing.T) {
	_, c := server(t, `{"rules":[{"match":".*","status":503,"retry_after_s":30}]}`)
	p := resilient.New(c, resilient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := p.Chat(ctx, hello)
	if err == nil || !strings.Contains(err.Error(), "would pass the deadline") || time.Since(start) > time.Second {
		t.Fatalf("err %v after %s", err, time.Since(start))
	}
}

func TestFallbackModel(t *testing.T) {
	_, primary := server(t, `{"rules":[{"match":".*","status":502}]}`)
	_, secondary := server(t, `{"default":"from {{.User}} via fallback"}`)
	p := resilient.NewFallback(resilient.New(primary, resilient.Config{MaxAttempts: 1}), resilient.WithModel(secondary, "small-model"))
	resp, err := p.Chat(context.Background(), hello)
	if err != nil || resp.Content != "from hello via fallback" || resp.Model != "small-model" {
		t.Fatalf("%+v %v", resp, err)
	}
}

func TestRequestRateLimit(t *testing.T) {
	_, c := server(t, `{"default":"ok"}`)
	p := resilient.New(c, resilient.Config{RequestsPerMinute: 1})
	if _, err := p.Chat(context.Background(), hello); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Chat(ctx, hello); err == nil || !strings.Contains(err.Error(), "1 requests/min") {
		t.Fatalf("second call inside the minute: %v", err)
	}
}

// TestLimitersOnePerEndpoint: Limiters gives one Limiter per base URL and key, and two
// Providers sharing it share its budget: with a bucket of one request, the second
// Provider's call waits for the first's token instead of going out at once.
func TestLimitersOnePerEndpoint(t *testing.T) {
	var ls resilient.Limiters
	a := ls.For(resilient.EndpointOf("http://x/v1", "key"), 60, 0)
	if ls.For(resilient.EndpointOf("http://x/v1", "key"), 600, 0) != a {
		t.Fatal("a second For for the same endpoint made a second limiter")
	}
	if ls.For(resilient.EndpointOf("http://x/v1", "other key"), 60, 0) == a || ls.For(resilient.EndpointOf("http://y/v1", "key"), 60, 0) == a {
		t.Fatal("another key or base URL got the same limiter")
	}
	if e := resilient.EndpointOf("http://x/v1", "sk-secret"); strings.Contains(e.KeyID, "secret") || e.KeyID == "" {
		t.Fatalf("endpoint key id %q", e.KeyID)
	}
	m, c := server(t, `{"default":"fine"}`)
	p1 := resilient.New(c, resilient.Config{Limiter: a})
	p2 := resilient.New(resilient.WithModel(c, "other"), resilient.Config{Limiter: a})
	if _, err := p1.Chat(context.Background(), hello); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := p2.Chat(ctx, hello); err == nil || !strings.Contains(err.Error(), "rate limit") {
		t.Fatalf("second provider on the endpoint: %v, want a rate-limit wait (1 request/s shared)", err)
	}
	if m.Requests() != 1 {
		t.Fatalf("%d requests, want 1", m.Requests())
	}
}

// A connection the server closes without answering (an idle keep-alive connection it
// timed out just as the request went out, a proxy restarting) is retried: the caller
// sees the answer of the next attempt, not "Post ...: EOF".
func TestConnectionClosedWithoutAnswerIsRetried(t *testing.T) {
	s, err := mock.ParseScript([]byte(`{"default":"fine"}`))
	if err != nil {
		t.Fatal(err)
	}
	m := mock.New(mock.Config{Script: s})
	var hung atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hung.Add(1) == 1 {
			_, _ = io.Copy(io.Discard, r.Body)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			_ = conn.Close()
			return
		}
		m.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Chat(context.Background(), hello); !errors.Is(err, io.EOF) || !llm.IsRetryable(err) {
		t.Fatalf("first call: %v (retryable %v), want a retryable EOF", err, llm.IsRetryable(err))
	}
	hung.Store(0)
	p := resilient.New(c, resilient.Config{BaseBackoff: time.Millisecond})
	resp, err := p.Chat(context.Background(), hello)
	if err != nil || resp.Content != "fine" {
		t.Fatalf("through resilient: %q %v", resp.Content, err)
	}
	if got := hung.Load(); got != 2 {
		t.Fatalf("%d requests reached the server, want 2 (the closed one and its retry)", got)
	}
}

// panicky is a provider that panics on its next panics calls, then calls through.
type panicky struct {
	llm.Provider
	panics atomic.Int32
}

func (p *panicky) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if p.panics.Add(-1) >= 0 {
		panic("provider bug")
	}
	return p.Provider.Chat(ctx, req)
}

// TestPanickingProviderFreesItsSlotAndTheBreaker: a provider that panics during the
// breaker's half-open probe, with one call slot, passes the panic on to the caller and
// leaves neither the slot taken nor the breaker waiting for the probe's outcome: the
// next call is answered.
func TestPanickingProviderFreesItsSlotAndTheBreaker(t *testing.T) {
	m, c := server(t, `{"rules":[{"match":".*","status":500,"error_message":"down","times":1}],"default":"fine"}`)
	pp := &panicky{Provider: c}
	p := resilient.New(pp, resilient.Config{MaxAttempts: 1, MaxConcurrent: 1, BreakerFailures: 1, BreakerOpenFor: 100 * time.Millisecond, BaseBackoff: time.Millisecond})
	if _, err := p.Chat(context.Background(), hello); err == nil || p.BreakerState() != "open" {
		t.Fatalf("a 500 with BreakerFailures 1: %v, breaker %s, want an error and the breaker open", err, p.BreakerState())
	}
	waitHalfOpen(t, p)
	pp.panics.Store(1)
	func() {
		defer func() {
			if r := recover(); r != "provider bug" {
				t.Fatalf("recovered %v, want the provider's panic", r)
			}
		}()
		_, _ = p.Chat(context.Background(), hello)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := p.Chat(ctx, hello)
	if err != nil || resp.Content != "fine" {
		t.Fatalf("the call after the panic: %q, %v (breaker %s), want the answer", resp.Content, err, p.BreakerState())
	}
	if m.Requests() != 2 {
		t.Fatalf("%d requests reached the model, want 2 (the 500 and the answer)", m.Requests())
	}
}
