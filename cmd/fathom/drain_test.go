package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// countingToolSteps is a mock-llm script: a plan of two steps; each step runs a Python
// program in the sandbox that appends a line to counter (one line per execution), sleeps
// for sleep, then answers.
func countingToolSteps(t *testing.T, counter string, sleep time.Duration) string {
	t.Helper()
	code := fmt.Sprintf("import time\nwith open(%q, 'a') as f: f.write('ran\\n')\ntime.sleep(%g)\nprint(42)", counter, sleep.Seconds())
	args, err := json.Marshal(map[string]string{"language": "python", "code": code})
	if err != nil {
		t.Fatal(err)
	}
	script := map[string]any{"rules": []map[string]any{
		{"system_match": "FATHOM-ROLE: orchestrator",
			"response": `{"steps":[{"id":"a","type":"custom","description":"one"},{"id":"b","type":"custom","description":"two"}]}`},
		{"system_match": "FATHOM-ROLE: executor", "tool_match": `"stdout"|Tool .code_execute. failed`, "response": "done {{.Step}}"},
		{"system_match": "FATHOM-ROLE: executor", "tool_calls": []map[string]string{{"name": "code_execute", "arguments": string(args)}}},
	}}
	b, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// executions counts the lines of the counter file: the tool's executions.
func executions(t *testing.T, counter string) int {
	t.Helper()
	b, err := os.ReadFile(counter)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("ran\n"))
}

