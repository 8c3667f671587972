package fathom_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/llm/mock"
)

// The whole-session fair-share figure (issue 34): tenants A, B and C (equal weights) on
// one node whose model endpoint takes sessionFairSlots calls at once
// (--llm-max-concurrent), A running ten times the sessions of B and of C.
const (
	sessionFairSlots = 30
	// sessionFairUsers is how many sessions B and C each keep running (A: ten times
	// as many): each user starts its next session as soon as its last one ends, so each
	// tenant's count of running sessions stays the same through the run.
	sessionFairUsers = 10
	// sessionFairSteps is the plan's length: each step is one executor call.
	sessionFairSteps  = 10
	sessionFairWarmup = 2 * time.Second
	sessionFairWindow = 5 * time.Second
)

// BenchmarkSessionFairShare runs whole sessions through the Go API (fathom.Node, its
// embedded journal, the production model client over loopback HTTP to the scripted
// model server) for three tenants whose principals start them: A keeps 100 sessions
// running, B and C 10 each, every session a plan of ten steps of one model call each,
// and the endpoint is shared by weighted fair queuing between the tenants at 30 calls
// at once. After a 2 s warm-up, 5 s are measured.
//
// contended reports B's and C's p99 step latency (step_started to step_completed: the
// model call, its wait for a slot and the step's own work; p99-ms is the larger), each
// tenant's LLM calls per second (llm_responded) and their Jain's fairness index: all
// three are backlogged, each running at least its share of the slots in sessions. alone
// is B's ten sessions on the same endpoint with nobody else: the baseline of the
// latency, same run.
//
// latency=jitter draws each answer's latency uniformly from 150 to 250 ms; latency=fixed
// holds every answer exactly 200 ms, where calls started together end together: the
// slots free in bursts, which A's waiting calls take before B's and C's sessions, busy
// storing the step that just ended, ask for their next call.
func BenchmarkSessionFairShare(b *testing.B) {
	for _, lat := range []struct {
		name  string
		delay func() time.Duration
	}{
		{"jitter", func() time.Duration { return 150*time.Millisecond + rand.N(100*time.Millisecond) }},
		{"fixed", func() time.Duration { return 200 * time.Millisecond }},
	} {
		b.Run("latency="+lat.name, func(b *testing.B) {
			b.Run("contended", func(b *testing.B) {
				var rs []tenantRun
				for range b.N {
					rs = runSessionFairShare(b, lat.delay, map[string]int{"A": 10 * sessionFairUsers, "B": sessionFairUsers, "C": sessionFairUsers})
				}
				rates := make([]float64, 0, len(rs))
				var worst float64
				for _, r := range rs {
					rate := float64(r.calls) / sessionFairWindow.Seconds()
					rates = append(rates, rate)
					b.ReportMetric(rate, r.tenant+"-calls/s")
					if r.tenant != "A" {
						p := p99ms(r.steps)
						b.ReportMetric(p, r.tenant+"-p99-ms")
						worst = max(worst, p)
					}
				}
				b.ReportMetric(worst, "p99-ms")
				b.ReportMetric(jain(rates), "jain")
				b.ReportMetric(1, "ideal-jain")
			})
			b.Run("alone", func(b *testing.B) {
				var rs []tenantRun
				for range b.N {
					rs = runSessionFairShare(b, lat.delay, map[string]int{"B": sessionFairUsers})
				}
				b.ReportMetric(p99ms(rs[0].steps), "p99-ms")
				b.ReportMetric(float64(rs[0].calls)/sessionFairWindow.Seconds(), "B-calls/s")
			})
		})
	}
}

// tenantRun is what one tenant's sessions did in the measured window.
type tenantRun struct {
	tenant string
	steps  []time.Duration // step latencies of the steps started and completed in it
	calls  int             // LLM answers stored in it
}

