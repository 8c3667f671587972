package loadbench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fathom-agents/fathom/actors/session"
	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
)

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// script plans steps custom steps and answers every call after delay.
func script(b *testing.B, steps int, delay time.Duration) mock.Script {
	s, err := mock.ParseScript([]byte(scriptJSON(steps, delay, false)))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// scriptJSON is the mock script (JSON) that plans steps custom steps and answers every
// call after delay. With tool, the executor first calls the write_todos tool in each step
// and answers once it has the tool's result: a step is then a model call, a tool call
// and a second model call.
func scriptJSON(steps int, delay time.Duration, tool bool) string {
	var plan strings.Builder
	plan.WriteString(`{\"steps\":[`)
	for i := range steps {
		if i > 0 {
			plan.WriteString(",")
		}
		fmt.Fprintf(&plan, `{\"id\":\"s%d\",\"type\":\"custom\",\"description\":\"step %d\"}`, i, i)
	}
	plan.WriteString(`]}`)
	ms := delay.Milliseconds()
	toolRule := ""
	if tool {
		toolRule = fmt.Sprintf(`{"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"write_todos","arguments":"{\"todos\":[{\"content\":\"step {{.Step}}\",\"status\":\"completed\"}]}"}],"delay_ms":%d},`, ms)
		toolRule = fmt.Sprintf(`{"system_match":"FATHOM-ROLE: executor","tool_match":"%s","response":"done {{.Step}}","delay_ms":%d},`, toolResultMatch, ms) + toolRule
	}
	return fmt.Sprintf(`{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"%s","delay_ms":%d},%s
		{"system_match":"FATHOM-ROLE: executor","response":"done {{.Step}}","delay_ms":%d}]}`, plan.String(), ms, toolRule, ms)
}

// startNode starts a node on a fresh PostgreSQL journal talking to the scripted model,
// served in this process, over HTTP.
func startNode(b *testing.B, sc mock.Script) *node.Node {
	b.Helper()
	model := httptest.NewServer(mock.New(mock.Config{Script: sc}).Handler())
	b.Cleanup(model.Close)
	return startNodeAt(b, model.URL)
}

// startNodeAt starts a node on a fresh PostgreSQL journal talking to the model server
// at modelURL (no /v1).
func startNodeAt(b *testing.B, modelURL string) *node.Node {
	b.Helper()
	cfg := node.Config{Cluster: fcluster.DefaultConfig(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cfg.Cluster.Logger = cfg.Logger
	cfg.PostgresDSN = testenv.PostgresDSN(b)
	cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.NoStream = modelURL+"/v1", "k", os.Getenv("FATHOM_LOAD_STREAM") != "1"
	switch api := os.Getenv("FATHOM_LOAD_API"); api {
	case "", "openai":
	case "anthropic":
		cfg.LLM.API, cfg.LLM.BaseURL = api, modelURL
	default:
		b.Fatalf("FATHOM_LOAD_API=%q: want openai or anthropic", api)
	}
	cfg.Session = session.DefaultConfig()
	cfg.Session.MaxLLMCalls = 0 // unlimited: the benchmark sizes the sessions
	cfg.Session.MaxSteps = max(cfg.Session.MaxSteps, engineSteps)
	cfg.Session.MaxIterations = max(cfg.Session.MaxIterations, 4*engineSteps)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = n.Stop(ctx)
	})
	return n
}

// rss is the process's resident set size in bytes (Linux), 0 when unknown.
func rss() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb * 1024
		}
	}
	return 0
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(p*float64(len(ds))))]
}

// run starts sessions sessions at once and follows each to its end, returning the
// number of LLM calls answered, the wall time, the step latencies (step_started to
// step_completed) and the peak RSS seen while they ran.
func run(b *testing.B, n *node.Node, prefix string, sessions int) (calls int64, elapsed time.Duration, stepLat []time.Duration, peak float64) {
	b.Helper()
	return runMid(b, n, prefix, sessions, 0, nil)
}

