package sandboxd

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages/fsp"
)

// The spec's "Successful Execution" diagram: ack, running, stdout/stderr, completed,
// result with exit code, duration and resource usage.
func TestSandboxSuccessfulExecution(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.dial(t)
	c.execute("ok1", fsp.LangPython, "import sys\nprint('hello world')\nprint('line2')\nprint('oops', file=sys.stderr)\n", nil)
	r := c.collect("ok1")
	if r.stdout != "hello world\nline2\n" || r.stderr != "oops\n" {
		t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	first := r.frames[:2]
	if _, ok := first[0].(*fsp.Ack); !ok {
		t.Fatalf("first frame %T, want ack (%s)", first[0], r.kinds())
	}
	if st, ok := first[1].(*fsp.StatusUpdate); !ok || st.Status != fsp.StatusRunning {
		t.Fatalf("second frame %+v, want status running (%s)", first[1], r.kinds())
	}
	n := len(r.frames)
	if st, ok := r.frames[n-2].(*fsp.StatusUpdate); !ok || st.Status != fsp.StatusCompleted {
		t.Fatalf("frames %s: want status completed before result", r.kinds())
	}
	res := r.result
	if res.ExitCode == nil || *res.ExitCode != 0 || res.ResourceUsage == nil || res.ResourceUsage.PeakMemoryMB < 1 {
		t.Fatalf("result %+v usage %+v", res, res.ResourceUsage)
	}
	if res.DurationMS < 0 || res.DurationMS > 10000 {
		t.Fatalf("duration %d", res.DurationMS)
	}
	t.Logf("frames: %s; duration %d ms, usage %+v", r.kinds(), res.DurationMS, *res.ResourceUsage)
}

func TestSandboxLanguages(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.dial(t)
	for _, tc := range []struct {
		lang fsp.Language
		code string
		want string
	}{
		{fsp.LangPython, "print(6*7)", "42\n"},
		{fsp.LangJavaScript, "console.log(6*7)", "42\n"},
		{fsp.LangShell, "echo $((6*7))", "42\n"},
	} {
		c.execute("lang-"+string(tc.lang), tc.lang, tc.code, nil)
		r := c.collect("lang-" + string(tc.lang))
		if r.stdout != tc.want || r.result == nil || *r.result.ExitCode != 0 {
			t.Errorf("%s: frames %s stdout %q stderr %q", tc.lang, r.kinds(), r.stdout, r.stderr)
		}
	}
	// Request Rejected: an error, no ack.
	c.execute("rust", "rust", "fn main() {}", nil)
	e := expect[*fsp.Error](c)
	if e.ID != "rust" || e.Code != fsp.CodeLanguageNotSupported || e.Retryable {
		t.Fatalf("error %+v", e)
	}
	c.execute("ex", fsp.LangElixir, `IO.puts("hi")`, nil)
	if _, ok := s.srv.runtimes[fsp.LangElixir]; ok {
		if r := c.collect("ex"); r.stdout != "hi\n" {
			t.Fatalf("elixir: %s %q %q", r.kinds(), r.stdout, r.stderr)
		}
	} else if e := expect[*fsp.Error](c); e.Code != fsp.CodeLanguageNotSupported {
		t.Fatalf("elixir absent: error %+v", e)
	}
}

func TestSandboxStdinEnvExitCodes(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.dial(t)
	in := "line one\nline two\n"
	c.execute("stdin", fsp.LangPython, "import sys\nprint(sys.stdin.read().upper(), end='')", func(m *fsp.Execute) { m.Stdin = &in })
	if r := c.collect("stdin"); r.stdout != strings.ToUpper(in) {
		t.Fatalf("stdin: %q", r.stdout)
	}
	// No stdin: reading gets EOF at once.
	c.execute("nostdin", fsp.LangShell, "cat; echo done", nil)
	if r := c.collect("nostdin"); r.stdout != "done\n" {
		t.Fatalf("no stdin: %q", r.stdout)
	}
	t.Setenv("FATHOM_SERVER_SECRET", "leak")
	c.execute("env", fsp.LangShell, `echo "$GREETING|$FATHOM_SERVER_SECRET|$PYTHONUNBUFFERED"`, func(m *fsp.Execute) {
		m.Env = map[string]string{"GREETING": "hi there"}
	})
	if r := c.collect("env"); r.stdout != "hi there||1\n" {
		t.Fatalf("env: %q", r.stdout)
	}
	c.execute("exit3", fsp.LangPython, "import sys; sys.exit(3)", nil)
	r := c.collect("exit3")
	if r.statuses[len(r.statuses)-1] != fsp.StatusCompleted || r.result.ExitCode == nil || *r.result.ExitCode != 3 {
		t.Fatalf("exit 3: %s %+v", r.kinds(), r.result)
	}
	c.execute("segv", fsp.LangShell, "kill -SEGV $$", nil)
	r = c.collect("segv")
	if r.statuses[len(r.statuses)-1] != fsp.StatusFailed || r.result.ExitCode != nil {
		t.Fatalf("signal: %s exit %v", r.kinds(), r.result.ExitCode)
	}
}

// Output is streamed as produced, not buffered to the end.
func TestSandboxStreaming(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.dial(t)
	c.execute("stream", fsp.LangPython, "import time\nprint('first')\ntime.sleep(0.6)\nprint('second')", nil)
	var firstAt time.Time
	r := &run{}
	for r.result == nil {
		m := c.recv()
		r.add(m)
		if o, ok := m.(*fsp.Output); ok && strings.Contains(o.Data, "first") && firstAt.IsZero() {
			firstAt = time.Now()
		}
	}
	if firstAt.IsZero() || time.Since(firstAt) < 400*time.Millisecond || r.stdout != "first\nsecond\n" {
		t.Fatalf("first output %v before the end; stdout %q", time.Since(firstAt), r.stdout)
	}
	// Multi-byte output split across chunks reassembles exactly.
	c.execute("utf8", fsp.LangPython, "print('é€😀' * 40000)", func(m *fsp.Execute) { m.Limits.MaxOutputBytes = 2 << 20 })
	if r := c.collect("utf8"); r.stdout != strings.Repeat("é€😀", 40000)+"\n" {
		t.Fatalf("utf-8 output mangled: %d bytes, frames %s", len(r.stdout), r.kinds())
	}
}

// The spec's "Execution Timeout" diagram, and no process left behind.
func TestSandboxTimeout(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.dial(t)
	token := fmt.Sprintf("fathom-timeout-%d", time.Now().UnixNano())
	code := fmt.Sprintf("import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', %q])\nprint('started')\nwhile True: pass", token)
	start := time.Now()
	c.execute("slow", fsp.LangPython, code, func(m *fsp.Execute) { m.Limits.TimeoutMS = 1500 })
	r := c.collect("slow")
	if got := r.kinds(); got != "ack status:running stdout status:timeout result" {
		t.Fatalf("frames %s, stderr %q", got, r.stderr)
	}
	if r.result.ExitCode != nil || r.result.DurationMS < 1500 || time.Since(start) > 5*time.Second {
		t.Fatalf("result %+v after %v", r.result, time.Since(start))
	}
	waitNoProcesses(t, token)
}

// The spec's "Client-Initiated Cancel" diagram; unknown cancel; cancel of a queued
// execution.
func TestSandboxCancel(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.MaxConcurrent = 1 })
	c := s.dial(t)
	token := fmt.Sprintf("fathom-cancel-%d", time.Now().UnixNano())
	c.execute("c1", fsp.LangShell, fmt.Sprintf("python3 -c 'import time; time.sleep(60)' %s &\necho started\nwait", token), nil)
	expect[*fsp.Ack](c)
	if st := expect[*fsp.StatusUpdate](c); st.Status != fsp.StatusRunning {
		t.Fatalf("status %s", st.Status)
	}
	if o := expect[*fsp.Output](c); o.Data != "started\n" {
		t.Fatalf("output %q", o.Data)
	}
	// A second execution waits for the only slot; cancelling it never runs it.
	c.execute("c2", fsp.LangShell, "echo never", nil)
	expect[*fsp.Ack](c)
	if p := c.ping(); p.Load == nil || p.Load.ActiveExecutions != 1 || p.Load.QueueDepth != 1 {
		t.Fatalf("pong load %+v", p.Load)
	}
	c.cancel("c2")
	r := c.collect("c2")
	if got := r.kinds(); got != "status:cancelled result" || r.result.ExitCode != nil {
		t.Fatalf("queued cancel: %s", got)
	}
	c.cancel("c1")
	r = c.collect("c1")
	if got := r.kinds(); got != "status:cancelled result" || r.result.ExitCode != nil {
		t.Fatalf("cancel: %s", got)
	}
	waitNoProcesses(t, token)
	c.cancel("c1")
	if e := expect[*fsp.Error](c); e.Code != fsp.CodeUnknownExecution || e.ID != "c1" || e.Retryable {
		t.Fatalf("unknown cancel: %+v", e)
	}
	if p := c.ping(); p.Load.ActiveExecutions != 0 || p.Load.QueueDepth != 0 {
		t.Fatalf("load after: %+v", p.Load)
	}
}

