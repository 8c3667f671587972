package loadbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/httpclient"
	"github.com/fathom-agents/fathom/internal/node"
)

// engineSteps is how many plan steps a session of BenchmarkEngineCPU runs (21 model
// calls with the planning call).
const engineSteps = 20

// toolResultMatch is the mock's tool_match for a step whose write_todos call has
// answered: any tool result (a step's conversation starts without one).
const toolResultMatch = "."

// gatewayNode is a node with its HTTP gateway served on loopback in the same process, as
// `fathom node` serves it.
type gatewayNode struct {
	n      *node.Node
	url    string
	client *http.Client
}

// startGatewayNode starts a node on a fresh PostgreSQL journal talking to the model at
// modelURL, and serves its gateway on loopback.
func startGatewayNode(b *testing.B, modelURL string) *gatewayNode {
	b.Helper()
	n := startNodeAt(b, modelURL)
	h, err := gateway.New(gateway.Config{Sessions: n.GatewaySessions(), Feed: n.Feed(), StartQueue: n.StartQueue(), Tenancy: n.Tenancy(),
		Metrics: n.MetricsHandler(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
		srv.Close()
	})
	return &gatewayNode{n: n, url: srv.URL, client: &http.Client{Transport: httpclient.Transport()}}
}

// start starts session id with goal over the gateway (POST /v1/sessions).
func (g *gatewayNode) start(ctx context.Context, id, goal string) error {
	body, _ := json.Marshal(map[string]string{"session_id": id, "goal": goal, "command_id": "start"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url+"/v1/sessions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := g.client.Do(req)
	if err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	answer, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("start %s: %d %s", id, res.StatusCode, answer)
	}
	return nil
}

// follow reads session id's event stream over the gateway (GET /v1/sessions/{id}/events,
// NDJSON) from its first event until session_completed, calling onEvent with each
// frame's event type. It returns when the session completed (nil) or failed.
func (g *gatewayNode) follow(ctx context.Context, id string, onEvent func(typ []byte)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url+"/v1/sessions/"+id+"/events?deltas=false", nil)
	if err != nil {
		return err
	}
	res, err := g.client.Do(req)
	if err != nil {
		return fmt.Errorf("follow %s: %w", id, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		answer, _ := io.ReadAll(res.Body)
		return fmt.Errorf("follow %s: %d %s", id, res.StatusCode, answer)
	}
	r := bufio.NewReaderSize(res.Body, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) { // a long frame: its head has the type
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
		}
		if err != nil {
			return fmt.Errorf("follow %s: the stream ended before session_completed: %w", id, err)
		}
		typ := frameType(line)
		onEvent(typ)
		switch string(typ) {
		case "session_completed":
			return nil
		case "session_failed":
			return fmt.Errorf("session %s failed: %s", id, line)
		}
	}
}

// frameType is the event type of an NDJSON event frame: the first "type" value that is
// not "event" (the frame's own).
func frameType(line []byte) []byte {
	for rest := line; ; {
		i := bytes.Index(rest, []byte(`"type":"`))
		if i < 0 {
			return nil
		}
		rest = rest[i+len(`"type":"`):]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			return nil
		}
		if t := rest[:j]; string(t) != "event" {
			return t
		}
		rest = rest[j:]
	}
}

// runGateway starts sessions sessions at once over the gateway, each followed by its
// own event-stream subscriber, and waits for every one to complete. It returns the LLM
// calls answered (llm_responded events) and the wall time.
func runGateway(b *testing.B, g *gatewayNode, prefix string, sessions int) (calls int64, elapsed time.Duration) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	began := time.Now()
	for i := range sessions {
		id := fmt.Sprintf("%s-%d", prefix, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.start(ctx, id, "load "+id); err != nil {
				errs <- err
				return
			}
			errs <- g.follow(ctx, id, func(typ []byte) {
				if string(typ) == "llm_responded" {
					n.Add(1)
				}
			})
		}()
	}
	wg.Wait()
	elapsed = time.Since(began)
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return n.Load(), elapsed
}

