package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// The fault tests: each kills, freezes or pauses one `fathom node` process of a real
// cluster (Consul, PostgreSQL, `fathom mock-llm`) at a chosen point, then checks that
// every session completes on its own (no client request) and that its journal audit is
// clean: seq contiguous, nothing recorded twice by command id, call id or idempotency
// key, no tool run again after its result was recorded. RELIABILITY.md lists them.

// TestKillMidLLMCall: a session runs on node A; its third model call is held in flight
// in front of the mock (the model has not answered) when A is killed with SIGKILL. With
// no client request, node B takes the session over within the lease TTL + 5 s, asks the
// model again, and the session completes with a clean audit.
func TestKillMidLLMCall(t *testing.T) {
	testenv.Faults(t)
	consul := testenv.ConsulAddr(t)
	gate := startLLMGate(t, startMockLLM(t, slowSixSteps(200*time.Millisecond)))
	c := newFaultCluster(t, consul, gate.URL())
	a, b := c.start(), c.start()
	c.awaitViews(a, b)
	prefix := "llm-" + freePort(t)
	id := c.idOn(prefix, a.member, a.member, b.member)
	other := c.idOn(prefix+"-b", b.member, a.member, b.member)
	executorCall := func(body string) bool {
		return strings.Contains(body, "FATHOM-ROLE: executor") && strings.Contains(body, "Goal: heal "+id+`\n`)
	}
	calls := 0
	gate.hold(func(body string) bool {
		if executorCall(body) {
			calls++
		}
		return executorCall(body) && calls == 3
	})
	c.startOn(a, id, a)
	c.startOn(a, other, b)
	select {
	case <-gate.held:
	case <-time.After(30 * time.Second):
		t.Fatalf("session %s made no third model call (executor calls so far: %d)", id, gate.requests(executorCall))
	}
	before := gate.requests(executorCall)
	seq, typ := journalHead(t, c.conn, id)
	killedAt := time.Now()
	c.kill(a)
	gate.unhold() // its caller is gone: the held call never reaches the model
	t.Logf("killed node A with %s's model call in flight (head seq %d, %s)", id, seq, typ)
	c.awaitContinues(id, seq, killedAt, a)
	testenv.Eventually(t, 30*time.Second, func() bool { return gate.requests(executorCall) > before },
		"node B never asked the model again for %s", id)
	c.finish(id, other)
}

// toolSteps is a mock-llm script: a plan of three steps; each step runs a Python program
// in the sandbox that sleeps for sleep, then answers.
func toolSteps(sleep time.Duration) string {
	code := fmt.Sprintf("import time; time.sleep(%g); print(42)", sleep.Seconds())
	return `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[` +
		`{\"id\":\"a\",\"type\":\"custom\",\"description\":\"one\"},{\"id\":\"b\",\"type\":\"custom\",\"description\":\"two\"},` +
		`{\"id\":\"c\",\"type\":\"custom\",\"description\":\"three\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","tool_match":"\"stdout\"|Tool .code_execute. failed","response":"done {{.Step}}"},
		{"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"code_execute","arguments":"{\"language\":\"python\",\"code\":\"` + code + `\"}"}]}]}`
}

// descendantsRunning lists the processes under pid whose command line contains word.
func descendantsRunning(pid int, word string) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after its ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 {
			parent[p], _ = strconv.Atoi(fields[1])
		}
	}
	var out []int
	for p := range parent {
		under := false
		for q, hops := parent[p], 0; q > 1 && hops < 16; q, hops = parent[q], hops+1 {
			if q == pid {
				under = true
				break
			}
		}
		if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); under && err == nil && bytes.Contains(cmdline, []byte(word)) {
			out = append(out, p)
		}
	}
	return out
}

// TestKillMidToolCall: a session runs on node A; while its second step's sandboxed
// code_execute is running (the journal's head is its tool_called and a Python process
// under A runs the program), A is killed with SIGKILL. Node B takes the session over
// within the lease TTL + 5 s with no client request, runs the tool whose result was never
// recorded, and the session completes: no tool is run again after its result.
func TestKillMidToolCall(t *testing.T) {
	testenv.Faults(t)
	consul := testenv.ConsulAddr(t)
	c := newFaultCluster(t, consul, startMockLLM(t, toolSteps(2*time.Second)))
	a, b := c.start(), c.start()
	c.awaitViews(a, b)
	id := c.idOn("tool-"+freePort(t), a.member, a.member, b.member)
	c.startOn(a, id, a)
	var seq uint64
	testenv.Eventually(t, 60*time.Second, func() bool {
		var typ string
		seq, typ = journalHead(t, c.conn, id)
		return typ == "tool_called" && c.countType(id, "tool_result") == 1 && len(descendantsRunning(a.cmd.Process.Pid, "main.py")) > 0
	}, "session %s never ran its second tool call on node A", id)
	killedAt := time.Now()
	c.kill(a)
	t.Logf("killed node A mid-tool-call of %s (head seq %d, tool_called)", id, seq)
	c.awaitContinues(id, seq, killedAt, a)
	c.finish(id)
	if n := c.countType(id, "tool_result"); n != 3 {
		t.Fatalf("session %s recorded %d tool results, want one per step (3)", id, n)
	}
}