// A dropped connection kills its executions (no orphans) and other connections go on.
func TestSandboxDisconnectKills(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.dial(t)
	token := fmt.Sprintf("fathom-disconnect-%d", time.Now().UnixNano())
	c.execute("d1", fsp.LangPython, fmt.Sprintf("import subprocess, sys, time, os\nsubprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(60)', %q])\nprint('started', flush=True)\ntime.sleep(60)", token), nil)
	expect[*fsp.Ack](c)
	expect[*fsp.StatusUpdate](c)
	expect[*fsp.Output](c)
	// The child shows in /proc once it has exec'd, which a loaded machine may put after
	// the parent's first output.
	testenv.Eventually(t, 10*time.Second, func() bool { return len(processesWith(token)) > 0 }, "the child is not running")
	c.ws.Close()
	waitNoProcesses(t, token)
	c2 := s.dial(t)
	deadline := time.Now().Add(5 * time.Second)
	for p := c2.ping(); p.Load.ActiveExecutions != 0; p = c2.ping() {
		if time.Now().After(deadline) {
			t.Fatalf("load %+v after disconnect", p.Load)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSandboxMemoryBlowUp(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.dial(t)
	c.execute("oom", fsp.LangPython, "chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))", func(m *fsp.Execute) { m.Limits.MemoryMB = 64 })
	r := c.collect("oom")
	if got := r.kinds(); !strings.HasSuffix(got, "status:oom result") {
		t.Fatalf("frames %s stderr %q", got, r.stderr)
	}
	if u := r.result.ResourceUsage; u == nil || u.PeakMemoryMB > 80 {
		t.Fatalf("peak memory %+v above the 64 MB limit", u)
	}
	c.execute("oomjs", fsp.LangJavaScript, "const a = []; for (;;) a.push(new Array(1e6).fill(1))", func(m *fsp.Execute) { m.Limits.MemoryMB = 128 })
	if r := c.collect("oomjs"); !strings.HasSuffix(r.kinds(), "status:oom result") {
		t.Fatalf("node: frames %s stderr %.300q", r.kinds(), r.stderr)
	}
}

func TestSandboxOutputFlood(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.dial(t)
	c.execute("flood", fsp.LangPython, "while True: print('x' * 1000)", func(m *fsp.Execute) { m.Limits.MaxOutputBytes = 50000 })
	r := c.collect("flood")
	if got := r.kinds(); got != "ack status:running stdout error:OUTPUT_LIMIT status:failed result" {
		t.Fatalf("frames %s", got)
	}
	if n := len(r.stdout) + len(r.stderr); n != 50000 {
		t.Fatalf("%d output bytes forwarded, want exactly the 50000 limit", n)
	}
	if r.errors[0].Retryable {
		t.Fatal("OUTPUT_LIMIT retryable")
	}
}

func TestSandboxOverload(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.MaxConcurrent, c.MaxQueued = 1, 1 })
	c := s.dial(t)
	c.execute("o1", fsp.LangShell, "echo up; sleep 30", nil)
	expect[*fsp.Ack](c)
	expect[*fsp.StatusUpdate](c)
	expect[*fsp.Output](c)
	c.execute("o2", fsp.LangShell, "sleep 30", nil)
	expect[*fsp.Ack](c)
	c.execute("o3", fsp.LangShell, "echo no", nil)
	e := expect[*fsp.Error](c)
	if e.ID != "o3" || e.Code != fsp.CodeSandboxOverloaded || !e.Retryable {
		t.Fatalf("overload: %+v", e)
	}
	// The bound is server-wide: another connection is refused too.
	c2 := s.dial(t)
	c2.execute("o4", fsp.LangShell, "echo no", nil)
	if e := expect[*fsp.Error](c2); e.Code != fsp.CodeSandboxOverloaded {
		t.Fatalf("second connection: %+v", e)
	}
	c.cancel("o1")
	c.cancel("o2")
}

func TestSandboxUpgradeRefused(t *testing.T) {
	s := newTestServer(t, nil)
	for _, tc := range []struct {
		name   string
		header http.Header
		status int
	}{
		{"no token", http.Header{}, http.StatusUnauthorized},
		{"bad token", http.Header{fsp.HeaderAuthorization: {"Bearer nope"}}, http.StatusUnauthorized},
		{"basic auth", http.Header{fsp.HeaderAuthorization: {"Basic " + testToken}}, http.StatusUnauthorized},
		{"version 2", http.Header{fsp.HeaderAuthorization: {"Bearer " + testToken}, fsp.HeaderProtocolVersion: {"2"}}, http.StatusBadRequest},
		{"version garbage", http.Header{fsp.HeaderAuthorization: {"Bearer " + testToken}, fsp.HeaderProtocolVersion: {"v1"}}, http.StatusBadRequest},
	} {
		ws, resp, err := websocket.DefaultDialer.Dial(s.url, tc.header)
		if err == nil {
			ws.Close()
			t.Fatalf("%s: upgrade succeeded", tc.name)
		}
		if resp == nil || resp.StatusCode != tc.status {
			t.Fatalf("%s: response %v, want %d", tc.name, resp, tc.status)
		}
	}
	for _, v := range []string{"", "1", "2, 1"} {
		h := http.Header{fsp.HeaderAuthorization: {"Bearer " + testToken}}
		if v != "" {
			h.Set(fsp.HeaderProtocolVersion, v)
		}
		ws, _, err := websocket.DefaultDialer.Dial(s.url, h)
		if err != nil {
			t.Fatalf("version %q refused: %v", v, err)
		}
		ws.Close()
	}
}

// Malformed input is answered INVALID_REQUEST and the connection stays usable.
func TestSandboxMalformedFrames(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.MaxCodeBytes = 1000 })
	c := s.dial(t)
	const ts = `"ts":"2025-12-27T11:30:00.000Z"`
	for _, tc := range []struct{ frame, id string }{
		{`not json`, ""},
		{`{}`, ""},
		{`[1,2]`, ""},
		{`{"v":2,"type":"ping",` + ts + `}`, ""},
		{`{"v":1,"type":"explode","id":"x1",` + ts + `}`, "x1"},
		{`{"v":1,"type":"execute","id":"x2",` + ts + `,"language":"python","code":"print(1)"}`, "x2"},
		{`{"v":1,"type":"execute","id":"x3",` + ts + `,"language":"python","code":"print(1)","limits":{"timeout_ms":"soon","memory_mb":1}}`, "x3"},
		{`{"v":1,"type":"execute","id":"x4",` + ts + `,"language":"python","code":"print(1)","limits":{"timeout_ms":999999999,"memory_mb":1}}`, "x4"},
		{`{"v":1,"type":"execute","id":"x5",` + ts + `,"language":"python","code":"print(1)","limits":{"timeout_ms":1000,"memory_mb":99999}}`, "x5"},
		{`{"v":1,"type":"execute","id":"x6",` + ts + `,"language":"python","code":"` + strings.Repeat("#", 2000) + `","limits":{"timeout_ms":1000,"memory_mb":64}}`, "x6"},
		{`{"v":1,"type":"ack","id":"x7",` + ts + `}`, "x7"},
		{`{"v":1,"type":"cancel",` + ts + `}`, ""},
	} {
		c.sendRaw(tc.frame)
		e := expect[*fsp.Error](c)
		if e.Code != fsp.CodeInvalidRequest || e.ID != tc.id || e.Retryable {
			t.Fatalf("frame %.80s: error %+v, want INVALID_REQUEST for %q", tc.frame, e, tc.id)
		}
	}
	if err := c.ws.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if e := expect[*fsp.Error](c); e.Code != fsp.CodeInvalidRequest {
		t.Fatalf("binary frame: %+v", e)
	}
	// Duplicate id while in progress.
	c.execute("dup", fsp.LangShell, "sleep 30", nil)
	expect[*fsp.Ack](c)
	c.execute("dup", fsp.LangShell, "echo twice", nil)
	for {
		m := c.recv()
		if e, ok := m.(*fsp.Error); ok {
			if e.Code != fsp.CodeInvalidRequest || e.ID != "dup" {
				t.Fatalf("duplicate id: %+v", e)
			}
			break
		}
		if st, ok := m.(*fsp.StatusUpdate); !ok || st.Status != fsp.StatusRunning {
			t.Fatalf("unexpected %T %+v", m, m)
		}
	}
	c.cancel("dup")
	c.collect("dup")
	// Still usable.
	c.ping()
	c.execute("after", fsp.LangPython, "print('still here')", nil)
	if r := c.collect("after"); r.stdout != "still here\n" {
		t.Fatalf("after malformed frames: %s", r.kinds())
	}
}

