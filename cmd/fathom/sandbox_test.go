package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/messages/fsp"
)

// `fathom sandbox` serves FSP v1; SIGTERM stops it and kills the running execution.
func TestSandboxCommand(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(fathomBin, "sandbox", "--listen", "127.0.0.1:0", "--log-level", "warn")
	cmd.Env = cleanEnv("FATHOM_SANDBOX_TOKEN=s3cret")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("sandbox stderr:\n%s", errb.String())
		}
	})
	banner := waitLine(t, out, regexp.MustCompile(`(listening on .*)`))
	m := regexp.MustCompile(`listening on (ws://\S+) \(isolation (\w+)`).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("unexpected banner %q", banner)
	}
	t.Logf("fathom sandbox: %s", banner)
	url := m[1]
	if _, resp, err := websocket.DefaultDialer.Dial(url, http.Header{fsp.HeaderAuthorization: {"Bearer wrong"}}); err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bad token: %v %v", err, resp)
	}
	ws, _, err := websocket.DefaultDialer.Dial(url, http.Header{fsp.HeaderAuthorization: {"Bearer s3cret"}, fsp.HeaderProtocolVersion: {"1"}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer ws.Close()
	token := fmt.Sprintf("fathom-cmd-%d", time.Now().UnixNano())
	code := fmt.Sprintf("import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', %q])\nprint(6*7, flush=True)\ntime.sleep(60)", token)
	b, err := fsp.Encode(&fsp.Execute{Header: fsp.NewHeader(fsp.TypeExecute, "e1", time.Now()), Language: fsp.LangPython, Code: code,
		Limits: fsp.Limits{TimeoutMS: 30000, MemoryMB: 128}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for !strings.Contains(strings.Join(kinds, " "), "stdout:42") {
		_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, frame, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("read after %v: %v", kinds, err)
		}
		msg, err := fsp.Decode(frame)
		if err != nil {
			t.Fatal(err)
		}
		k := string(msg.MessageHeader().Type)
		if o, ok := msg.(*fsp.Output); ok {
			k += ":" + strings.TrimSpace(o.Data)
		}
		kinds = append(kinds, k)
	}
	if got := strings.Join(kinds, " "); got != "ack status stdout:42" {
		t.Fatalf("frames %s", got)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sandbox exited with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("sandbox did not stop within 15s of SIGTERM")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(pidsWith(token)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("execution processes %v survived the sandbox", pidsWith(token))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSandboxCommandNeedsToken(t *testing.T) {
	t.Parallel()
	r := fathom(t, cleanEnv(), "sandbox", "--listen", "127.0.0.1:0")
	if r.code != 2 || !strings.Contains(r.stderr, "--token") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	r = fathom(t, cleanEnv("FATHOM_SANDBOX_MAX_CONCURRENT=lots"), "sandbox", "--token", "t")
	if r.code != 2 || !strings.Contains(r.stderr, "FATHOM_SANDBOX_MAX_CONCURRENT") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
}

// Without bubblewrap, `fathom sandbox` (isolation auto) refuses to start and says how to
// install it; --isolation rlimits is the explicit opt-out.
func TestSandboxCommandWithoutBwrap(t *testing.T) {
	t.Parallel()
	var env []string
	for _, kv := range cleanEnv("FATHOM_SANDBOX_TOKEN=t") {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+t.TempDir()) // no bwrap; interpreters are found by absolute path
	r := fathom(t, env, "sandbox", "--listen", "127.0.0.1:0")
	if r.code == 0 || !strings.Contains(r.stderr, "apt-get install bubblewrap") || !strings.Contains(r.stderr, "--isolation rlimits") {
		t.Fatalf("exit %d, want a failed start with the install hint: %s", r.code, r.stderr)
	}
}

// pidsWith returns the pids whose command line contains token.
func pidsWith(token string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), token) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
