package resilient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/llm/openai"
	"github.com/fathom-agents/fathom/llm/resilient"
)

// countingServer serves script over real HTTP, counting the chat requests in flight
// (now and at most).
type countingServer struct {
	inFlight, peak atomic.Int64
	client         llm.Provider
}

func newCountingServer(tb testing.TB, script string) *countingServer {
	return newDelayServer(tb, script, nil)
}

// newDelayServer is newCountingServer whose answers are also held for delay() (nil:
// none) before the script answers.
func newDelayServer(tb testing.TB, script string, delay func() time.Duration) *countingServer {
	tb.Helper()
	s, err := mock.ParseScript([]byte(script))
	if err != nil {
		tb.Fatal(err)
	}
	cs := &countingServer{}
	h := mock.New(mock.Config{Script: s}).Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := cs.inFlight.Add(1)
		defer cs.inFlight.Add(-1)
		for p := cs.peak.Load(); n > p && !cs.peak.CompareAndSwap(p, n); p = cs.peak.Load() {
		}
		if delay != nil {
			t := time.NewTimer(delay())
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
			}
		}
		h.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	// Enough idle connections for every caller: a benchmark measures the queue, not dials.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 512
	tb.Cleanup(tr.CloseIdleConnections)
	cs.client, err = openai.New(openai.Config{BaseURL: srv.URL + "/v1", Timeout: 30 * time.Second, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

// A tenant flooding an endpoint limited to 2 calls in flight holds at most 2 at the
// server, and another tenant's calls wait for about one call, not for the flood's queue.
func TestMaxConcurrentSharesSlotsBetweenTenants(t *testing.T) {
	const delay = 100 * time.Millisecond
	cs := newCountingServer(t, `{"rules":[{"match":".*","response":"ok","delay_ms":100}]}`)
	p := resilient.New(cs.client, resilient.Config{MaxConcurrent: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	flood := auth.WithTenant(ctx, "flood")
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range 20 {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, _ = p.Chat(flood, hello)
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for cs.inFlight.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the flood never reached the server")
		}
		time.Sleep(5 * time.Millisecond)
	}
	other := auth.WithTenant(context.Background(), "other")
	for i := range 3 {
		start := time.Now()
		if _, err := p.Chat(other, hello); err != nil {
			t.Fatal(err)
		}
		// Fair: the next free slot is other's (≤ 1 delay) plus its own call. First come,
		// first served: behind 18 queued calls on 2 slots, about 10 delays.
		if d := time.Since(start); d > 5*delay {
			t.Fatalf("call %d of the other tenant took %s behind the flood, want < %s", i, d, 5*delay)
		}
	}
	if peak := cs.peak.Load(); peak > 2 {
		t.Fatalf("%d calls in flight at the server, want at most 2", peak)
	}
}

// quotaLog records what a QuotaObserver hears.
type quotaLog struct {
	mu      sync.Mutex
	crossed map[string]int
	granted map[string]int
}

func (q *quotaLog) Granted(tenant string, _ time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.granted[tenant]++
}
func (q *quotaLog) Refused(string) {}
func (q *quotaLog) Crossed(tenant, quota string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.crossed[tenant+"/"+quota]++
}

// A tenant's llm_calls_per_minute delays its calls past the budget (never fails them),
// counts one crossing, and leaves other tenants alone.
func TestTenantCallsPerMinuteDelays(t *testing.T) {
	cs := newCountingServer(t, `{"default":"ok"}`)
	q := &quotaLog{crossed: map[string]int{}, granted: map[string]int{}}
	p := resilient.New(cs.client, resilient.Config{MaxConcurrent: 4, Quota: q, Tenants: resilient.Tenants{
		Named: map[string]resilient.TenantLimits{"slow": {CallsPerMinute: 600}}, // a bucket of 10, then 10/s
	}})
	run := func(tenant string) time.Duration {
		t.Helper()
		ctx := auth.WithTenant(context.Background(), tenant)
		start := time.Now()
		for range 13 {
			if _, err := p.Chat(ctx, hello); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start)
	}
	run("fast")
	if slow := run("slow"); slow < 250*time.Millisecond {
		t.Fatalf("13 calls of a tenant limited to 600/min (bucket 10) took %s, want ≥ 250ms", slow)
	}
	// The unlimited tenant was never delayed: a delay is a crossing, and it has none.
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.crossed["slow/"+resilient.QuotaCallsPerMinute] != 1 || len(q.crossed) != 1 {
		t.Fatalf("crossings %v, want one of slow/%s", q.crossed, resilient.QuotaCallsPerMinute)
	}
	if q.granted["slow"] != 13 || q.granted["fast"] != 13 {
		t.Fatalf("slots granted %v, want 13 each", q.granted)
	}
}

// A call whose context ends while it waits for a slot fails with the context's error
// and the slot count is intact.
func TestWaitingCallCancelled(t *testing.T) {
	cs := newCountingServer(t, `{"rules":[{"match":".*","response":"ok","delay_ms":300}]}`)
	l := resilient.NewLimiterFrom(resilient.LimiterConfig{MaxConcurrent: 1})
	p := resilient.New(cs.client, resilient.Config{Limiter: l})
	done := make(chan error, 1)
	go func() { _, err := p.Chat(auth.WithTenant(context.Background(), "a"), hello); done <- err }()
	deadline := time.Now().Add(10 * time.Second)
	for l.Slots().InUse < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the first call never took its slot")
		}
		time.Sleep(2 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(auth.WithTenant(context.Background(), "b"), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Chat(ctx, hello); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting call: %v, want the deadline", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := l.Slots(); st.InUse != 0 || st.Waiting != 0 || st.Slots != 1 {
		t.Fatalf("slots %+v, want 1 slot, none used or waited for", st)
	}
}
