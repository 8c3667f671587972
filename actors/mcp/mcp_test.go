package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/mcp"
	"github.com/fathom-agents/fathom/actors/observer"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/tools"
	mcptool "github.com/fathom-agents/fathom/tools/mcp"
	"github.com/fathom-agents/fathom/tools/mcp/mcptest"
)

// start runs servers on a fresh actor system and returns them with the executor of their
// registry; the test's cleanup stops them.
func start(t *testing.T, servers ...mcptool.ServerConfig) (*mcp.Servers, *tools.Executor, *actor.ActorSystem, *testenv.Buffer) {
	t.Helper()
	return startWith(t, nil, servers...)
}

// startWith is start with edit applied to the configuration.
func startWith(t *testing.T, edit func(*mcp.Config), servers ...mcptool.ServerConfig) (*mcp.Servers, *tools.Executor, *actor.ActorSystem, *testenv.Buffer) {
	t.Helper()
	reg, err := tools.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	system := actor.NewActorSystem()
	cfg := mcp.DefaultConfig()
	cfg.Servers, cfg.Registry, cfg.Logger = servers, reg, slog.New(slog.NewTextHandler(logs, nil))
	cfg.RestartBackoff = 100 * time.Millisecond
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := mcp.Start(ctx, system, cfg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
		system.Shutdown()
	})
	return s, &tools.Executor{Registry: reg, Timeout: 10 * time.Second}, system, logs
}

func call(ex *tools.Executor, name, args string) tools.Result {
	return ex.Run(context.Background(), tools.Call{ID: "c", Name: name, Args: json.RawMessage(args)})
}

func status(s *mcp.Servers, name string) mcp.Status {
	for _, st := range s.Status() {
		if st.Name == name {
			return st
		}
	}
	return mcp.Status{}
}

// TestServersStartWithTheNodeAndRegisterTheirTools: a stdio and an HTTP server of the
// TypeScript SDK are connected when Start returns, their tools registered as
// {server}__{tool}, and callable through the executor.
func TestServersStartWithTheNodeAndRegisterTheirTools(t *testing.T) {
	url := mcptest.HTTP(t, "tok")
	s, ex, _, _ := start(t, mcptest.Stdio(t, "orders"),
		mcptool.ServerConfig{Name: "docs", URL: url, Headers: map[string]string{"Authorization": "Bearer tok"}})
	for _, name := range []string{"orders", "docs"} {
		st := status(s, name)
		if !st.Connected || st.Connects != 1 || !slices.Contains(st.Tools, name+"__echo") || !slices.Contains(st.Tools, name+"__lookup_order") {
			t.Fatalf("%s: %+v", name, st)
		}
		if res := call(ex, name+"__echo", `{"text":"hi"}`); res.Err != nil || !strings.HasPrefix(res.Output, "echo: hi") {
			t.Fatalf("%s__echo: %q %v", name, res.Output, res.Err)
		}
	}
	if status(s, "docs").Transport != mcptool.TransportHTTP || status(s, "orders").Transport != mcptool.TransportStdio {
		t.Fatalf("transports: %+v", s.Status())
	}
	// Stop ends the stdio server's process: nothing outlives the node.
	m := pidRE.FindStringSubmatch(call(ex, "orders__echo", `{"text":"pid?"}`).Output)
	if m == nil {
		t.Fatal("no pid in echo's answer")
	}
	pid, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the stdio server (pid %d) outlived Stop: kill -0: %v", pid, err)
	}
	if res := call(ex, "orders__echo", `{"text":"after"}`); res.Err == nil || res.Err.Type != tools.ErrSandbox {
		t.Fatalf("a call after Stop: %q %+v", res.Output, res.Err)
	}
}

var pidRE = regexp.MustCompile(`pid (\d+)`)