// The spec's "Infrastructure Error" diagram: an execution that cannot run after its ack
// ends with INTERNAL_ERROR (retryable) and no result.
func TestSandboxInternalError(t *testing.T) {
	s := newTestServer(t, nil)
	s.srv.iso.helper = "/nonexistent/fathom-helper"
	s.srv.iso.bwrap = "/nonexistent/bwrap"
	c := s.dial(t)
	c.execute("ie", fsp.LangPython, "print(1)", nil)
	r := c.collect("ie")
	if got := r.kinds(); got != "ack error:INTERNAL_ERROR" || !r.errors[0].Retryable {
		t.Fatalf("frames %s", got)
	}
	c.ping()
}

// Close (the server shutting down) kills running executions and closes connections.
func TestSandboxShutdown(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.dial(t)
	token := fmt.Sprintf("fathom-shutdown-%d", time.Now().UnixNano())
	c.execute("sd", fsp.LangShell, fmt.Sprintf("python3 -c 'import time; time.sleep(60)' %s &\necho started\nwait", token), nil)
	expect[*fsp.Ack](c)
	expect[*fsp.StatusUpdate](c)
	expect[*fsp.Output](c)
	ctx, cancel := contextWithTimeout(5 * time.Second)
	defer cancel()
	if err := s.srv.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitNoProcesses(t, token)
	_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, _, err := c.ws.ReadMessage(); err != nil {
			break
		}
	}
	if _, _, err := websocket.DefaultDialer.Dial(s.url, authHeader()); err == nil {
		t.Fatal("a closed sandbox accepted a connection")
	}
	_ = os.Stderr
}

// Several executions on one connection: their frames interleave, and each execution's
// frames keep the spec's order.
func TestSandboxMultiplexed(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.dial(t)
	const n = 5
	for i := range n {
		c.execute(fmt.Sprintf("m%d", i), fsp.LangPython, fmt.Sprintf("import time\nfor j in range(3):\n    print(%d, j, flush=True)\n    time.sleep(0.05)", i), nil)
	}
	runs := map[string]*run{}
	for done := 0; done < n; {
		m := c.recv()
		id := m.MessageHeader().ID
		if runs[id] == nil {
			runs[id] = &run{}
		}
		runs[id].add(m)
		if _, ok := m.(*fsp.Result); ok {
			done++
		}
	}
	for i := range n {
		r := runs[fmt.Sprintf("m%d", i)]
		want := fmt.Sprintf("%d 0\n%d 1\n%d 2\n", i, i, i)
		if r == nil || r.kinds() != "ack status:running stdout status:completed result" || r.stdout != want {
			t.Fatalf("m%d: %+v", i, r)
		}
	}
}
