package loadbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fathom-agents/fathom/internal/httpclient"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// concurrency is how many sessions (or bare writers) run at once in BenchmarkConcurrentSteps.
const concurrency = 32

// window is how long one op of BenchmarkConcurrentSteps runs, on either side.
const window = 3 * time.Second

// BenchmarkConcurrentSteps compares the node's step rate with 32 sessions running at once
// against a zero-latency model ("sessions=32": steps/s, a step being one LLM call and the
// events it commits) with the rate of 32 bare pgx writers each committing single-row
// INSERTs in a loop on the same server ("baseline=pgx-32-writers": commits/s, reported in
// the same unit). Both sides run for a window of 3 s per op, the sessions in rounds of
// 32, and both rates are over every op. "cpu-us/step" is the process's CPU time per step,
// the in-process model server included: BenchmarkEngineCPU measures the node's alone. The journal's group commit is what lets
// the sessions approach the bare rate although every step commits several events.
func BenchmarkConcurrentSteps(b *testing.B) {
	b.Run("sessions=32", func(b *testing.B) {
		steps := envInt(b, "FATHOM_LOAD_STEPS", 10)
		n := startNode(b, script(b, steps, 0))
		run(b, n, "warm", concurrency) // activation paths, pool connections
		var calls int64
		var elapsed time.Duration
		cpu0 := processCPU()
		for i := 0; b.Loop(); i++ {
			// Rounds of 32 sessions for the bare writers' window: one round lasts only
			// a fifth of a second, and its tail (the last sessions finishing) weighs on it.
			for r, began := 0, time.Now(); time.Since(began) < window; r++ {
				c, e, _, _ := run(b, n, fmt.Sprintf("c%d-%d", i, r), concurrency)
				calls, elapsed = calls+c, elapsed+e
			}
		}
		b.ReportMetric(float64(calls)/elapsed.Seconds(), "ops/s")
		b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(calls), "cpu-us/step")
	})
	b.Run("baseline=bare-steps-32", func(b *testing.B) {
		benchBareSteps(b, script(b, envInt(b, "FATHOM_LOAD_STEPS", 10), 0))
	})
	b.Run("baseline=pgx-32-writers", func(b *testing.B) {
		pool := benchPool(b, "bench_rows")
		payload := make([]byte, 400)
		ctx := context.Background()
		runWorkers(b, func(stream string, n int) error {
			_, err := pool.Exec(ctx, `INSERT INTO bench_rows VALUES ($1, $2, $3)`, stream, n+1, payload)
			return err
		})
	})
}

// benchPool opens a pool of concurrency connections to the test database and creates
// table there, one row per (stream_id, seq) as the journal's primary key has it.
func benchPool(b *testing.B, table string) *pgxpool.Pool {
	ctx := context.Background()
	pcfg, err := pgxpool.ParseConfig(testenv.PostgresDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	pcfg.MaxConns = concurrency
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (stream_id text, seq bigint, data bytea, PRIMARY KEY (stream_id, seq))`); err != nil {
		b.Fatal(err)
	}
	return pool
}

// runWorkers runs concurrency workers for the window of each op, each calling op with
// its own stream and its op count so far (0, 1, ...) until the window ends, and reports
// the ops done per second over every op as "ops/s".
func runWorkers(b *testing.B, op func(stream string, n int) error) {
	var total int64
	var elapsed time.Duration
	for i := 0; b.Loop(); i++ {
		var done atomic.Int64
		var wg sync.WaitGroup
		began := time.Now()
		for w := range concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stream := fmt.Sprintf("r%d-w%d", i, w)
				for n := 0; time.Since(began) < window; n++ {
					if err := op(stream, n); err != nil {
						b.Error(err)
						return
					}
					done.Add(1)
				}
			}()
		}
		wg.Wait()
		total, elapsed = total+done.Load(), elapsed+time.Since(began)
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "ops/s")
}

// stepRows is how many rows a bare step commits: a step's events (llm_requested,
// llm_responded, step_started, step_completed).
const stepRows = 4

// benchBareSteps is the step without the engine ("baseline=bare-steps-32": steps/s): 32
// workers, each in a loop POSTing a pre-encoded executor request of the size the
// sessions send (~5 KB) to the same in-process model server, reading the answer whole,
// then committing the step's rows (stepRows INSERTs of a ~400-byte payload) in one
// transaction with pgx, on the same PostgreSQL server. What the sessions do on top is
// the engine: context assembly, the SDK client, actors, the event log's fence and group
// commit, snapshots, embedding, the live feed.
func benchBareSteps(b *testing.B, sc mock.Script) {
	model := httptest.NewServer(mock.New(mock.Config{Script: sc}).Handler())
	defer model.Close()
	pool := benchPool(b, "bench_steps")
	body := executorRequest()
	client := &http.Client{Transport: httpclient.Transport(), Timeout: time.Minute}
	payload := make([]byte, 400)
	ctx := context.Background()
	runWorkers(b, func(stream string, n int) error {
		return bareStep(ctx, client, model.URL+"/v1/chat/completions", body, pool, stream, 1+n*stepRows, payload)
	})
}

// bareStep is one step of benchBareSteps: the model call, then the step's rows.
func bareStep(ctx context.Context, client *http.Client, url string, body []byte, pool *pgxpool.Pool, stream string, seq int, payload []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer k")
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	answer, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		return fmt.Errorf("model answered %d: %s (%v)", res.StatusCode, answer, err)
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var batch pgx.Batch
		for r := range stepRows {
			batch.Queue(`INSERT INTO bench_steps VALUES ($1, $2, $3)`, stream, seq+r, payload)
		}
		return tx.SendBatch(ctx, &batch).Close()
	})
}

// executorRequest is a chat request shaped like a session's executor call: a system
// prompt with the executor's role marker and a user turn, ~5 KB in all (the sessions'
// requests average that size).
func executorRequest() []byte {
	req := map[string]any{
		"model": "mock",
		"messages": []map[string]string{
			{"role": "system", "content": "FATHOM-ROLE: executor\n" + strings.Repeat("You carry out one step of a plan and report what you did. ", 75)},
			{"role": "user", "content": "Goal: load bare\nStep s1 (custom): step 1\n" + strings.Repeat("Earlier steps said: done. ", 20)},
		},
	}
	out, err := json.Marshal(req)
	if err != nil {
		panic(err)
	}
	return out
}
