package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/messages/fsp"
)

const testToken = "test-token"

// helperBallastEnv, in an execution's env, makes the test binary touch that many MB at
// start when it runs as the sandbox's waiter or exec helper: the fathom binary's package
// initialisation leaves its helpers with a peak RSS of about 54 MB, the test binary's is
// a few MB, and a program must not be charged with its helpers' peak either way.
const helperBallastEnv = "FATHOM_TEST_HELPER_BALLAST_MB"

// The helpers' ballast (none in the test process itself), a package variable so it is
// touched before TestMain runs the helper, as package inits are.
var _ = func() []byte {
	if len(os.Args) < 2 || !strings.HasPrefix(os.Args[1], "__fathom-sandbox-") {
		return nil
	}
	mb, _ := strconv.Atoi(os.Getenv(helperBallastEnv))
	b := make([]byte, mb<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return b
}()

func TestMain(m *testing.M) {
	RunHelperIfRequested()
	os.Exit(m.Run())
}

// testLogWriter sends server logs to the test log.
type testLogWriter struct {
	mu sync.Mutex
	t  testing.TB
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.t != nil {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// testServer is a sandbox served over a real WebSocket on 127.0.0.1:0.
type testServer struct {
	srv  *Server
	url  string // ws://.../ws
	http *httptest.Server
}

var (
	modeOnce   sync.Once
	modeLogged Isolation
)

// newTestServer starts a sandbox with the defaults, changed by mutate, and stops it when
// the test ends.
func newTestServer(t testing.TB, mutate func(*Config)) *testServer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Token = testToken
	cfg.MaxConcurrent = 6
	cfg.KillGrace = 500 * time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	w := &testLogWriter{t: t}
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := New(cfg, log)
	if errors.Is(err, ErrBwrapUnavailable) && cfg.Isolation == IsolationAuto && os.Getenv("FATHOM_TEST_REQUIRE_SERVICES") == "" {
		// Tests that need namespaces skip through requireBwrap; the rest run without.
		t.Logf("no bubblewrap here, testing with isolation rlimits: %v", err)
		cfg.Isolation = IsolationRlimits
		srv, err = New(cfg, log)
	}
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	modeOnce.Do(func() {
		modeLogged = srv.Isolation()
		fmt.Fprintf(os.Stderr, "sandboxd tests: isolation mode %s, languages %v, root %v\n", srv.Isolation(), srv.Languages(), os.Geteuid() == 0)
	})
	mux := http.NewServeMux()
	mux.Handle(fsp.Path, srv)
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		hs.Close()
		w.mu.Lock()
		w.t = nil
		w.mu.Unlock()
	})
	return &testServer{srv: srv, http: hs, url: "ws" + strings.TrimPrefix(hs.URL, "http") + fsp.Path}
}

func authHeader() http.Header {
	return http.Header{fsp.HeaderAuthorization: {fsp.BearerPrefix + testToken}, fsp.HeaderProtocolVersion: {"1"}}
}

// client is the test's side of one connection, using gorilla/websocket directly.
type client struct {
	t  testing.TB
	ws *websocket.Conn
}

func (s *testServer) dial(t testing.TB) *client {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial(s.url, authHeader())
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", s.url, err, resp)
	}
	if got := resp.Header.Get(fsp.HeaderProtocolVersion); got != "1" {
		t.Errorf("upgrade response %s = %q, want 1", fsp.HeaderProtocolVersion, got)
	}
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws}
}

func (c *client) sendRaw(frame string) {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *client) send(m fsp.Message) {
	c.t.Helper()
	b, err := fsp.Encode(m)
	if err != nil {
		c.t.Fatalf("encode: %v", err)
	}
	c.sendRaw(string(b))
}

// recv returns the next frame, failing the test after 20 s.
func (c *client) recv() fsp.Message {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, b, err := c.ws.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	m, err := fsp.Decode(b)
	if err != nil {
		c.t.Fatalf("server sent an undecodable frame %s: %v", b, err)
	}
	return m
}

