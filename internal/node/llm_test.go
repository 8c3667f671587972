package node

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/llm/resilient"
)

// arrivals is a real HTTP model server (llm/mock) that records when each chat request
// arrives, and answers 503 for the primary model when the message asks it to, so calls
// move on to the fallback model.
type arrivals struct {
	mu    sync.Mutex
	times []time.Time
}

func (a *arrivals) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		a.times = append(a.times, time.Now())
		a.mu.Unlock()
		var req struct{ Model string }
		_ = json.Unmarshal(body, &req)
		if req.Model == "primary" && bytes.Contains(body, []byte("use the fallback")) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"message":"primary is down","type":"server_error"}}`))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// TestOneRateLimitPerEndpoint: the sessions' client, the summarizer's and the fallback
// model's, all calling one endpoint as hard as they can, together stay within the
// endpoint's request limit as a real HTTP server counts it (each used to have its own
// limiter, so the endpoint saw up to three times the limit).
func TestOneRateLimitPerEndpoint(t *testing.T) {
	const rpm = 1200 // 20/s, a bucket of 20
	rec := &arrivals{}
	srv := httptest.NewServer(rec.handler(mock.New(mock.Config{Script: mock.Script{Default: "ok"}}).Handler()))
	defer srv.Close()
	n := &Node{log: slog.New(slog.DiscardHandler), cfg: Config{LLM: LLMConfig{
		BaseURL: srv.URL + "/v1", APIKey: "k", Model: "primary", FallbackModels: []string{"fallback"}, NoStream: true,
		Resilience: resilient.Config{MaxAttempts: 1, RequestsPerMinute: rpm, BreakerFailures: 1 << 20},
	}}}
	sessions, err := n.startLLM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	var fallbackOK, sessionOK, summaryOK sync.Map
	call := func(p llm.Provider, msg string, ok *sync.Map) {
		defer wg.Done()
		for ctx.Err() == nil {
			resp, err := p.Chat(ctx, llm.Request{Messages: []llm.Message{{Role: "user", Content: msg}}})
			if err == nil {
				ok.Store(resp.Model, true)
			} else if !strings.Contains(err.Error(), "rate limit") && ctx.Err() == nil {
				t.Errorf("%s: %v", msg, err)
				return
			}
		}
	}
	for range 3 {
		wg.Add(3)
		go call(sessions, "a session step", &sessionOK)
		go call(n.summaryLLM, "summarize this", &summaryOK)
		go call(sessions, "use the fallback", &fallbackOK)
	}
	wg.Wait()
	for name, m := range map[string]*sync.Map{"session": &sessionOK, "summary": &summaryOK, "fallback": &fallbackOK} {
		want := "primary"
		if name == "fallback" {
			want = "fallback"
		}
		if _, ok := m.Load(want); !ok {
			t.Errorf("no %s call was answered by model %q: the test did not exercise every client", name, want)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.times) < 2 {
		t.Fatalf("%d requests reached the server", len(rec.times))
	}
	span := rec.times[len(rec.times)-1].Sub(rec.times[0])
	// A token bucket lets through at most its burst plus rate × span in any span; allow
	// two requests for arrival jitter.
	burst, rate := rpm/60, float64(rpm)/60
	allowed := burst + int(rate*span.Seconds()) + 2
	t.Logf("%d requests in %v (limit %d/min: at most %d)", len(rec.times), span.Round(time.Millisecond), rpm, allowed)
	if len(rec.times) > allowed {
		t.Fatalf("%d requests reached the endpoint in %v, more than its limit of %d/min allows (%d)", len(rec.times), span.Round(time.Millisecond), rpm, allowed)
	}
}