// TestCrashedServerIsRestarted: a stdio server whose process exits is a retryable
// sandbox error for the calls meanwhile; its connection actor fails, is restarted by its
// supervisor after the backoff (a Proto.Actor supervision event, which the node's
// observer logs and counts as kind mcp_server) and starts a new process.
func TestCrashedServerIsRestarted(t *testing.T) {
	s, ex, system, logs := start(t, mcptest.Stdio(t, "orders"))
	obs, err := observer.Spawn(system, observer.Config{Node: "test", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(obs.Stop)
	before := pidRE.FindStringSubmatch(call(ex, "orders__echo", `{"text":"a"}`).Output)
	if before == nil {
		t.Fatal("no pid in echo's answer")
	}
	res := call(ex, "orders__crash", `{}`)
	if res.Err == nil || res.Err.Type != tools.ErrSandbox || !res.Err.Retryable {
		t.Fatalf("the crashing call: %+v", res.Err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return status(s, "orders").Connects == 2 }, "the server was not restarted: %+v\n%s", s.Status(), logs)
	res = call(ex, "orders__echo", `{"text":"b"}`)
	after := pidRE.FindStringSubmatch(res.Output)
	if res.Err != nil || after == nil || after[1] == before[1] {
		t.Fatalf("after the restart: %q %v (pid before %s)", res.Output, res.Err, before[1])
	}
	var restarts []observer.Restart
	testenv.Eventually(t, 10*time.Second, func() bool {
		restarts, err = obs.Recent(context.Background())
		return err == nil && len(restarts) > 0
	}, "the observer saw no supervision event")
	r := restarts[0]
	if r.Kind != observer.KindMCP || r.Actor != "mcp/orders" || r.Directive != "restart" || !strings.Contains(r.Reason, "mcp server orders: connection lost") {
		t.Fatalf("restart record %+v", r)
	}
	if !strings.Contains(logs.String(), "actor supervision event") || !strings.Contains(logs.String(), "kind=mcp_server") {
		t.Fatalf("the observer did not log the restart:\n%s", logs)
	}
}

// TestListChangedUpdatesTheRegistry: a tool the server adds at run time (it sends
// notifications/tools/list_changed) is registered and callable; a removed one is gone.
// Over stdio, and over streamable HTTP (the notification arrives on the standalone SSE
// stream).
func TestListChangedUpdatesTheRegistry(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) mcptool.ServerConfig
	}{
		{"stdio", func(t *testing.T) mcptool.ServerConfig { return mcptest.Stdio(t, "orders") }},
		{"http", func(t *testing.T) mcptool.ServerConfig {
			return mcptool.ServerConfig{Name: "orders", URL: mcptest.HTTP(t, "")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ex, _, _ := start(t, tc.cfg(t))
			if res := call(ex, "orders__add_tool", `{"name":"double"}`); res.Err != nil {
				t.Fatal(res.Err)
			}
			testenv.Eventually(t, 10*time.Second, func() bool { _, ok := ex.Registry.Get("orders__double"); return ok }, "orders__double not registered")
			if res := call(ex, "orders__double", `{"n":21}`); res.Err != nil || res.Output != "double got 21" {
				t.Fatalf("orders__double: %q %v", res.Output, res.Err)
			}
			if res := call(ex, "orders__double", `{"n":"x"}`); res.Err == nil || res.Err.Type != tools.ErrValidation {
				t.Fatalf("the new tool's schema is not enforced: %+v", res.Err)
			}
			if res := call(ex, "orders__remove_tool", `{"name":"double"}`); res.Err != nil {
				t.Fatal(res.Err)
			}
			testenv.Eventually(t, 10*time.Second, func() bool { _, ok := ex.Registry.Get("orders__double"); return !ok }, "orders__double still registered")
			if _, ok := ex.Registry.Get("orders__echo"); !ok {
				t.Fatal("re-listing lost orders__echo")
			}
		})
	}
}

// TestStartFailsForAServerThatCannotStart: a command that does not exist fails the start
// with the server's name; nothing keeps running.
func TestStartFailsForAServerThatCannotStart(t *testing.T) {
	reg, err := tools.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	system := actor.NewActorSystem()
	defer system.Shutdown()
	cfg := mcp.DefaultConfig()
	cfg.Servers = []mcptool.ServerConfig{{Name: "ghost", Command: "/nonexistent/mcp-server"}}
	cfg.Registry, cfg.Logger = reg, slog.New(slog.NewTextHandler(&testenv.Buffer{}, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = mcp.Start(ctx, system, cfg)
	if err == nil || !strings.Contains(err.Error(), "mcp server ghost") {
		t.Fatalf("start: %v", err)
	}
	cfg.Servers = []mcptool.ServerConfig{{Name: "a", Command: "x"}, {Name: "a", Command: "y"}}
	if _, err := mcp.Start(ctx, system, cfg); err == nil || !strings.Contains(err.Error(), `two servers are named "a"`) {
		t.Fatalf("duplicate names: %v", err)
	}
}

// TestHTTPServerThatWentAwayIsReconnected: while the HTTP server is down its tools fail
// with a retryable sandbox error; when it is back (a new process, which knows nothing of
// the old session) the connection actor reconnects and the tools work again.
func TestHTTPServerThatWentAwayIsReconnected(t *testing.T) {
	srv := mcptest.StartHTTP(t, "")
	s, ex, _, logs := start(t, mcptool.ServerConfig{Name: "docs", URL: srv.URL})
	if res := call(ex, "docs__echo", `{"text":"a"}`); res.Err != nil {
		t.Fatal(res.Err)
	}
	srv.Stop()
	res := call(ex, "docs__echo", `{"text":"b"}`)
	if res.Err == nil || res.Err.Type != tools.ErrSandbox || !res.Err.Retryable {
		t.Fatalf("call while the server is down: %q %+v", res.Output, res.Err)
	}
	srv.Start()
	testenv.Eventually(t, 60*time.Second, func() bool {
		return call(ex, "docs__echo", `{"text":"c"}`).Err == nil
	}, "docs__echo never worked again: %+v\n%s", s.Status(), logs)
	if st := status(s, "docs"); st.Connects < 2 {
		t.Fatalf("status %+v", st)
	}
}

// TestHTTPServerRestartedKeepsTheFirstCall: an HTTP server that restarts between two
// calls (a new process that knows nothing of the old session) refuses the connection's
// session; the call reconnects and is sent again on the new session, and succeeds.
func TestHTTPServerRestartedKeepsTheFirstCall(t *testing.T) {
	srv := mcptest.StartHTTP(t, "")
	s, ex, _, logs := startWith(t, func(c *mcp.Config) { c.PingInterval = time.Hour }, mcptool.ServerConfig{Name: "docs", URL: srv.URL})
	if res := call(ex, "docs__echo", `{"text":"a"}`); res.Err != nil {
		t.Fatal(res.Err)
	}
	srv.Stop()
	srv.Start()
	if res := call(ex, "docs__echo", `{"text":"b"}`); res.Err != nil || !strings.HasPrefix(res.Output, "echo: b") {
		t.Fatalf("the first call after the server restarted: %q %+v\n%s", res.Output, res.Err, logs)
	}
	if st := status(s, "docs"); !st.Connected || st.Connects != 2 {
		t.Fatalf("status %+v, want a second connection", st)
	}
	// The restarted server answers the old session with 404 (reconnect at once, "lost the
	// session") or, when the request races its start, 400 (the connection is lost and
	// its actor restarts); either way the connection is made again and says so.
	if l := logs.String(); !strings.Contains(l, "mcp server reconnected") ||
		(!strings.Contains(l, "mcp server lost the session: reconnecting") && !strings.Contains(l, "mcp server connection lost")) {
		t.Fatalf("no reconnect logged:\n%s", logs)
	}
}

// TestDeadHTTPServerIsNoticedByPing: a connected HTTP server that dies is marked down by
// the next unanswered ping, with no call made, and reconnected when it is back.
func TestDeadHTTPServerIsNoticedByPing(t *testing.T) {
	srv := mcptest.StartHTTP(t, "")
	s, ex, _, logs := startWith(t, func(c *mcp.Config) { c.PingInterval, c.PingTimeout = 200*time.Millisecond, time.Second },
		mcptool.ServerConfig{Name: "docs", URL: srv.URL})
	if st := status(s, "docs"); !st.Connected {
		t.Fatalf("status %+v", st)
	}
	srv.Stop()
	testenv.Eventually(t, 10*time.Second, func() bool { return !status(s, "docs").Connected }, "the dead server still counts as connected: %+v\n%s", s.Status(), logs)
	if !strings.Contains(logs.String(), "no answer to a ping") {
		t.Fatalf("the ping did not say why the connection ended:\n%s", logs)
	}
	srv.Start()
	testenv.Eventually(t, 30*time.Second, func() bool { st := status(s, "docs"); return st.Connected && st.Connects >= 2 },
		"the server was not reconnected: %+v\n%s", s.Status(), logs)
	if res := call(ex, "docs__echo", `{"text":"c"}`); res.Err != nil {
		t.Fatalf("after the reconnect: %+v", res.Err)
	}
}
