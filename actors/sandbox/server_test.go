package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/internal/sandboxd"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages/fsp"
	"github.com/fathom-agents/fathom/tools"
	"github.com/fathom-agents/fathom/tools/builtin"
)

// TestMain lets the test binary serve as the sandbox's rlimit helper.
func TestMain(m *testing.M) {
	sandboxd.RunHelperIfRequested()
	os.Exit(m.Run())
}

const serverToken = "sandbox-test-token"

// realSandbox is the real FSP server (internal/sandboxd) on a loopback port that stays
// the same across kill and restart, so the pool's connections find it again.
type realSandbox struct {
	t    testing.TB
	addr string
	logs *logBuffer

	mu   sync.Mutex
	srv  *sandboxd.Server
	http *httptest.Server
}

func startSandbox(t testing.TB) *realSandbox {
	t.Helper()
	s := &realSandbox{t: t, logs: &logBuffer{}}
	s.start("127.0.0.1:0")
	t.Cleanup(s.kill)
	return s
}

func (s *realSandbox) url() string { return "ws://" + s.addr + fsp.Path }

func (s *realSandbox) start(addr string) {
	s.t.Helper()
	cfg := sandboxd.DefaultConfig()
	cfg.Token = serverToken
	cfg.KillGrace = 300 * time.Millisecond
	srv, err := sandboxd.New(cfg, s.logs.logger())
	if errors.Is(err, sandboxd.ErrBwrapUnavailable) && os.Getenv("FATHOM_TEST_REQUIRE_SERVICES") == "" {
		s.t.Logf("no bubblewrap here: the test sandbox runs with isolation rlimits (%v)", err)
		cfg.Isolation = sandboxd.IsolationRlimits
		srv, err = sandboxd.New(cfg, s.logs.logger())
	}
	if err != nil {
		s.t.Fatalf("sandboxd.New: %v", err)
	}
	var ln net.Listener
	testenv.Eventually(s.t, 5*time.Second, func() bool {
		ln, err = net.Listen("tcp", addr)
		return err == nil
	}, "listen on %s: %v", addr, err)
	mux := http.NewServeMux()
	mux.Handle(fsp.Path, srv)
	hs := httptest.NewUnstartedServer(mux)
	hs.Listener = ln
	hs.Start()
	s.mu.Lock()
	s.srv, s.http, s.addr = srv, hs, ln.Addr().String()
	s.mu.Unlock()
}

// kill closes the server and every connection (killing running executions).
func (s *realSandbox) kill() {
	s.mu.Lock()
	srv, hs := s.srv, s.http
	s.srv, s.http = nil, nil
	s.mu.Unlock()
	if srv == nil {
		return
	}
	hs.Listener.Close() // refuse new connections at once
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		s.t.Errorf("close sandbox: %v", err)
	}
	hs.Close()
}

func (s *realSandbox) restart() { s.start(s.addr) }

