package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// EnvPythonWebsockets names a python3 that can import the websockets library; written
// by scripts/test-env.sh (scripts/install-python-websockets.sh).
const EnvPythonWebsockets = "FATHOM_TEST_PYTHON_WEBSOCKETS"

// pythonWebsockets returns the python3 to run testdata/wsclient.py with. Without the
// variable it tries Debian's python3; under make test (testenv.EnvRequire) a missing
// client fails the test instead of skipping it.
func pythonWebsockets(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(EnvPythonWebsockets); p != "" {
		return p
	}
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import websockets").Run() == nil {
			return p
		}
	}
	if os.Getenv(testenv.EnvRequire) != "" {
		t.Fatalf("python3-websockets is required (%s=1) but %s is not set: scripts/test-env.sh did not install it", testenv.EnvRequire, EnvPythonWebsockets)
	}
	t.Skipf("no python3 with websockets: run scripts/install-python-websockets.sh (make test does)")
	return ""
}

// TestGatewayPythonClient drives the gateway with the websockets library: start and
// follow, drop and resume, bad frames, tokens, a slow consumer.
func TestGatewayPythonClient(t *testing.T) {
	py := pythonWebsockets(t)
	const maxFrame = 4096
	g := startGW(t, gwOpts{delayMS: 60, cfg: func(c *gateway.Config) {
		c.MaxFrameBytes = maxFrame
		c.SendQueue = 8
		c.SlowConsumerTimeout = 200 * time.Millisecond
	}})
	run := func(t *testing.T, out any, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, py, append([]string{"testdata/wsclient.py", args[0], g.wsURL}, args[1:]...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("wsclient.py %s: %v\n%s", args[0], err, stderr.String())
		}
		if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
			t.Fatalf("wsclient.py %s printed %q: %v", args[0], stdout.String(), err)
		}
	}
	type sessionRun struct {
		SessionID    string           `json:"session_id"`
		Events       []map[string]any `json:"events"`
		ResumedAfter uint64           `json:"resumed_after"`
	}

	t.Run("follow", func(t *testing.T) {
		var r sessionRun
		run(t, &r, "follow", token)
		sameEvents(t, r.Events, g.journal(r.SessionID), 0)
	})
	t.Run("disconnect and resume", func(t *testing.T) {
		var r sessionRun
		run(t, &r, "resume", token)
		if r.ResumedAfter != 3 {
			t.Fatalf("resumed after %d", r.ResumedAfter)
		}
		sameEvents(t, r.Events, g.journal(r.SessionID), 0)
	})
	t.Run("bad frames", func(t *testing.T) {
		var r struct {
			Codes       []string `json:"codes"`
			CloseCode   int      `json:"close_code"`
			CloseReason string   `json:"close_reason"`
		}
		g.synthetic("still-here", 1, 10)
		run(t, &r, "bad", token, "4096")
		want := "invalid_argument invalid_argument unknown_op invalid_argument invalid_argument invalid_argument not_found"
		if got := strings.Join(r.Codes, " "); got != want {
			t.Fatalf("codes %s, want %s", got, want)
		}
		if r.CloseCode != 1009 || !strings.Contains(r.CloseReason, "4096") {
			t.Fatalf("oversize frame closed with %d %q", r.CloseCode, r.CloseReason)
		}
	})
	t.Run("tokens", func(t *testing.T) {
		// A subscription needs a session; the read token's viewer reads it through the
		// grain's tenancy check, so it is a real one.
		if status, out := call(t, g.srv, "POST", "/v1/sessions", token, []byte(`{"goal":"write a haiku","session_id":"any"}`)); status != 201 {
			t.Fatalf("start: %d %v", status, out)
		}
		var r map[string]any
		run(t, &r, "auth", token, readToken)
		want := map[string]any{"none": 401.0, "wrong": 401.0, "read_start": "permission_denied", "read_subscribe": "ack",
			"subprotocol": gateway.Subprotocol, "subprotocol_subscribe": "ack"}
		for k, v := range want {
			if r[k] != v {
				t.Fatalf("%s = %v, want %v (all: %v)", k, r[k], v, r)
			}
		}
	})
	t.Run("slow consumer", func(t *testing.T) {
		const n = 600
		g.synthetic("py-slow", n, 16<<10)
		var r struct {
			CloseCode   int      `json:"close_code"`
			CloseReason string   `json:"close_reason"`
			BeforeClose int      `json:"before_close"`
			Seqs        []uint64 `json:"seqs"`
		}
		run(t, &r, "slow", token, "py-slow", "600")
		if r.CloseCode != gateway.CloseSlowConsumer || !strings.Contains(r.CloseReason, "slow consumer") {
			t.Fatalf("closed with %d %q", r.CloseCode, r.CloseReason)
		}
		if r.BeforeClose >= n {
			t.Fatalf("all %d events arrived before the close", n)
		}
		for i, s := range r.Seqs {
			if s != uint64(i+1) {
				t.Fatalf("event %d has seq %d (resumed after %d)", i, s, r.BeforeClose)
			}
		}
		if len(r.Seqs) != n {
			t.Fatalf("%d events, want %d", len(r.Seqs), n)
		}
	})
	testenv.Eventually(t, 10*time.Second, func() bool { return g.h.Connections() == 0 }, "%d connections left open", g.h.Connections())
}