// runMid is run that also calls mid once, from the RSS sampler, as soon as midCalls
// LLM calls have been answered (mid-run, with every session still active).
//
// The sessions are followed from one goroutine: every subscription signals one shared
// channel (live.Subscription.Notify) and the follower reads whatever each has ready. A
// goroutine per session blocked in NextUpdate would put the benchmark's own stacks (about
// 10 KB each here) into the node's memory per session, which this process also measures.
func runMid(b *testing.B, n *node.Node, prefix string, sessions int, midCalls int64, mid func()) (calls int64, elapsed time.Duration, stepLat []time.Duration, peak float64) {
	b.Helper()
	var ncalls atomic.Int64
	errs := make(chan error, 2*sessions) // a start's and a follow's each
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() { // peak RSS while the sessions run
		defer sampler.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if r := rss(); r > peak {
				peak = r
			}
			if mid != nil && ncalls.Load() >= midCalls {
				mid()
				mid = nil
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	ready := make(chan struct{}, 1)
	follows := make([]*follow, sessions)
	for i := range follows {
		f := &follow{id: fmt.Sprintf("%s-%d", prefix, i), sub: n.Feed().Follow(fmt.Sprintf("%s-%d", prefix, i), 0, 0), started: map[string]time.Time{}}
		f.sub.Notify(ready)
		follows[i] = f
		if f.read(context.Background(), &ncalls, errs) { // the subscription's first read, of the journal
			b.Fatalf("session %s ended before it started", f.id)
		}
	}
	began := time.Now()
	var starts sync.WaitGroup
	for _, f := range follows {
		starts.Add(1)
		go func() {
			defer starts.Done()
			if _, err := n.Session(f.id).Start(&messages.StartRequest{CommandId: "start", Goal: "load " + f.id}, cluster.WithTimeout(time.Minute)); err != nil {
				errs <- fmt.Errorf("start %s: %w", f.id, err)
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for active := follows; len(active) > 0 && len(errs) == 0; {
		next := active[:0]
		for _, f := range active {
			if f.read(ctx, &ncalls, errs) {
				stepLat = append(stepLat, f.lats...)
				f.sub.Close()
				continue
			}
			next = append(next, f)
		}
		active = next
		if len(active) == 0 {
			break
		}
		select {
		case <-ready:
			// Let a burst of commits land before looking at every session again.
			time.Sleep(5 * time.Millisecond)
		case <-ctx.Done():
			errs <- fmt.Errorf("%d sessions did not end: %w", len(active), ctx.Err())
		}
	}
	for _, f := range follows {
		f.sub.Close()
	}
	elapsed = time.Since(began)
	starts.Wait()
	close(stop)
	sampler.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return ncalls.Load(), elapsed, stepLat, peak
}

// follow is one session runMid follows.
type follow struct {
	id      string
	sub     live.Subscription
	started map[string]time.Time // step id → its step_started
	lats    []time.Duration      // step_started to step_completed
}

// read takes what f's subscription has ready, counting answered LLM calls in ncalls;
// done is true once the session completed (a failure goes to errs, and is done too).
func (f *follow) read(ctx context.Context, ncalls *atomic.Int64, errs chan<- error) (done bool) {
	for {
		u, ok, err := f.sub.TryNextUpdate(ctx)
		if err != nil {
			errs <- fmt.Errorf("follow %s: %w", f.id, err)
			return true
		}
		if !ok {
			return false
		}
		ev := u.Event
		switch {
		case ev == nil:
		case ev.GetLlmResponded() != nil:
			ncalls.Add(1)
		case ev.GetStepStarted() != nil:
			f.started[ev.GetStepStarted().GetStepId()] = ev.At()
		case ev.GetStepCompleted() != nil:
			if at, ok := f.started[ev.GetStepCompleted().GetStepId()]; ok {
				f.lats = append(f.lats, ev.At().Sub(at))
			}
		case ev.GetSessionFailed() != nil:
			errs <- fmt.Errorf("session %s failed: %s", f.id, ev.GetSessionFailed().GetError())
			return true
		case ev.GetSessionCompleted() != nil:
			return true
		}
	}
}

// BenchmarkActiveSessions runs FATHOM_LOAD_SESSIONS sessions (default 1,000) at once on
// one node, each FATHOM_LOAD_STEPS steps (default 10) against a model that answers every
// call after 200 ms, served by a child process (so this process's memory is the node's).
// Reported: LLM calls per second against the ideal bound (every session always waiting
// on the model: sessions ÷ 200 ms), the ratio, p50/p99 step latency (step_started to
// step_completed; the floor is 200 ms), and the memory per active session mid-run (once
// half of the run's calls have been answered, every session still running): the RSS
// growth and the Go heap growth over the node before the run, the heap read as
// operators read it, go_memstats_heap_alloc_bytes on the node's GET /metrics, and the
// goroutine stacks' growth (go_memstats_stack_inuse_bytes: in the RSS, not in the heap)
// with the goroutines' growth per session (what the stacks are of),
// and, read after those, the live heap's growth (what a collection keeps: the heap
// reading includes the garbage of the GC cycle it falls in); the peak RSS growth per
// session too. FATHOM_LOAD_ACTIVE_HEAP=FILE writes the heap
// profile mid-run to FILE and before the run to FILE.base (go tool pprof
// -sample_index=inuse_space -base FILE.base FILE: what the active sessions hold), and
// FATHOM_LOAD_ACTIVE_GOROUTINES=FILE the goroutines mid-run (counted by stack).
// FATHOM_LOAD_LATENCY_MS sets the model's latency (default 200).
//
// Two sub-benchmarks, by how the node reaches the model:
//   - model=http: HTTP/1.1 without TLS, one connection (with its reader and writer
//     goroutines and their buffers) per call in flight;
//   - model=https-h2: HTTPS with HTTP/2, as the hosted model APIs serve, the calls in
//     flight multiplexed as streams over a few connections. Run it in a process of its
//     own, or last (see startMockProcess).
func BenchmarkActiveSessions(b *testing.B) {
	b.Run("model=http", func(b *testing.B) { benchActiveSessions(b, plainHTTP) })
	b.Run("model=https-h2", func(b *testing.B) { benchActiveSessions(b, httpsH2) })
}

func benchActiveSessions(b *testing.B, proto modelProto) {
	sessions := envInt(b, "FATHOM_LOAD_SESSIONS", 1000)
	steps := envInt(b, "FATHOM_LOAD_STEPS", 10)
	latency := time.Duration(envInt(b, "FATHOM_LOAD_LATENCY_MS", 200)) * time.Millisecond
	n := startNodeAt(b, startMockProcess(b, scriptJSON(steps, latency, false), proto))
	run(b, n, "warm", min(sessions, 50)) // what the node sets up once: pools, tables
	for i := 0; b.Loop(); i++ {
		runtime.GC()
		base, baseHeap, baseStack := rss(), metricsGauge(b, n, "go_memstats_heap_alloc_bytes"), metricsGauge(b, n, "go_memstats_stack_inuse_bytes")
		baseLive, baseG := liveHeap(), runtime.NumGoroutine()
		heapPath := os.Getenv("FATHOM_LOAD_ACTIVE_HEAP")
		if heapPath != "" {
			writeHeapProfile(b, heapPath+".base")
		}
		var midRSS, midHeap, midStack, midLive float64
		var midG int
		calls, elapsed, lats, peak := runMid(b, n, fmt.Sprintf("active%d", i), sessions, int64(sessions*(steps+1)/2), func() {
			midRSS, midHeap, midStack = rss(), metricsGauge(b, n, "go_memstats_heap_alloc_bytes"), metricsGauge(b, n, "go_memstats_stack_inuse_bytes")
			midG = runtime.NumGoroutine()
			// After the readings, so that its collection does not move them: the live heap
			// (what a collection keeps; the readings include the garbage of the cycle).
			midLive = liveHeap()
			writeHeapProfile(b, heapPath)
			writeGoroutineProfile(b, os.Getenv("FATHOM_LOAD_ACTIVE_GOROUTINES"))
		})
		if midRSS == 0 {
			b.Fatal("the run ended before its middle was sampled")
		}
		rate := float64(calls) / elapsed.Seconds()
		ideal := float64(sessions) / latency.Seconds()
		b.ReportMetric(rate, "calls/s")
		b.ReportMetric(ideal, "ideal-calls/s")
		b.ReportMetric(rate/ideal, "of-ideal")
		b.ReportMetric(float64(percentile(lats, 0.5).Milliseconds()), "p50-step-ms")
		b.ReportMetric(float64(percentile(lats, 0.99).Milliseconds()), "p99-step-ms")
		b.ReportMetric((midRSS-base)/float64(sessions), "RSS-B/session")
		b.ReportMetric((midHeap-baseHeap)/float64(sessions), "heap-B/session")
		b.ReportMetric((midStack-baseStack)/float64(sessions), "stack-B/session")
		b.ReportMetric((midLive-baseLive)/float64(sessions), "live-heap-B/session")
		b.ReportMetric(float64(midG-baseG)/float64(sessions), "goroutines/session")
		b.ReportMetric((peak-base)/float64(sessions), "peak-RSS-B/session")
	}
}

// writeGoroutineProfile writes the goroutines' stacks, grouped and counted (pprof's
// debug=1 text), to path ("": none): which goroutines the stack-B/session figure pays for.
func writeGoroutineProfile(b *testing.B, path string) { writeProfile(b, path, "goroutine", 1) }

// liveHeap collects and returns the bytes of heap objects the collection kept.
func liveHeap() float64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return float64(s[0].Value.Uint64())
}

// metricsGauge reads the gauge name from the node's GET /metrics (the Prometheus text
// operators scrape), failing the benchmark when it is not served.
func metricsGauge(b *testing.B, n *node.Node, name string) float64 {
	rec := httptest.NewRecorder()
	n.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		b.Fatalf("parse /metrics: %v", err)
	}
	f := fams[name]
	if f == nil || len(f.GetMetric()) == 0 {
		b.Fatalf("GET /metrics serves no %s", name)
	}
	return f.GetMetric()[0].GetGauge().GetValue()
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