// executor returns the built-in tools routed through p, with live output to out.
func executor(t *testing.T, p *Pool, timeout time.Duration, out func(tools.Call, Chunk)) *tools.Executor {
	t.Helper()
	reg, err := builtin.Registry(builtin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &tools.Executor{Registry: reg, Timeout: timeout, External: &Runner{Pool: p, Output: out}}
}

func waitStats(t *testing.T, p *Pool, what string, cond func(Stats) bool) {
	t.Helper()
	var st Stats
	testenv.Eventually(t, 15*time.Second, func() bool {
		var err error
		st, err = p.Stats(context.Background())
		return err == nil && cond(st)
	}, "pool stats: want %s, have %+v", what, &st)
}

// TestExecuteThroughExecutor: code_execute through the executor, the runner, the pool
// and a real sandbox; output streams live with the call it belongs to.
func TestExecuteThroughExecutor(t *testing.T) {
	sb := startSandbox(t)
	p, _ := startPool(t, testConfig(sb.url(), serverToken, discardLogger()))
	var mu sync.Mutex
	var live []string
	exec := executor(t, p, 20*time.Second, func(c tools.Call, ch Chunk) {
		mu.Lock()
		defer mu.Unlock()
		live = append(live, c.SessionID+"|"+string(ch.Stream)+"|"+ch.Data)
	})
	res := exec.Run(context.Background(), tools.Call{ID: "c1", Name: "code_execute", SessionID: "s1",
		Args: json.RawMessage(`{"language":"python","code":"import sys\nprint(sum(range(10)))\nprint('oops', file=sys.stderr)\nprint(input())","stdin":"fed\n"}`)})
	if res.Err != nil {
		t.Fatalf("code_execute: %v", res.Err)
	}
	var out Result
	if err := json.Unmarshal([]byte(res.Output), &out); err != nil {
		t.Fatalf("output %q: %v", res.Output, err)
	}
	if out.Status != fsp.StatusCompleted || out.ExitCode == nil || *out.ExitCode != 0 || out.Stdout != "45\nfed\n" || out.Stderr != "oops\n" {
		t.Fatalf("result %+v", out)
	}
	mu.Lock()
	joined := strings.Join(live, "")
	mu.Unlock()
	if !strings.Contains(joined, "s1|stdout|") || !strings.Contains(joined, "s1|stderr|oops") {
		t.Fatalf("live output %q", live)
	}
	// A program that fails is a result, not a ToolError: the LLM reads its stderr.
	res = exec.Run(context.Background(), tools.Call{ID: "c2", Name: "code_execute",
		Args: json.RawMessage(`{"language":"shell","code":"echo no >&2; exit 3"}`)})
	if res.Err != nil || !strings.Contains(res.Output, `"exit_code":3`) || !strings.Contains(res.Output, `"stderr":"no\n"`) {
		t.Fatalf("failing program: %+v", res)
	}
}

// TestKillAndRestart: killing the sandbox mid-execution fails the execution as a
// retryable sandbox error; the connections retry with exponential backoff and, once
// the sandbox is back, the pool executes again.
func TestKillAndRestart(t *testing.T) {
	sb := startSandbox(t)
	var logs logBuffer
	cfg := testConfig(sb.url(), serverToken, logs.logger())
	p, _ := startPool(t, cfg)
	waitStats(t, p, "all connections up", func(s Stats) bool { return s.Up == cfg.PoolSize })

	started := make(chan struct{}, 1)
	errc := make(chan error, 1)
	go func() {
		_, err := p.Execute(context.Background(), Request{Language: fsp.LangPython, Timeout: 30 * time.Second,
			Code: "import time\nprint('started', flush=True)\ntime.sleep(30)",
			Output: func(Chunk) {
				select {
				case started <- struct{}{}:
				default:
				}
			}})
		errc <- err
	}()
	select {
	case <-started:
	case err := <-errc:
		t.Fatalf("the execution ended before the kill: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("the execution did not start")
	}
	killed := time.Now()
	sb.kill()
	select {
	case err := <-errc:
		te := asToolError(t, err)
		if te.Type != tools.ErrSandbox || !te.Retryable || !strings.Contains(te.Message, "lost") {
			t.Fatalf("want a retryable sandbox error about the lost connection, got %+v", te)
		}
		if d := time.Since(killed); d > 5*time.Second {
			t.Fatalf("the failure took %s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pending execution was not failed after the kill")
	}
	waitStats(t, p, "no connection up", func(s Stats) bool { return s.Up == 0 })
	// While it is down: immediate retry, then 20ms, 40ms, ... (testConfig's backoff).
	testenv.Eventually(t, 10*time.Second, func() bool {
		l := logs.String()
		return strings.Contains(l, "retry_in=20ms") && strings.Contains(l, "retry_in=40ms") && strings.Contains(l, "retry_in=80ms")
	}, "backoff 20ms, 40ms, 80ms in the logs:\n%s", &logs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := p.Execute(ctx, Request{Language: fsp.LangShell, Code: "echo hi"})
	cancel()
	if te := asToolError(t, err); te.Type != tools.ErrSandbox || !te.Retryable || !strings.Contains(te.Message, "unavailable") {
		t.Fatalf("while the sandbox is down: want a retryable 'unavailable' sandbox error, got %+v", te)
	}

	sb.restart()
	waitStats(t, p, "all connections back", func(s Stats) bool { return s.Up == cfg.PoolSize })
	ctx, cancel = context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	res, err := p.Execute(ctx, Request{Language: fsp.LangShell, Code: "echo back"})
	if err != nil || res.Stdout != "back\n" {
		t.Fatalf("after the restart: %+v %v", res, err)
	}
	if !strings.Contains(logs.String(), "sandbox connection restored") {
		t.Errorf("no 'restored' log:\n%s", logs.String())
	}
}

// TestRetryCapRestartsConnection: after MaxRetries failed dials the connection fails,
// its supervisor restarts it (a SupervisorEvent on the event stream), and it connects
// once the sandbox is back.
func TestRetryCapRestartsConnection(t *testing.T) {
	sb := startSandbox(t)
	cfg := testConfig(sb.url(), serverToken, discardLogger())
	cfg.PoolSize, cfg.PoolOverflow, cfg.MaxRetries = 1, 0, 2
	p, system := startPool(t, cfg)
	var restarts atomic.Int32
	sub := system.EventStream.Subscribe(func(ev any) {
		if se, ok := ev.(*actor.SupervisorEvent); ok {
			if err, ok := se.Reason.(*RetriesExhaustedError); ok && err.Attempts == 2 && se.Directive == actor.RestartDirective {
				restarts.Add(1)
			}
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	waitStats(t, p, "connected", func(s Stats) bool { return s.Up == 1 })
	sb.kill()
	testenv.Eventually(t, 15*time.Second, func() bool { return restarts.Load() >= 2 },
		"two supervised restarts after the retry cap (have %d)", &restarts)
	sb.restart()
	waitStats(t, p, "reconnected after the restarts", func(s Stats) bool { return s.Up == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if res, err := p.Execute(ctx, Request{Language: fsp.LangShell, Code: "echo ok"}); err != nil || res.Stdout != "ok\n" {
		t.Fatalf("after the restarts: %+v %v", res, err)
	}
}

// TestTimeouts: a sandbox slower than the caller's deadline gives a timeout ToolError and
// the sandbox receives the cancel; the sandbox's own time limit maps to a timeout too.
func TestTimeouts(t *testing.T) {
	sb := startSandbox(t)
	p, _ := startPool(t, testConfig(sb.url(), serverToken, discardLogger()))
	exec := executor(t, p, time.Second, nil)
	start := time.Now()
	res := exec.Run(context.Background(), tools.Call{ID: "slow", Name: "code_execute",
		Args: json.RawMessage(`{"language":"python","code":"import time\ntime.sleep(30)","timeout_ms":20000}`)})
	if res.Err == nil || res.Err.Type != tools.ErrTimeout || res.Err.Retryable {
		t.Fatalf("slow sandbox: want a timeout error, got %+v", res)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the timeout took %s", d)
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		l := sb.logs.String()
		return strings.Contains(l, "cancel requested") && strings.Contains(l, "status=cancelled")
	}, "the sandbox saw the cancel and cancelled the execution:\n%s", sb.logs)

	// Client watchdog without an executor deadline: Pool.Execute with a short context.
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	_, err := p.Execute(ctx, Request{Language: fsp.LangShell, Code: "sleep 30", Timeout: 20 * time.Second})
	cancel()
	if te := asToolError(t, err); te.Type != tools.ErrTimeout {
		t.Fatalf("short context: want a timeout error, got %+v", te)
	}

	// The sandbox enforces timeout_ms itself: status timeout ⇒ timeout error.
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = p.Execute(ctx, Request{Language: fsp.LangShell, Code: "sleep 30", Timeout: 500 * time.Millisecond})
	if te := asToolError(t, err); te.Type != tools.ErrTimeout || !strings.Contains(te.Message, "500ms") {
		t.Fatalf("sandbox time limit: want a 500ms timeout error, got %+v", te)
	}
}

// TestPoolExhausted: with every connection (base and overflow) busy, a further execution
// waits CheckoutTimeout and fails as a retryable sandbox error; idle overflow connections
// close again.
func TestPoolExhausted(t *testing.T) {
	sb := startSandbox(t)
	cfg := testConfig(sb.url(), serverToken, discardLogger())
	cfg.PoolSize, cfg.PoolOverflow, cfg.CheckoutTimeout = 1, 1, 400*time.Millisecond
	p, _ := startPool(t, cfg)
	waitStats(t, p, "connected", func(s Stats) bool { return s.Up == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = p.Execute(ctx, Request{Language: fsp.LangShell, Code: "sleep 20"})
		}()
		// One at a time, so the second finds the first busy and opens the overflow one.
		waitStats(t, p, "one more busy", func(s Stats) bool { return s.Waiting == 0 && s.Busy >= 1 })
	}
	waitStats(t, p, "base and overflow busy", func(s Stats) bool { return s.Busy == 2 && s.Overflow == 1 })
	start := time.Now()
	_, err := p.Execute(context.Background(), Request{Language: fsp.LangShell, Code: "echo never"})
	te := asToolError(t, err)
	if te.Type != tools.ErrSandbox || !te.Retryable || !strings.Contains(te.Message, "exhausted") {
		t.Fatalf("want a retryable 'pool exhausted' sandbox error, got %+v", te)
	}
	if d := time.Since(start); d < cfg.CheckoutTimeout || d > 5*time.Second {
		t.Fatalf("failed after %s, want about %s", d, cfg.CheckoutTimeout)
	}
	cancel()
	wg.Wait()
	waitStats(t, p, "overflow closed, base idle", func(s Stats) bool { return s.Connections == 1 && s.Busy == 0 && s.Up == 1 })
}

// TestBadToken: a refused token fails executions at once with a clear, non-retryable
// sandbox error.
func TestBadToken(t *testing.T) {
	sb := startSandbox(t)
	p, _ := startPool(t, testConfig(sb.url(), "wrong-token", discardLogger()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := p.Execute(ctx, Request{Language: fsp.LangShell, Code: "echo hi"})
	te := asToolError(t, err)
	if te.Type != tools.ErrSandbox || te.Retryable || !strings.Contains(te.Message, "refused the credentials (HTTP 401)") ||
		!strings.Contains(te.Message, "SANDBOX_API_KEY") {
		t.Fatalf("want a non-retryable credentials error, got %+v", te)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the credentials error took %s", d)
	}
}

// TestBadTokenStopsDialing: without a refresh URL a refused token is not redialed
// forever: each connection tries once, logs why it stops, and executions keep failing at
// once with the non-retryable credentials error.
func TestBadTokenStopsDialing(t *testing.T) {
	sb := startSandbox(t)
	var logs logBuffer
	cfg := testConfig(sb.url(), "wrong-token", logs.logger())
	cfg.MaxRetries = 3 // the old behaviour would also restart the connections after 3
	p, _ := startPool(t, cfg)
	refusals := func() int { return strings.Count(sb.logs.String(), "bad token") }
	testenv.Eventually(t, 5*time.Second, func() bool { return refusals() >= cfg.PoolSize }, "every connection dials once")
	// Many backoff periods (20ms..200ms) pass: no connection dials again.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); <-tick.C {
		if n := refusals(); n > cfg.PoolSize {
			t.Fatalf("%d dials refused for %d connections: a refused token is redialed", n, cfg.PoolSize)
		}
		start := time.Now()
		_, err := p.Execute(context.Background(), Request{Language: fsp.LangShell, Code: "echo hi"})
		if te := asToolError(t, err); te.Retryable || !strings.Contains(te.Message, "HTTP 401") || time.Since(start) > time.Second {
			t.Fatalf("after %s: %+v", time.Since(start), te)
		}
	}
	if !strings.Contains(logs.String(), "not reconnecting") {
		t.Fatalf("the client does not say why it stopped:\n%s", logs.String())
	}
}

// TestTokenRefresh: the sandbox refuses the initial key; the token manager fetches a
// fresh one from the refresh endpoint, the connections use it, and it keeps refreshing
// on schedule.
func TestTokenRefresh(t *testing.T) {
	sb := startSandbox(t)
	var calls atomic.Int32
	rs := refreshServer(t, func(cur string) (int, string) {
		calls.Add(1)
		if cur != "expired-key" && cur != serverToken {
			return 401, `{}`
		}
		return 200, `{"token":"` + serverToken + `","expires_at":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `"}`
	})
	cfg := testConfig(sb.url(), "expired-key", discardLogger())
	cfg.RefreshURL, cfg.RefreshInterval, cfg.RefreshRetry = rs.URL, 300*time.Millisecond, 100*time.Millisecond
	p, _ := startPool(t, cfg)
	waitStats(t, p, "connected with the refreshed token", func(s Stats) bool { return s.Up == cfg.PoolSize })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := p.Execute(ctx, Request{Language: fsp.LangShell, Code: "echo fresh"}); err != nil || res.Stdout != "fresh\n" {
		t.Fatalf("with the refreshed token: %+v %v", res, err)
	}
	if p.token.get() != serverToken {
		t.Fatalf("token %q", p.token.get())
	}
	n := calls.Load()
	testenv.Eventually(t, 5*time.Second, func() bool { return calls.Load() >= n+2 }, "scheduled refreshes (have %d)", &calls)
}

// TestStatsWithNoTimeLeft: Stats on a context already past its deadline fails at once
// with context.DeadlineExceeded (a request future with a negative timeout would never
// time out).
func TestStatsWithNoTimeLeft(t *testing.T) {
	sb := startSandbox(t)
	p, _ := startPool(t, testConfig(sb.url(), serverToken, discardLogger()))
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := p.Stats(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stats past the deadline = %v; want context.DeadlineExceeded", err)
	}
	if _, err := p.Stats(context.Background()); err != nil {
		t.Fatalf("Stats with time left: %v", err)
	}
}