// TestGatewayPythonHumanInTheLoop: the websockets client answers an ask_human (a bad
// answer first gets an error frame) and forks the finished session after its first
// step; the fork runs the second step on its own.
func TestGatewayPythonHumanInTheLoop(t *testing.T) {
	py := pythonWebsockets(t)
	sc, err := mock.ParseScript([]byte(`{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"pick\",\"type\":\"custom\",\"description\":\"pick a colour\"},{\"id\":\"use\",\"type\":\"custom\",\"description\":\"use it\"}]}"},
		{"tool_match":".","response":"{{.Step}}: {{.Tool}}"},
		{"match":"Step: use it","response":"used it #{{.N}}"},
		{"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"ask_human","arguments":"{\"question\":\"Which colour?\",\"options\":[\"red\",\"blue\"]}"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	g := startGW(t, gwOpts{script: &sc})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "testdata/wsclient.py", "human", g.wsURL, token)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("wsclient.py human: %v\n%s", err, stderr.String())
	}
	var r struct {
		SessionID  string           `json:"session_id"`
		Events     []map[string]any `json:"events"`
		BadCode    string           `json:"bad_code"`
		BadMessage string           `json:"bad_message"`
		ForkID     string           `json:"fork_id"`
		ForkEvents []map[string]any `json:"fork_events"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("wsclient.py human printed %q: %v", stdout.String(), err)
	}
	if r.BadCode != "invalid_argument" || !strings.Contains(r.BadMessage, "one of the options") {
		t.Fatalf("bad answer: %s %q", r.BadCode, r.BadMessage)
	}
	sameEvents(t, r.Events, g.journal(r.SessionID), 0)
	sameEvents(t, r.ForkEvents, g.journal(r.ForkID), 0)
	var received, forkedAt map[string]any
	for _, ev := range r.Events {
		if ev["type"] == "hitl_received" {
			received = ev
		}
	}
	if received["input"] != `"blue"` || received["by"] != "human" {
		t.Fatalf("hitl_received %v", received)
	}
	after := 0
	for _, ev := range r.ForkEvents {
		switch {
		case ev["type"] == "session_forked":
			forkedAt = ev
		case forkedAt != nil && (ev["type"] == "hitl_requested" || ev["type"] == "tool_called"):
			t.Fatalf("the fork asked again: %v", ev)
		case forkedAt != nil && ev["type"] == "step_started":
			if ev["step_id"] != "use" {
				t.Fatalf("the fork started %v", ev)
			}
			after++
		}
	}
	if forkedAt["source_session_id"] != r.SessionID || forkedAt["step_index"] != 1.0 || after != 1 {
		t.Fatalf("session_forked %v, %d steps after it", forkedAt, after)
	}
	src, fork := r.Events[len(r.Events)-1], r.ForkEvents[len(r.ForkEvents)-1]
	if src["result"] == fork["result"] || len(g.journal(r.SessionID)) != len(r.Events) {
		t.Fatalf("the fork did not run its own last step (%v, %v) or the source changed", src["result"], fork["result"])
	}
}