// countType counts session id's events of type typ, straight from the journal's tables.
func (c *faultCluster) countType(id, typ string) int {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	if err := c.conn.QueryRow(ctx, `SELECT count(*) FROM fathom_events WHERE stream_id = $1 AND type = $2`, id, typ).Scan(&n); err != nil {
		c.t.Fatalf("count the %s events of %s: %v", typ, id, err)
	}
	return n
}

// TestKillMidAppend: node A reaches PostgreSQL through a proxy that holds the bytes of
// one append of a running session (its step_completed: sent by A, not yet seen by the
// server) while A is killed with SIGKILL. The held append is then delivered (the server
// commits it after its writer died) or dropped (it never happened): either way the
// journal holds the whole append or none of it, node B carries the session on from
// there within the lease TTL + 5 s with no client request, and the audit is clean.
func TestKillMidAppend(t *testing.T) {
	testenv.Faults(t)
	for _, deliver := range []bool{true, false} {
		name := map[bool]string{true: "commit delivered", false: "commit lost"}[deliver]
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) { killMidAppend(t, deliver) })
	}
}

func killMidAppend(t *testing.T, deliver bool) {
	consul := testenv.ConsulAddr(t)
	c := newFaultCluster(t, consul, startMockLLM(t, slowSixSteps(200*time.Millisecond)))
	u, err := url.Parse(c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	pg := startTCPFault(t, u.Host)
	u.Host = pg.Addr()
	a := c.start("--postgres", u.String()) // A alone reaches the journal through the proxy
	b := c.start()
	c.awaitViews(a, b)
	id := c.idOn("append-"+freePort(t), a.member, a.member, b.member)
	steps := 0
	pg.catch(func(chunk []byte) bool {
		if bytes.Contains(chunk, []byte(id)) && bytes.Contains(chunk, []byte("step_completed")) {
			steps++
		}
		return steps == 2 // the second step's completion
	})
	c.startOn(a, id, a)
	select {
	case <-pg.caught:
	case <-time.After(30 * time.Second):
		t.Fatalf("node A appended no second step_completed of %s", id)
	}
	seq, typ := journalHead(t, c.conn, id)
	if typ == "step_completed" && c.countType(id, "step_completed") >= 2 {
		t.Fatalf("the held append of %s is already in the journal (head seq %d)", id, seq)
	}
	killedAt := time.Now()
	c.kill(a)
	pg.decide(deliver)
	if deliver {
		testenv.Eventually(t, 10*time.Second, func() bool { s, _ := journalHead(t, c.conn, id); return s > seq },
			"the delivered append of %s did not commit", id)
	}
	head, headTyp := journalHead(t, c.conn, id)
	switch completed := c.countType(id, "step_completed"); {
	case deliver && completed != 2:
		t.Fatalf("after the delivered append %s has %d step_completed (head seq %d %s), want 2", id, completed, head, headTyp)
	case !deliver && (head != seq || completed != 1):
		t.Fatalf("after the dropped append the head of %s moved from %d to %d (%d step_completed)", id, seq, head, completed)
	}
	t.Logf("killed node A mid-append of %s (head before %d, after %d %s)", id, seq, head, headTyp)
	c.awaitContinues(id, head, killedAt, a)
	c.finish(id)
}

// TestPartitionFrozenViewOneWriter: node A reaches the Consul agent through a proxy that
// stops forwarding (a partition between A and the agent), so A's view of the cluster is
// frozen at {A, B}; node C joins afterwards, and B and C see {A, B, C} (A stays in their
// topology for the pause grace). A session identity hashing moves to C runs there; a
// state query through A places it by A's frozen view on A itself, so two members both
// activate the session. A's activation answers the query from the journal but runs
// nothing while C holds the session's lease (it waits for the lease); were the lease not
// visible, the expected-sequence fence would let only one of them write. C completes the
// session with no further request, and the audit finds nothing recorded twice.
func TestPartitionFrozenViewOneWriter(t *testing.T) {
	testenv.Faults(t)
	consul := testenv.ConsulAddr(t)
	view := startTCPFault(t, consul)
	c := newFaultCluster(t, consul, startMockLLM(t, slowSixSteps(500*time.Millisecond)), "--pause-grace", "2m")
	a := c.start("--consul", view.Addr())
	b := c.start()
	c.awaitViews(a, b)
	view.freeze()
	cc := c.start()
	c.awaitView(b, a, b, cc)
	// C may or may not list A, whose check lapsed before C ever saw it passing.
	testenv.Eventually(t, 30*time.Second, func() bool {
		v := c.view(cc)
		return slices.Contains(v, b.member) && slices.Contains(v, cc.member)
	}, "node C sees %v, want B and C among them", c.view(cc))
	if got := c.view(a); len(got) != 2 {
		t.Fatalf("node A's view is not frozen at {A, B}: %v", got)
	}
	prefix := "split-" + freePort(t)
	var ids []string
	for i := 0; len(ids) < 2 && i < 1000; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if rendezvousOwner(t, id, a.member, b.member, cc.member) == cc.member && rendezvousOwner(t, id, a.member, b.member) == a.member {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		c.startOn(b, id, cc)
		testenv.Eventually(t, 30*time.Second, func() bool { seq, _ := journalHead(t, c.conn, id); return seq >= 4 }, "session %s did not get going on C", id)
		if code, body := httpJSON(t, "GET", a.url+"/v1/sessions/"+id, faultToken, nil); code != 200 || body["host"] != a.member {
			t.Fatalf("state of %s through A: %d %v (want a second activation on A)", id, code, body)
		}
	}
	c.finish(ids...)
	if logs := a.stderr.String(); strings.Count(logs, "session activated while another member still hosts it: waiting for its lease") < len(ids) {
		t.Fatalf("node A's second activations did not wait for C's lease:\n%s", logs)
	}
}

// TestPauseLongerThanGrace: nodes A and B run sessions (--pause-grace 3s); A is paused
// (SIGSTOP) for four times the grace, so B drops it. Meanwhile clients keep starting
// sessions through B and never get an internal error, and A's sessions continue on B
// with no client request. When A resumes it knows it was dropped: it never answers a
// client with an internal error, reports not ready while it cannot place grains, rejoins
// the cluster and serves again (a session placed on it runs there). Every session
// completes with a clean journal audit.
func TestPauseLongerThanGrace(t *testing.T) {
	testenv.Faults(t)
	consul := testenv.ConsulAddr(t)
	const grace = 3 * time.Second
	c := newFaultCluster(t, consul, startMockLLM(t, slowSixSteps(500*time.Millisecond)), "--pause-grace", grace.String())
	a, b := c.start(), c.start()
	c.awaitViews(a, b)
	prefix := "away-" + freePort(t)
	onA := []string{c.idOn(prefix+"-a", a.member, a.member, b.member), c.idOn(prefix+"-aa", a.member, a.member, b.member)}
	ids := append([]string{c.idOn(prefix+"-b", b.member, a.member, b.member)}, onA...)
	c.startOn(b, ids[0], b)
	for _, id := range onA {
		c.startOn(b, id, a)
	}

	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	heads := map[string]uint64{}
	for _, id := range onA {
		heads[id], _ = journalHead(t, c.conn, id)
	}
	tick := time.NewTicker(time.Second) // paces the clients' starts
	defer tick.Stop()
	for i := 0; time.Since(pausedAt) < 4*grace; i++ {
		id := fmt.Sprintf("%s-during-%d", prefix, i)
		code, body := httpJSON(t, "POST", b.url+"/v1/sessions", faultToken, map[string]any{"goal": "heal " + id, "session_id": id, "command_id": "c1"})
		if code >= 500 && code != 503 && code != 504 {
			t.Fatalf("start %s through B while A is paused: %d %v", id, code, body)
		}
		if code == 201 {
			ids = append(ids, id)
		}
		<-tick.C
	}
	for _, id := range onA { // moved while A was still away
		testenv.Eventually(t, faultLeaseTTL+5*time.Second, func() bool {
			head, typ := journalHead(t, c.conn, id)
			return head > heads[id] && (leaseOwner(t, c.conn, id) == b.member || typ == "session_completed")
		}, "session %s of the paused node did not continue on B (head %d, lease %q)", id, heads[id], leaseOwner(t, c.conn, id))
	}
	resume()
	t.Logf("resumed node A after %s", time.Since(pausedAt).Round(time.Millisecond))

	// Back, A answers no client with an internal error and says it is not ready until it
	// can place grains again; then a session placed on it runs there.
	var after []string
	sawNotReady := false
	var lastStart time.Time
	testenv.Eventually(t, 60*time.Second, func() bool {
		ready := httpStatus(t, a.url+"/readyz") == 200
		sawNotReady = sawNotReady || !ready
		if time.Since(lastStart) < 250*time.Millisecond { // paces the clients' starts
			return false
		}
		lastStart = time.Now()
		id := c.idOn(fmt.Sprintf("%s-after-%d", prefix, len(after)), a.member, a.member, b.member)
		code, body := httpJSON(t, "POST", a.url+"/v1/sessions", faultToken, map[string]any{"goal": "heal " + id, "session_id": id, "command_id": "c1"})
		if code >= 500 && code != 503 && code != 504 {
			t.Fatalf("start %s through A after it resumed (ready: %v): %d %v", id, ready, code, body)
		}
		if code != 201 {
			return false
		}
		after = append(after, id)
		testenv.Eventually(t, 10*time.Second, func() bool { return leaseOwner(t, c.conn, id) != "" }, "session %s holds no lease", id)
		return ready && leaseOwner(t, c.conn, id) == a.member
	}, "node A did not serve again after its pause")
	if !sawNotReady {
		t.Fatalf("node A reported ready at every look after its pause, before it rejoined")
	}
	c.awaitViews(a, b)
	c.finish(append(ids, after...)...)
}

// httpStatus is the status code of GET url.
func httpStatus(t *testing.T, url string) int {
	t.Helper()
	code, _ := httpJSON(t, "GET", url, "", nil)
	return code
}