// reportSpread reports the median of vals as unit and their smallest and largest as
// unit-min and unit-max: the spread over the rounds (the ops) of one run.
func reportSpread(b *testing.B, unit string, vals []float64) {
	if len(vals) == 0 {
		return
	}
	v := slices.Clone(vals)
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	b.ReportMetric(med, unit)
	b.ReportMetric(v[0], unit+"-min")
	b.ReportMetric(v[len(v)-1], unit+"-max")
}

// BenchmarkEngineCPU measures the engine's CPU per agent step with streaming on: the CPU
// time of this process, which hosts the node and its gateway and nothing else of weight,
// divided by the steps (LLM calls answered, the planning call included) while sessions
// of engineSteps steps run at once, each started over the gateway and followed by its
// own NDJSON event-stream subscriber. The model server runs in a child process and
// PostgreSQL in its own, so neither is counted. One op is one round of sessions; the
// figure is the median over the ops, with their spread (cpu-us/step-min, -max).
//
//   - sessions=32,model=0ms: 32 sessions, a model that answers at once.
//   - sessions=200,model=200ms: 200 sessions, every answer after 200 ms.
//   - baseline=bare-steps-32: the step without the engine, counted the same way: 32
//     workers, each engineSteps+1 times POSTing an executor-sized request to the same
//     out-of-process model and committing the step's 4 rows in one pgx transaction.
func BenchmarkEngineCPU(b *testing.B) {
	b.Run("sessions=32,model=0ms", func(b *testing.B) { benchEngineCPU(b, 32, 0) })
	b.Run("sessions=200,model=200ms", func(b *testing.B) { benchEngineCPU(b, 200, 200*time.Millisecond) })
	b.Run("baseline=bare-steps-32", func(b *testing.B) {
		url := startMockProcess(b, scriptJSON(engineSteps, 0, false), plainHTTP)
		pool := benchPool(b, "bench_steps")
		body := executorRequest()
		client := &http.Client{Transport: httpclient.Transport(), Timeout: time.Minute}
		payload := make([]byte, 400)
		ctx := context.Background()
		var per, rates []float64
		for i := 0; b.Loop(); i++ {
			cpu0, began := processCPU(), time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, concurrency)
			for w := range concurrency {
				wg.Add(1)
				go func() {
					defer wg.Done()
					stream := fmt.Sprintf("r%d-w%d", i, w)
					for s := range engineSteps + 1 {
						if err := bareStep(ctx, client, url+"/v1/chat/completions", body, pool, stream, 1+s*stepRows, payload); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			steps := float64(concurrency * (engineSteps + 1))
			per = append(per, float64((processCPU()-cpu0).Microseconds())/steps)
			rates = append(rates, steps/time.Since(began).Seconds())
		}
		reportSpread(b, "cpu-us/step", per)
		reportSpread(b, "steps/s", rates)
	})
}

func benchEngineCPU(b *testing.B, sessions int, delay time.Duration) {
	url := startMockProcess(b, scriptJSON(engineSteps, delay, false), plainHTTP)
	g := startGatewayNode(b, url)
	runGateway(b, g, "warm", min(sessions, concurrency)) // activation paths, pool connections
	var per, rates []float64
	for i := 0; b.Loop(); i++ {
		cpu0 := processCPU()
		calls, elapsed := runGateway(b, g, fmt.Sprintf("c%d", i), sessions)
		if calls == 0 {
			b.Fatal("no LLM call answered")
		}
		per = append(per, float64((processCPU()-cpu0).Microseconds())/float64(calls))
		rates = append(rates, float64(calls)/elapsed.Seconds())
	}
	reportSpread(b, "cpu-us/step", per)
	reportSpread(b, "steps/s", rates)
}