// expect returns the next frame, which must be a T.
func expect[T fsp.Message](c *client) T {
	c.t.Helper()
	m := c.recv()
	v, ok := m.(T)
	if !ok {
		var zero T
		c.t.Fatalf("got %T %+v, want %T", m, m, zero)
	}
	return v
}

func (c *client) execute(id string, lang fsp.Language, code string, mutate func(*fsp.Execute)) {
	c.t.Helper()
	m := &fsp.Execute{Header: fsp.NewHeader(fsp.TypeExecute, id, time.Now()), Language: lang, Code: code,
		Limits: fsp.Limits{TimeoutMS: 10000, MemoryMB: 256}}
	if mutate != nil {
		mutate(m)
	}
	c.send(m)
}

func (c *client) cancel(id string) {
	c.send(&fsp.Cancel{Header: fsp.NewHeader(fsp.TypeCancel, id, time.Now())})
}

// run is everything the server said about one execution.
type run struct {
	frames   []fsp.Message
	stdout   string
	stderr   string
	statuses []fsp.Status
	result   *fsp.Result
	errors   []*fsp.Error
}

func (r *run) kinds() string {
	var k []string
	for _, f := range r.frames {
		h := f.MessageHeader()
		s := string(h.Type)
		if st, ok := f.(*fsp.StatusUpdate); ok {
			s += ":" + string(st.Status)
		}
		if e, ok := f.(*fsp.Error); ok {
			s += ":" + string(e.Code)
		}
		if len(k) > 0 && (s == "stdout" || s == "stderr") && k[len(k)-1] == s {
			continue // runs of output collapse
		}
		k = append(k, s)
	}
	return strings.Join(k, " ")
}

// collect reads frames of execution id until its result or an error frame that ends it
// (any error but OUTPUT_LIMIT); frames of other executions fail the test.
func (c *client) collect(id string) *run {
	c.t.Helper()
	r := &run{}
	for {
		m := c.recv()
		if got := m.MessageHeader().ID; got != id {
			c.t.Fatalf("frame %T for %q while collecting %q", m, got, id)
		}
		r.add(m)
		switch v := m.(type) {
		case *fsp.Result:
			return r
		case *fsp.Error:
			if v.Code != fsp.CodeOutputLimit {
				return r
			}
		}
	}
}

func (r *run) add(m fsp.Message) {
	r.frames = append(r.frames, m)
	switch v := m.(type) {
	case *fsp.Output:
		if v.Type == fsp.TypeStdout {
			r.stdout += v.Data
		} else {
			r.stderr += v.Data
		}
	case *fsp.StatusUpdate:
		r.statuses = append(r.statuses, v.Status)
	case *fsp.Result:
		r.result = v
	case *fsp.Error:
		r.errors = append(r.errors, v)
	}
}

func (c *client) ping() *fsp.Pong {
	c.t.Helper()
	c.send(&fsp.Ping{Header: fsp.NewHeader(fsp.TypePing, "", time.Now())})
	return expect[*fsp.Pong](c)
}

// requireBwrap skips the test when bubblewrap isolation is not in use, unless the test
// services are required (FATHOM_TEST_REQUIRE_SERVICES), where bwrap must be installed
// (scripts/test-env.sh installs it) and working.
func requireBwrap(t *testing.T, s *testServer) {
	t.Helper()
	if s.srv.Isolation() == IsolationBwrap {
		return
	}
	_, err := exec.LookPath("bwrap")
	if os.Getenv("FATHOM_TEST_REQUIRE_SERVICES") != "" {
		t.Fatalf("bubblewrap isolation required (FATHOM_TEST_REQUIRE_SERVICES set) but the server runs in %s mode (bwrap lookup: %v)", s.srv.Isolation(), err)
	}
	if err != nil {
		t.Skip("bubblewrap not installed (scripts/install-bwrap.sh installs it): the test needs namespaces")
	}
	t.Skip("bubblewrap installed but unusable here (no namespaces): the test server runs with isolation rlimits")
}

// processesWith returns the pids whose command line contains token.
func processesWith(token string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), token) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// waitNoProcesses polls until no process carries token.
func waitNoProcesses(t testing.TB, token string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p := processesWith(token)
		if len(p) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphans: processes %v still carry %s", p, token)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