// runSessionFairShare starts a node whose model answers after delay() and keeps users[t] sessions of each tenant t running
// through the warm-up and the window, then reports each tenant's window, sorted by name.
func runSessionFairShare(b *testing.B, delay func() time.Duration, users map[string]int) []tenantRun {
	b.Helper()
	b.StopTimer()
	var plan strings.Builder
	plan.WriteString(`{"steps":[`)
	for i := range sessionFairSteps {
		if i > 0 {
			plan.WriteString(",")
		}
		fmt.Fprintf(&plan, `{"id":"s%d","type":"custom","description":"step %d"}`, i, i)
	}
	plan.WriteString(`]}`)
	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: plan.String()},
		{SystemMatch: "FATHOM-ROLE: executor", Response: "done {{.Step}}"},
	}, Default: "done"}
	h := mock.New(mock.Config{Script: script}).Handler()
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(delay())
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
		h.ServeHTTP(w, r)
	}))
	defer model.Close()

	cfg := fathom.DefaultConfig()
	cfg.DataDir = b.TempDir()
	cfg.LLM = fathom.LLM{BaseURL: model.URL + "/v1", APIKey: "k", Model: "mock-model", NoStream: true}
	cfg.LLM.Resilience.MaxConcurrent = sessionFairSlots
	cfg.Session.MaxLLMCalls = 0 // the plan sizes the sessions
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := fathom.Start(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		_ = n.Close(cctx)
	}()

	began := time.Now()
	from, to := began.Add(sessionFairWarmup), began.Add(sessionFairWarmup+sessionFairWindow)
	runCtx, stop := context.WithDeadline(ctx, to)
	defer stop()
	runs := map[string]*tenantRun{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failed sync.Once
	fail := func(err error) { failed.Do(func() { b.Error(err) }) }
	b.StartTimer()
	for tenant, k := range users {
		runs[tenant] = &tenantRun{tenant: tenant}
		tctx := auth.WithPrincipal(runCtx, auth.Principal{Subject: "user", Tenant: tenant, Roles: []auth.Role{auth.RoleMember}})
		for u := range k {
			wg.Go(func() {
				for i := 0; runCtx.Err() == nil; i++ {
					id := fmt.Sprintf("fair-%s-%d-%d", tenant, u, i)
					if _, err := n.StartSession(tctx, fathom.SessionRequest{ID: id, Goal: "fair share " + id}); err != nil {
						// A start made just before the window's end gets the time left as its
						// timeout (Node.StartSession): its future's timer fires at the deadline,
						// possibly before runCtx's own has marked it done. Only a failure inside
						// the window is one.
						if runCtx.Err() == nil && time.Now().Before(to) {
							fail(fmt.Errorf("start %s: %w", id, err))
						}
						return
					}
					steps, calls, err := followSession(runCtx, n, id, from, to)
					mu.Lock()
					runs[tenant].steps = append(runs[tenant].steps, steps...)
					runs[tenant].calls += calls
					mu.Unlock()
					if err != nil {
						fail(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	b.StopTimer()
	out := make([]tenantRun, 0, len(runs))
	for _, r := range runs {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(x, y tenantRun) int { return strings.Compare(x.tenant, y.tenant) })
	return out
}

// followSession follows session id until it ends or ctx does, and returns the latencies
// of its steps started at or after from and completed before to, and its LLM answers
// stored in [from, to).
func followSession(ctx context.Context, n *fathom.Node, id string, from, to time.Time) (steps []time.Duration, calls int, err error) {
	sub := n.Follow(id, 0)
	defer sub.Close()
	started := map[string]time.Time{}
	in := func(t time.Time) bool { return !t.Before(from) && t.Before(to) }
	for {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return steps, calls, nil // the window is over
			}
			return steps, calls, fmt.Errorf("follow %s: %w", id, err)
		}
		ev := u.Event
		switch {
		case ev == nil:
		case ev.GetLlmResponded() != nil:
			if in(ev.At()) {
				calls++
			}
		case ev.GetStepStarted() != nil:
			started[ev.GetStepStarted().GetStepId()] = ev.At()
		case ev.GetStepCompleted() != nil:
			if at, ok := started[ev.GetStepCompleted().GetStepId()]; ok && !at.Before(from) && ev.At().Before(to) {
				steps = append(steps, ev.At().Sub(at))
			}
		case ev.GetSessionFailed() != nil:
			return steps, calls, fmt.Errorf("session %s failed: %s", id, ev.GetSessionFailed().GetError())
		case ev.GetSessionCompleted() != nil:
			return steps, calls, nil
		}
	}
}

// p99ms is the 99th percentile of ds in milliseconds (NaN for none).
func p99ms(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[max(int(math.Ceil(0.99*float64(len(s))))-1, 0)]) / float64(time.Millisecond)
}

// jain is Jain's fairness index of xs: (Σx)² / (n·Σx²), 1 when all are equal.
func jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sq)
}
