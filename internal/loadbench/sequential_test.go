package loadbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fathom-agents/fathom/internal/httpclient"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// seqSteps is the plan size of BenchmarkSequentialSession's sessions, and seqSessions
// how many run, one after another, in one op (one round).
const (
	seqSteps    = 10
	seqSessions = 8
)

// modelClock wraps the model server and records, for the session running (one at a
// time), when its first chat request arrived and when its last answer was written.
type modelClock struct {
	mu          sync.Mutex
	first, last time.Time
	calls       int
	inner       http.Handler
}

func (c *modelClock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		c.inner.ServeHTTP(w, r)
		return
	}
	t := time.Now()
	c.mu.Lock()
	if c.first.IsZero() {
		c.first = t
	}
	c.mu.Unlock()
	c.inner.ServeHTTP(w, r)
	end := time.Now()
	c.mu.Lock()
	c.last, c.calls = end, c.calls+1
	c.mu.Unlock()
}

// reset forgets the previous session's times.
func (c *modelClock) reset() {
	c.mu.Lock()
	c.first, c.last, c.calls = time.Time{}, time.Time{}, 0
	c.mu.Unlock()
}

// read returns the current session's first request, last answer and call count.
func (c *modelClock) read() (first, last time.Time, calls int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first, c.last, c.calls
}

// seqRounds runs, per op, seqSessions sessions one after another with session and reports the
// round's medians: "p50-start-ms" (start request to the first model request arriving),
// "p50-end-ms" (the last model answer written to the session's end: session_completed
// received by its event-stream subscriber, or the baseline's completion row committed),
// "step-ms" (the first model request to the last answer, ÷ seqSteps), "p50-session-ms"
// (the start request to the session's end, the whole session) and "wal-B/step"
// (the PostgreSQL server's write-ahead log written during the round ÷ its steps, start
// and end included: what the journal writes per step).
func seqRounds(b *testing.B, clock *modelClock, session func(id string) (t0, end time.Time)) {
	var starts, ends, steps, wal, whole []float64
	lsn := walPosition(b)
	for i := 0; b.Loop(); i++ {
		w0 := lsn()
		var rs, re, rstep, rwhole []time.Duration
		for k := range seqSessions {
			clock.reset()
			t0, end := session(fmt.Sprintf("q%d-%d", i, k))
			first, last, calls := clock.read()
			if calls != 2*seqSteps+1 {
				b.Fatalf("session made %d model calls, want %d (the plan, then a tool call and an answer per step)", calls, 2*seqSteps+1)
			}
			rs, re, rstep = append(rs, first.Sub(t0)), append(re, end.Sub(last)), append(rstep, last.Sub(first)/seqSteps)
			rwhole = append(rwhole, end.Sub(t0))
		}
		starts = append(starts, ms(percentile(rs, 0.5)))
		ends = append(ends, ms(percentile(re, 0.5)))
		steps = append(steps, ms(percentile(rstep, 0.5)))
		whole = append(whole, ms(percentile(rwhole, 0.5)))
		wal = append(wal, float64(lsn()-w0)/(seqSessions*seqSteps))
	}
	reportSpread(b, "p50-start-ms", starts)
	reportSpread(b, "p50-end-ms", ends)
	reportSpread(b, "step-ms", steps)
	reportSpread(b, "p50-session-ms", whole)
	reportSpread(b, "wal-B/step", wal)
}

