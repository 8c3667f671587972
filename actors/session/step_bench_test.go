package session_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fathom-agents/fathom/actors/session"
	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/telemetry"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence/postgres"
)

// stepsPerSession is the longest plan of the step benchmark's sessions.
const stepsPerSession = 50

// instantModel is a zero-latency in-process model: a plan of as many steps as the goal
// asks for ("steps=N", at most stepsPerSession), then a short answer for every step. It
// lets the benchmark measure the engine alone.
type instantModel struct{ plans [stepsPerSession + 1]string }

func newInstantModel() *instantModel {
	m := &instantModel{}
	for n := 1; n <= stepsPerSession; n++ {
		steps := make([]string, n)
		for i := range steps {
			steps[i] = fmt.Sprintf(`{"id":"step-%d","type":"custom","description":"step number %d"}`, i+1, i+1)
		}
		m.plans[n] = `{"steps":[` + strings.Join(steps, ",") + `]}`
	}
	return m
}

// planFor is the plan of the goal's "steps=N".
func (m *instantModel) planFor(req llm.Request) string {
	for _, msg := range req.Messages {
		if _, rest, ok := strings.Cut(msg.Content, "steps="); ok {
			var n int
			if _, err := fmt.Sscanf(rest, "%d", &n); err == nil && n >= 1 && n <= stepsPerSession {
				return m.plans[n]
			}
		}
	}
	return m.plans[stepsPerSession]
}

func (m *instantModel) Name() string { return "instant" }

func (m *instantModel) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	usage := llm.Usage{InputTokens: 200, OutputTokens: 50, TotalTokens: 250}
	if strings.Contains(req.Messages[0].Content, "FATHOM-ROLE: orchestrator") {
		return llm.Response{Content: m.planFor(req), FinishReason: "stop", Model: "instant", Usage: usage}, nil
	}
	return llm.Response{Content: "The step is done: here is a short deliverable of a few dozen words that stands in for a real answer.", FinishReason: "stop", Model: "instant", Usage: usage}, nil
}

// BenchmarkStepOverhead is the engine's cost per plan step on the durable PostgreSQL
// journal with a zero-latency model: the step runner task, the request build, decide, Apply
// on a clone, protobuf encoding, the journal appends of the step's events
// (llm_responded, step_completed, step_started, llm_requested), the feed, snapshots. One
// op is one step; sessions of up to 50 steps run back to back (exactly b.N steps in all),
// so each op also carries a share of a session's activation, start and plan. "pipelined" is the default
// configuration (commits pipelined and grouped, Config.PipelineDepth 4); "synchronous"
// commits every decision before the next one (PipelineDepth 0), in the same run.
// Compare with BenchmarkBaselinePgxInsertCommit (BENCHMARKS.md). "telemetry-on" and
// "telemetry-off" are the pipelined step with tracing and metrics exported (every span
// over OTLP/HTTP to a local collector that accepts and drops them, Proto.Actor's actor
// metrics wired) and with telemetry disabled (no-op providers): their ratio is what
// observability costs a step.
func BenchmarkStepOverhead(b *testing.B) {
	pipelined := session.DefaultConfig().PipelineDepth
	for _, c := range []struct {
		name      string
		depth     int
		telemetry func(testing.TB) telemetry.Config
	}{
		{"pipelined", pipelined, nil},
		{"synchronous", 0, nil},
		{"telemetry-off", pipelined, func(testing.TB) telemetry.Config { return telemetry.Config{Disabled: true} }},
		{"telemetry-on", pipelined, otlpTelemetry},
	} {
		b.Run(c.name, func(b *testing.B) {
			var tcfg telemetry.Config
			if c.telemetry != nil {
				tcfg = c.telemetry(b)
			}
			benchSteps(b, c.depth, tcfg)
		})
	}
}

// otlpTelemetry exports traces and metrics over OTLP/HTTP to a local collector that
// accepts every request and drops it; the benchmark's cleanup stops it.
func otlpTelemetry(tb testing.TB) telemetry.Config {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	tb.Cleanup(collector.Close)
	return telemetry.Config{Exporter: telemetry.ExporterOTLP, OTLPEndpoint: collector.URL}
}

// warmSteps and warmTime bound benchSteps' warm-up from below.
const (
	warmSteps = 500
	warmTime  = 300 * time.Millisecond
)

func benchSteps(b *testing.B, depth int, tcfg telemetry.Config) {
	dsn := testenv.PostgresDSN(b)
	ctx := context.Background()
	j, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	scfg := session.DefaultConfig()
	scfg.MaxSteps, scfg.MaxIterations = stepsPerSession, stepsPerSession+1
	scfg.PipelineDepth = depth
	ccfg := fcluster.DefaultConfig()
	ccfg.Provider = "local"
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ccfg.Logger = log
	n, err := node.Start(ctx, node.Config{
		Journal: j, Cluster: ccfg, Session: scfg, Logger: log, Telemetry: tcfg,
		LLM: node.LLMConfig{Provider: newInstantModel(), NoStream: true},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = n.Stop(context.Background()) }) // not timed (a defer would be)
	var seq atomic.Int64
	run := func(steps int) {
		id := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), seq.Add(1))
		sub := n.Feed().Subscribe(id, 0)
		defer sub.Close()
		goal := fmt.Sprintf("benchmark steps=%d", steps)
		if _, err := n.Session(id).Start(&messages.StartRequest{CommandId: "c", Goal: goal}, cluster.WithTimeout(10*time.Second)); err != nil {
			b.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		for {
			rec, err := sub.Next(wctx)
			if err != nil {
				b.Fatal(err)
			}
			switch rec.Type() {
			case "session_completed":
				return
			case "session_failed":
				b.Fatalf("session %s failed", id)
			}
		}
	}
	// Warm up until the node is in its steady state (pool connections, prepared
	// statements, the dispatcher's workers, the heap's size): at least warmSteps steps
	// and warmTime. A fresh node's first sessions cost up to twice as much CPU per step.
	for warm, began := 0, time.Now(); warm < warmSteps || time.Since(began) < warmTime; warm += stepsPerSession {
		run(stepsPerSession)
	}
	b.ReportAllocs()
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for done := 0; done < b.N; {
		k := min(stepsPerSession, b.N-done) // exactly b.N steps: an op is one step at any b.N
		run(k)
		done += k
	}
	b.StopTimer()
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	// The process's CPU per step (all its goroutines: grain, runners, appender, GC): on
	// a loaded machine the journal's commit latency swamps ns/op, this does not.
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkBaselinePgxInsertCommit is the floor of BenchmarkStepOverhead: a bare pgx
// single-row INSERT and its commit (autocommit), ~400-byte payload, in the same database.
func BenchmarkBaselinePgxInsertCommit(b *testing.B) {
	dsn := testenv.PostgresDSN(b)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE bench_rows (stream_id text, seq bigint, type text, data bytea, at timestamptz, PRIMARY KEY (stream_id, seq))`); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 400)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := pool.Exec(ctx, `INSERT INTO bench_rows (stream_id, seq, type, data, at) VALUES ($1, $2, $3, $4, $5)`,
			"bench", int64(i+1), "step_completed", data, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}