// sandboxWritable makes an empty file the sandbox's programs may append to (they run
// under uids of their own) and returns its path.
func sandboxWritable(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fathom-drain-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{dir: 0o777, path: 0o666} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// drainCluster starts two nodes (sandbox without namespaces, so the tool's program can
// count its executions in a file of the test's) and a session on the first whose first
// tool call is running; it returns the cluster, the nodes, the session and the counter.
func drainCluster(t *testing.T) (c *faultCluster, a, b *nodeProc, id, counter string) {
	t.Helper()
	consul := testenv.ConsulAddr(t)
	counter = sandboxWritable(t, "executions")
	c = newFaultCluster(t, consul, startMockLLM(t, countingToolSteps(t, counter, 3*time.Second)), "--read-token", "r")
	c.env = append(c.env, "FATHOM_SANDBOX_ISOLATION=rlimits")
	a, b = c.start(), c.start()
	c.awaitViews(a, b)
	id = c.idOn("drain-"+freePort(t), a.member, a.member, b.member)
	c.startOn(a, id, a)
	testenv.Eventually(t, 60*time.Second, func() bool {
		_, typ := journalHead(t, c.conn, id)
		return typ == "tool_called" && executions(t, counter) == 1
	}, "session %s never ran its first tool call on node A", id)
	return c, a, b, id, counter
}

// checkRanOnce: the session completed with a clean audit (no event lost or recorded
// twice), each of its two tool calls ran exactly once and has one result.
func checkRanOnce(t *testing.T, c *faultCluster, id, counter string) {
	t.Helper()
	c.finish(id)
	if n := executions(t, counter); n != 2 {
		t.Errorf("the tool ran %d times for two tool calls, want once each: the hand-over cut a running call (it ran again, or its execution was lost)", n)
	}
	for _, typ := range []string{"tool_called", "tool_result"} {
		if n := c.countType(id, typ); n != 2 {
			t.Errorf("session %s recorded %d %s events, want 2", id, n, typ)
		}
	}
}

// TestDrainFinishesToolCallAcrossNodes: a session runs on node A with a slow tool call in
// flight. A read-only credential may not drain (403). `fathom node drain --addr A` then
// returns once A drained: the running call finished on A and its result is journaled
// once, A's /readyz says it is draining, and node B continues the session to its end:
// the tool ran once per call, no event lost or duplicated.
func TestDrainFinishesToolCallAcrossNodes(t *testing.T) {
	testenv.Faults(t)
	c, a, _, id, counter := drainCluster(t)
	if code, body := httpJSON(t, "POST", a.url+"/v1/node/drain", "r", nil); code != 403 {
		t.Fatalf("drain with a read-only token: %d %v, want 403", code, body)
	}
	r := fathom(t, cleanEnv(), "node", "drain", "--addr", a.url, "--token", faultToken)
	if r.code != 0 || !strings.Contains(r.stdout, "drained") {
		t.Fatalf("fathom node drain: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("%s", strings.TrimSpace(r.stdout))
	if n := c.countType(id, "tool_result"); n != 1 {
		t.Errorf("after the drain session %s has %d tool results, want the first call's (1)", id, n)
	}
	code, body := httpJSON(t, "GET", a.url+"/readyz", "", nil)
	if code != 503 || !strings.Contains(fmt.Sprint(body["error"]), "draining") {
		t.Fatalf("GET /readyz of the drained node: %d %v, want 503 draining", code, body)
	}
	checkRanOnce(t, c, id, counter)
}

// TestSIGTERMDrainsAcrossNodes: as TestDrainFinishesToolCallAcrossNodes, with SIGTERM
// instead of the drain command: the node lets the running tool call finish (within its
// --shutdown-timeout) before it hands the session over, so B does not run it again.
func TestSIGTERMDrainsAcrossNodes(t *testing.T) {
	testenv.Faults(t)
	c, a, _, id, counter := drainCluster(t)
	a.stop(t)
	if n := c.countType(id, "tool_result"); n < 1 {
		t.Errorf("node A stopped without recording the result of its running tool call")
	}
	checkRanOnce(t, c, id, counter)
}

// TestDrainTimeoutUsage: a negative --drain-timeout, an unparsable FATHOM_DRAIN_TIMEOUT
// and a bad drain_timeout in the configuration file are usage errors (exit 2) naming
// the setting; the flag overrides a bad environment value.
func TestDrainTimeoutUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("drain_timeout: soon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{cleanEnv(), []string{"--drain-timeout", "-1s"}, "--drain-timeout -1s must not be negative"},
		{cleanEnv("FATHOM_DRAIN_TIMEOUT=soon"), nil, "FATHOM_DRAIN_TIMEOUT"},
		{cleanEnv(), []string{"--config", bad}, "bad.yaml:1: drain_timeout"},
		{cleanEnv("FATHOM_DRAIN_TIMEOUT=soon"), []string{"--drain-timeout", "1s", "--max-tool-result-bytes", "5"}, "--max-tool-result-bytes 5"},
	} {
		r := fathom(t, c.env, append(append([]string{"run", "--data-dir", filepath.Join(dir, "refused")}, c.args...), "hi")...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("run %v (env %s): exit %d, want 2 naming %q\n%s", c.args, c.env[len(c.env)-1], r.code, c.want, r.stderr)
		}
	}
}

// TestJoinFinishesRunningToolCall: a session runs a slow sandboxed tool call on node A
// when node C joins and the session's identity now hashes to C. A's activation is told
// to stop (Proto.Actor's identity hashing poisons it) but lets the running call finish
// and records its result, then hands the session to C, which runs the second call: the
// tool ran once per call, nothing recorded twice, although a client kept asking C for
// the session all along (C's early activation waits for A's lease).
func TestJoinFinishesRunningToolCall(t *testing.T) {
	testenv.Faults(t)
	consul := testenv.ConsulAddr(t)
	counter := sandboxWritable(t, "executions")
	c := newFaultCluster(t, consul, startMockLLM(t, countingToolSteps(t, counter, 3*time.Second)))
	c.env = append(c.env, "FATHOM_SANDBOX_ISOLATION=rlimits")
	a, b := c.start(), c.start()
	c.awaitViews(a, b)
	port := freePort(t)
	joiner := "127.0.0.1:" + port
	var id string
	for i := 0; i < 1000 && id == ""; i++ {
		cand := fmt.Sprintf("join-%s-%d", port, i)
		if rendezvousOwner(t, cand, a.member, b.member) == a.member && rendezvousOwner(t, cand, a.member, b.member, joiner) == joiner {
			id = cand
		}
	}
	if id == "" {
		t.Fatalf("no session id hashes to A among A and B and to %s once it joins", joiner)
	}
	c.startOn(a, id, a)
	testenv.Eventually(t, 60*time.Second, func() bool {
		_, typ := journalHead(t, c.conn, id)
		return typ == "tool_called" && executions(t, counter) == 1
	}, "session %s never ran its first tool call on node A", id)
	j := c.start("--cluster-port", port)
	if j.member != joiner {
		t.Fatalf("node C is member %s, want %s", j.member, joiner)
	}
	// A client watching the session asks C for it meanwhile: C's activation waits until
	// A let go of the session instead of running A's call again (503 until then).
	codes := map[int]int{}
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, _ := httpJSON(t, "GET", j.url+"/v1/sessions/"+id, faultToken, nil)
		codes[code]++
		return leaseOwner(t, c.conn, id) == j.member
	}, "session %s did not move to node C (lease: %q)", id, leaseOwner(t, c.conn, id))
	t.Logf("GET /v1/sessions/%s on node C while the session moved: %v (status: count)", id, codes)
	checkRanOnce(t, c, id, counter)
}