// walPosition returns a reader of the PostgreSQL server's current write-ahead log
// position, in bytes.
func walPosition(b *testing.B) func() int64 {
	pool, err := pgxpool.New(context.Background(), testenv.PostgresDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return func() int64 {
		var n int64
		if err := pool.QueryRow(context.Background(), `SELECT pg_current_wal_lsn() - '0/0'::pg_lsn`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkSequentialSession runs sessions one at a time against a zero-latency model:
// each plans seqSteps steps and, in every step, calls the write_todos tool once and then
// answers (two model calls and one tool call a step). One op is a round of seqSessions
// sessions; figures are per-round medians, reported as their median over the rounds
// with the spread (see seqRounds for the units).
//
//   - gateway: the node, sessions started over its gateway (POST /v1/sessions) and
//     followed by an NDJSON event-stream subscriber; the session ends when that
//     subscriber reads session_completed (durable and published).
//   - baseline=direct-journal: the same loop written directly on the journal, as a
//     checkpointing library (DBOS) runs it: a start row committed, then the planning
//     call, and per step a model call over HTTP, the tool called in-process, a second
//     model call, every result committed with one INSERT (autocommit, fsync) before the
//     next call, and a completion row committed last. Same model server, same requests'
//     shape, same PostgreSQL server.
func BenchmarkSequentialSession(b *testing.B) {
	b.Run("gateway", func(b *testing.B) {
		clock := &modelClock{inner: mock.New(mock.Config{Script: parseScript(b, scriptJSON(seqSteps, 0, true))}).Handler()}
		model := httptest.NewServer(clock)
		b.Cleanup(model.Close)
		g := startGatewayNode(b, model.URL)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		session := func(id string) (time.Time, time.Time) {
			t0 := time.Now()
			if err := g.start(ctx, id, "sequential "+id); err != nil {
				b.Fatal(err)
			}
			tools := 0
			if err := g.follow(ctx, id, func(typ []byte) {
				if string(typ) == "tool_called" {
					tools++
				}
			}); err != nil {
				b.Fatal(err)
			}
			end := time.Now()
			if tools != seqSteps {
				b.Fatalf("session %s called %d tools, want %d", id, tools, seqSteps)
			}
			return t0, end
		}
		session("warm") // activation paths, connections
		seqRounds(b, clock, session)
	})
	b.Run("baseline=direct-journal", func(b *testing.B) {
		clock := &modelClock{inner: mock.New(mock.Config{Script: parseScript(b, scriptJSON(seqSteps, 0, true))}).Handler()}
		model := httptest.NewServer(clock)
		b.Cleanup(model.Close)
		ctx := context.Background()
		pcfg, err := pgxpool.ParseConfig(testenv.PostgresDSN(b))
		if err != nil {
			b.Fatal(err)
		}
		pcfg.MaxConns = 1
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(pool.Close)
		if _, err := pool.Exec(ctx, `CREATE TABLE bench_journal (stream_id text, seq bigint, data bytea, PRIMARY KEY (stream_id, seq))`); err != nil {
			b.Fatal(err)
		}
		client := &http.Client{Transport: httpclient.Transport(), Timeout: time.Minute}
		url := model.URL + "/v1/chat/completions"
		session := func(id string) (time.Time, time.Time) {
			t0 := time.Now()
			if err := directSession(ctx, client, url, pool, id); err != nil {
				b.Fatal(err)
			}
			return t0, time.Now()
		}
		session("warm")
		seqRounds(b, clock, session)
	})
}

func parseScript(b *testing.B, js string) mock.Script {
	sc, err := mock.ParseScript([]byte(js))
	if err != nil {
		b.Fatal(err)
	}
	return sc
}

// directSession is one session of the direct-journal baseline (see
// BenchmarkSequentialSession).
func directSession(ctx context.Context, client *http.Client, url string, pool *pgxpool.Pool, id string) error {
	seq := 0
	commit := func(data []byte) error {
		seq++
		_, err := pool.Exec(ctx, `INSERT INTO bench_journal VALUES ($1, $2, $3)`, id, seq, data)
		return err
	}
	if err := commit([]byte(`{"started":"` + id + `"}`)); err != nil {
		return err
	}
	plan, err := chat(ctx, client, url, chatBody("orchestrator", "Goal: sequential "+id, nil))
	if err != nil {
		return err
	}
	if err := commit(plan); err != nil {
		return err
	}
	for s := range seqSteps {
		user := fmt.Sprintf("Goal: sequential %s\nStep: step %d", id, s)
		call, err := chat(ctx, client, url, chatBody("executor", user, nil))
		if err != nil {
			return err
		}
		if err := commit(call); err != nil {
			return err
		}
		var ans struct {
			Choices []struct {
				Message struct {
					ToolCalls []json.RawMessage `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(call, &ans); err != nil || len(ans.Choices) == 0 || len(ans.Choices[0].Message.ToolCalls) != 1 {
			return fmt.Errorf("step %d: want one tool call, got %s (%v)", s, call, err)
		}
		var tc struct {
			ID       string `json:"id"`
			Function struct {
				Arguments string `json:"arguments"`
			} `json:"function"`
		}
		if err := json.Unmarshal(ans.Choices[0].Message.ToolCalls[0], &tc); err != nil {
			return err
		}
		result, err := writeTodos(tc.Function.Arguments) // the tool, in-process
		if err != nil {
			return err
		}
		if err := commit([]byte(result)); err != nil {
			return err
		}
		final, err := chat(ctx, client, url, chatBody("executor", user, &toolTurn{call: ans.Choices[0].Message.ToolCalls[0], id: tc.ID, result: result}))
		if err != nil {
			return err
		}
		if err := commit(final); err != nil {
			return err
		}
	}
	return commit([]byte(`{"completed":"` + id + `"}`))
}

// writeTodos is the baseline's tool: it decodes the write_todos arguments and renders
// the list, as the built-in tool does.
func writeTodos(args string) (string, error) {
	var a struct {
		Todos []struct {
			Content string `json:"content"`
			Status  string `json:"status"`
		} `json:"todos"`
	}
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		return "", fmt.Errorf("write_todos arguments: %w", err)
	}
	var sb strings.Builder
	for _, t := range a.Todos {
		fmt.Fprintf(&sb, "[%s] %s\n", t.Status, t.Content)
	}
	return sb.String(), nil
}

// toolTurn is the assistant's tool call and its result, sent back to the model.
type toolTurn struct {
	call       json.RawMessage
	id, result string
}

// chatBody is a chat request shaped like a session's calls: a system prompt with the
// role's marker (~4 KB), the user turn and, after a tool call, the call and its result.
func chatBody(role, user string, tool *toolTurn) []byte {
	msgs := []any{
		map[string]string{"role": "system", "content": "FATHOM-ROLE: " + role + "\n" + strings.Repeat("You carry out one step of a plan and report what you did. ", 75)},
		map[string]string{"role": "user", "content": user},
	}
	if tool != nil {
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []json.RawMessage{tool.call}},
			map[string]string{"role": "tool", "tool_call_id": tool.id, "content": tool.result})
	}
	out, err := json.Marshal(map[string]any{"model": "mock", "messages": msgs})
	if err != nil {
		panic(err)
	}
	return out
}

// chat POSTs body and returns the answer read whole.
func chat(ctx context.Context, client *http.Client, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer k")
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	answer, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("model answered %d: %s (%v)", res.StatusCode, answer, err)
	}
	return answer, nil
}
