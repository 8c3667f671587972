package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// soakConfig sizes TestSoak. The defaults are the short variant `make test-faults` runs; `make
// soak` sets the FATHOM_SOAK_* variables to the full one.
type soakConfig struct {
	sessions   int           // sessions to start in all (FATHOM_SOAK_SESSIONS)
	kills      int           // kill -9s of a random node mid-step (FATHOM_SOAK_KILLS)
	running    int           // sessions kept running at once while killing (FATHOM_SOAK_RUNNING)
	limit      time.Duration // the whole soak's bound (FATHOM_SOAK_TIMEOUT)
	leaseTTL   time.Duration // the nodes' --lease-ttl (FATHOM_SOAK_LEASE_TTL)
	checkTTL   time.Duration // the nodes' --consul-check-ttl (FATHOM_SOAK_CONSUL_CHECK_TTL)
	latency    time.Duration // the model's latency per answer
	nodes      int
	summaryOut string // a file the summary is also written to (FATHOM_SOAK_OUT)
}

func soakConfigFromEnv(t *testing.T) soakConfig {
	t.Helper()
	c := soakConfig{sessions: 10, kills: 5, running: 6, limit: 3 * time.Minute, leaseTTL: 5 * time.Second, checkTTL: 2 * time.Second,
		latency: 200 * time.Millisecond, nodes: 3, summaryOut: os.Getenv("FATHOM_SOAK_OUT")}
	for name, p := range map[string]*int{"FATHOM_SOAK_SESSIONS": &c.sessions, "FATHOM_SOAK_KILLS": &c.kills, "FATHOM_SOAK_RUNNING": &c.running} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive integer", name, v)
			}
			*p = n
		}
	}
	for name, p := range map[string]*time.Duration{"FATHOM_SOAK_TIMEOUT": &c.limit, "FATHOM_SOAK_LEASE_TTL": &c.leaseTTL, "FATHOM_SOAK_CONSUL_CHECK_TTL": &c.checkTTL} {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				t.Fatalf("%s=%q: want a positive duration", name, v)
			}
			*p = d
		}
	}
	return c
}

// soakScript: a plan of four steps; each step runs a program in the sandbox
// (code_execute) and then answers; every answer comes after latency.
func soakScript(latency time.Duration) string {
	ms := strconv.Itoa(int(latency / time.Millisecond))
	return `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","delay_ms":` + ms + `,"response":"{\"steps\":[` +
		`{\"id\":\"a\",\"type\":\"custom\",\"description\":\"one\"},{\"id\":\"b\",\"type\":\"custom\",\"description\":\"two\"},` +
		`{\"id\":\"c\",\"type\":\"custom\",\"description\":\"three\"},{\"id\":\"d\",\"type\":\"custom\",\"description\":\"four\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","tool_match":"\"stdout\"|Tool .code_execute. failed","delay_ms":` + ms + `,"response":"done {{.Step}}"},
		{"system_match":"FATHOM-ROLE: executor","delay_ms":` + ms + `,"tool_calls":[{"name":"code_execute","arguments":"{\"language\":\"python\",\"code\":\"print(sum(range(1000)))\"}"}]}]}`
}

// soakRun is the state of one soak.
type soakRun struct {
	t      *testing.T
	cfg    soakConfig
	conn   *pgx.Conn
	env    []string
	common []string
	nodes  []*soakNode
	// members are every member the soak started, in order (nodes holds the live ones).
	members []*soakNode
	// window is the audit's soakAudit.window.
	window [2]time.Time
	// keepUp has topUp start sessions past cfg.sessions, up to cfg.running a call (the
	// upgrade soak, while members remain to be replaced).
	keepUp bool
	prefix string
	// goal is the goal of the i-th session (nil: "soak ID"); the upgrade soak's name the
	// session's kind, which its model script answers by.
	goal   func(i int, id string) string
	ids    []string
	resume []time.Duration // per session of a killed node: kill to another member's lease or its next event
	// unresumed counts sessions of a killed node with no new event within a minute.
	unresumed int
	kills     int
}

// TestSoak kills -9 a random node of a three-node cluster (Consul, PostgreSQL, `fathom
// mock-llm` with 200 ms latency, code_execute in each node's local sandbox) mid-step
// again and again while sessions run, restarting it each time, then audits every
// session's journal and prints one line per figure. The short variant runs in `make
// test-faults`; `make soak` runs the full one (FATHOM_SOAK_SESSIONS=100, FATHOM_SOAK_KILLS=50).
// FATHOM_SOAK_LOGS=DIR writes every node's stderr, at --log-level debug, to a file in DIR
// (as TestUpgradeSoak does).
func TestSoak(t *testing.T) {
	testenv.Faults(t)
	cfg := soakConfigFromEnv(t)
	consul := testenv.ConsulAddr(t)
	dsn := testenv.PostgresDSN(t)
	began := time.Now()
	deadline := began.Add(cfg.limit)
	model := startMockLLM(t, soakScript(cfg.latency))
	r := &soakRun{t: t, cfg: cfg, conn: connectPG(t, dsn), prefix: "soak-" + freePort(t),
		env: cleanEnv("OPENAI_BASE_URL="+model, "OPENAI_API_KEY=x"),
		common: []string{"--consul", consul, "--postgres", dsn, "--token", "t", "--lease-ttl", cfg.leaseTTL.String(),
			"--consul-check-ttl", cfg.checkTTL.String(), "--cluster-name", "fathom-soak-" + freePort(t)}}
	if os.Getenv("FATHOM_SOAK_DEBUG") != "" {
		r.common = append(r.common, "--log-level", "debug")
	}
	for i := 0; i < cfg.nodes; i++ {
		r.nodes = append(r.nodes, r.start(fathomBin, r.common...))
	}
	r.awaitAll()
	outOfTime := false
	for r.kills < cfg.kills || len(r.ids) < cfg.sessions {
		if outOfTime = time.Now().After(deadline); outOfTime {
			break
		}
		r.topUp()
		if r.kills < cfg.kills {
			r.killOne()
		}
	}
	a := r.finish(deadline, dsn)
	a.resume = r.resume
	a.unresumed = r.unresumed
	a.kills, a.duration = r.kills, time.Since(began)
	summary := a.summary(cfg)
	publish(t, summary, cfg.summaryOut)
	if outOfTime {
		t.Fatalf("the soak ran out of time (%s) after %d of %d kills and %d of %d sessions", cfg.limit, r.kills, cfg.kills, len(r.ids), cfg.sessions)
	}
	if a.failed+a.stuck+a.lost+a.duplicated+a.reexecuted+a.unresumed > 0 {
		t.Fatalf("the soak found problems:\n%s", summary)
	}
	if p99 := percentile(a.resume, 99); p99 > cfg.leaseTTL+5*time.Second {
		t.Fatalf("resume latency p99 %s exceeds the lease TTL + 5s", p99)
	}
	r.awaitAll()
	for _, n := range r.nodes {
		n.stop(t)
	}
}

// finish lets every session finish (until deadline, and a minute at least even past it;
// the ones that do not are stuck), then audits every session's journal.
func (r *soakRun) finish(deadline time.Time, dsn string) *soakAudit {
	waitUntil := deadline
	if least := time.Now().Add(time.Minute); waitUntil.Before(least) {
		waitUntil = least
	}
	for time.Now().Before(waitUntil) && r.unfinished() > 0 {
		time.Sleep(200 * time.Millisecond)
	}
	return r.audit(dsn)
}

// publish prints a soak's summary, logs it, and writes it to the file out names ("": none).
func publish(t *testing.T, summary, out string) {
	t.Helper()
	fmt.Print(summary)
	t.Log("\n" + summary)
	if out != "" {
		if err := os.WriteFile(out, []byte(summary), 0o644); err != nil {
			t.Errorf("write %s: %v", out, err)
		}
	}
}

// start starts a member of binary bin (startSoakNodeBin) and keeps it in r.members.
func (r *soakRun) start(bin string, args ...string) *soakNode {
	n := startSoakNodeBin(r.t, bin, r.env, args...)
	r.members = append(r.members, n)
	return n
}

// awaitAll waits for every node being started.
func (r *soakRun) awaitAll() {
	for _, n := range r.nodes {
		n.await(r.t)
	}
}

// topUp starts sessions through random nodes until running of them run (or all are
// started).
func (r *soakRun) topUp() {
	for n := 0; len(r.ids) < r.cfg.sessions || r.kills < r.cfg.kills || (r.keepUp && n < r.cfg.running); n++ {
		if r.running() >= r.cfg.running {
			return
		}
		id := fmt.Sprintf("%s-%d", r.prefix, len(r.ids))
		goal := "soak " + id
		if r.goal != nil {
			goal = r.goal(len(r.ids), id)
		}
		r.startSession(id, goal)
		r.ids = append(r.ids, id)
	}
}

// startSession starts session id through a random started member, retrying for 30 s,
// each attempt through a member picked again (as a client behind a load balancer does:
// during an upgrade one member's view of the cluster may lag). When it does not start,
// the failure names every answer and logs what the members said of the session and of
// those requests (their log lines under the session id or a request id), so a run on a
// machine that keeps no member logs still shows the cause.
func (r *soakRun) startSession(id, goal string) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var answers []string
	keys := []string{id}
	for {
		var up []*soakNode
		for _, n := range r.nodes {
			if n.started(r.t) {
				up = append(up, n)
			}
		}
		via := up[rand.IntN(len(up))] // one node at most is starting
		code, body := httpJSON(r.t, "POST", via.url+"/v1/sessions", "t", map[string]any{"goal": goal, "session_id": id, "command_id": "c1"})
		if code == 201 {
			if len(answers) > 0 {
				r.t.Logf("start %s: 201 through %s after %d refusals (first: %s)", id, via.member, len(answers), answers[0])
			}
			return
		}
		answers = append(answers, fmt.Sprintf("%d through %s (%s): %v", code, via.member, via.build, body))
		if e, ok := body["error"].(map[string]any); ok {
			if rid, ok := e["request_id"].(string); ok && rid != "" {
				keys = append(keys, rid)
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, n := range r.members {
		for _, l := range strings.Split(n.logs.String(), "\n") {
			for _, k := range keys {
				if strings.Contains(l, k) {
					r.t.Logf("%s (%s): %s", n.member, n.build, l)
					break
				}
			}
		}
	}
	r.t.Fatalf("session %s did not start in 30s: %d answers, the first %s, the last %s", id, len(answers), answers[0], answers[len(answers)-1])
}

// running counts this soak's sessions the index says are running.
func (r *soakRun) running() int {
	var n int
	if err := r.conn.QueryRow(context.Background(), `SELECT count(*) FROM fathom_sessions WHERE session_id LIKE $1 AND status = 'running'`, r.prefix+"-%").Scan(&n); err != nil {
		r.t.Fatalf("count running sessions: %v", err)
	}
	return n
}

// unfinished counts this soak's sessions that are not terminal.
func (r *soakRun) unfinished() int {
	var n int
	err := r.conn.QueryRow(context.Background(), `SELECT count(*) FROM fathom_sessions WHERE session_id LIKE $1 AND status NOT IN ('completed', 'failed', 'cancelled')`, r.prefix+"-%").Scan(&n)
	if err != nil {
		r.t.Fatalf("count unfinished sessions: %v", err)
	}
	return n
}

// leased returns the running sessions node holds a live lease of, with their seq.
func (r *soakRun) leased(member string) map[string]int64 {
	rows, err := r.conn.Query(context.Background(), `SELECT session_id, seq FROM fathom_sessions
		WHERE session_id LIKE $1 AND status = 'running' AND lease_owner = $2 AND lease_expires > now()`, r.prefix+"-%", member)
	if err != nil {
		r.t.Fatalf("leases of %s: %v", member, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			r.t.Fatal(err)
		}
		out[id] = seq
	}
	return out
}

// killOne kills -9 a random node that hosts running sessions, records how long each of
// its sessions took to resume elsewhere, and starts a new node in its place.
func (r *soakRun) killOne() {
	r.awaitAll()
	i := rand.IntN(len(r.nodes))
	var victims map[string]int64
	testenv.Eventually(r.t, 30*time.Second, func() bool {
		r.topUp()
		i = (i + 1) % len(r.nodes)
		victims = r.leased(r.nodes[i].member)
		return len(victims) > 0
	}, "no node hosts a running session")
	victim := r.nodes[i]
	heads := map[string]uint64{}
	for id := range victims {
		heads[id], _ = journalHead(r.t, r.conn, id) // the journal's head, not the index's
	}
	if err := victim.cmd.Process.Kill(); err != nil {
		r.t.Fatal(err)
	}
	_ = victim.cmd.Wait()
	killedAt := time.Now()
	r.kills++
	pending := map[string]uint64{}
	for id, seq := range heads {
		// A session that ended between the lease read and the kill has nothing to resume.
		if head, typ := journalHead(r.t, r.conn, id); head == seq && !terminalEvent(typ) {
			pending[id] = seq
		}
	}
	for len(pending) > 0 && time.Since(killedAt) < time.Minute {
		for id, seq := range pending {
			// Resumed: a live member holds the lease (a session waiting for a retry's
			// retry_at appends nothing until then), or the next event is in the journal.
			owner := leaseOwner(r.t, r.conn, id)
			if head, _ := journalHead(r.t, r.conn, id); head > seq || (owner != "" && owner != victim.member) {
				d := time.Since(killedAt)
				r.resume = append(r.resume, d)
				delete(pending, id)
				if d > r.cfg.leaseTTL+5*time.Second {
					r.t.Logf("session %s resumed %s after the kill of %s", id, d.Round(time.Millisecond), victim.member)
					r.debugLines(id)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.unresumed += len(pending)
	for id := range pending {
		head, typ := journalHead(r.t, r.conn, id)
		r.t.Logf("session %s of killed node %s did not resume within a minute: journal head %d %s, lease %q", id, victim.member, head, typ, leaseOwner(r.t, r.conn, id))
		r.debugLines(id)
	}
	r.t.Logf("kill %d: %s with %d running sessions; resumed %d", r.kills, victim.member, len(heads), len(heads)-len(pending))
	// Restarted once its sessions resumed elsewhere, without waiting: the next kill waits
	// for it.
	r.nodes[i] = r.start(fathomBin, r.common...)
}

func terminalEvent(typ string) bool {
	return typ == "session_completed" || typ == "session_failed" || typ == "session_cancelled"
}

// debugLines logs the live nodes' log lines about session id (FATHOM_SOAK_DEBUG set).
func (r *soakRun) debugLines(id string) {
	if os.Getenv("FATHOM_SOAK_DEBUG") == "" {
		return
	}
	for _, n := range r.nodes {
		if n.ready != nil {
			continue
		}
		for _, l := range strings.Split(n.logs.String(), "\n") {
			if strings.Contains(l, id) {
				r.t.Logf("%s: %s", n.member, l)
			}
		}
	}
}

// soakNode is a `fathom node` of the soak; the nodes of TestSoak are started without
// waiting (a start takes seconds on a busy machine) and awaited when next needed.
type soakNode struct {
	*nodeProc
	logs  *testenv.Buffer
	ready chan error // the banner's outcome first; nil once awaited
	build string     // "this tree", or the other build's binary (fathom-<commit>)
	file  string     // the file its stderr is written to (FATHOM_SOAK_LOGS; "": none)
}

// soakLogsDir is the directory FATHOM_SOAK_LOGS names ("": none). When it is set, every
// member a soak starts logs at --log-level debug, and its stderr is written to a file
// there, NN-BUILD.log (NN: the order of the members' starts; BUILD: "this", or the other
// build's binary name); the soak's summary names the file of the members it mentions.
func soakLogsDir() string { return os.Getenv("FATHOM_SOAK_LOGS") }

// soakStarts numbers the members a soak starts (their log files).
var soakStarts atomic.Int32

// startSoakNodeBin starts a `fathom node` of binary bin (fathomBin, or another build: the
// upgrade soak's predecessor) and returns at once; await waits for its banner.
func startSoakNodeBin(t *testing.T, bin string, env []string, args ...string) *soakNode {
	t.Helper()
	build, label := "this tree", "this"
	if bin != fathomBin {
		build = filepath.Base(bin)
		label = build
	}
	n := &soakNode{logs: &testenv.Buffer{}, ready: make(chan error, 2), build: build}
	var stderr io.Writer = n.logs
	if dir := soakLogsDir(); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("FATHOM_SOAK_LOGS: %v", err)
		}
		n.file = filepath.Join(dir, fmt.Sprintf("%02d-%s.log", soakStarts.Add(1), label))
		f, err := os.Create(n.file)
		if err != nil {
			t.Fatalf("FATHOM_SOAK_LOGS: %v", err)
		}
		t.Cleanup(func() { _ = f.Close() }) // registered first: runs after the process is reaped
		stderr = io.MultiWriter(n.logs, f)
		args = append(args, "--log-level", "debug")
	}
	cmd := exec.Command(bin, append([]string{"node", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env, cmd.Dir = env, t.TempDir()
	n.nodeProc = &nodeProc{cmd: cmd}
	cmd.Stderr = stderr
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
	})
	banner := regexp.MustCompile(`listening on (http://\S+) \(cluster member (\S+)\)`)
	ready := n.ready
	go func() { // ends with the process's stdout
		found := false
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := banner.FindStringSubmatch(sc.Text()); m != nil && !found {
				found = true
				n.url, n.member = m[1], m[2]
				ready <- nil
			}
		}
		ready <- errors.New("the node exited before its banner")
	}()
	return n
}

// started reports, without waiting, whether the node printed its banner.
func (n *soakNode) started(t *testing.T) bool {
	t.Helper()
	if n.ready == nil {
		return true
	}
	select {
	case err := <-n.ready:
		if err != nil {
			t.Fatalf("start node: %v\n%s", err, n.logs.String())
		}
		n.ready = nil
		return true
	default:
		return false
	}
}

// await waits for the node's banner (once).
func (n *soakNode) await(t *testing.T) {
	t.Helper()
	if n.ready == nil {
		return
	}
	select {
	case err := <-n.ready:
		if err != nil {
			t.Fatalf("start node: %v\n%s", err, n.logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("node did not start within 60s\n%s", n.logs.String())
	}
	n.ready = nil
}

// soakAudit is what the journal audit found.
type soakAudit struct {
	started, completed, failed, stuck int
	lost, duplicated, reexecuted      int
	kills, unresumed                  int
	resume                            []time.Duration
	duration                          time.Duration
	// stall is the longest gap between two events of a session (a gap before a
	// hitl_received less the wait for a human: up to the answer, or to the deadline when
	// the default action was taken); during the longest one
	// that overlaps window (the upgrade soak: from the first drain until the last new
	// member is up; zero: none); beside the longest once a tool_result's gap is counted
	// without its call's own duration on the member (the tool's time, slot wait included).
	stall, during, beside soakStall
	window                [2]time.Time
	// calls are the tool calls with a result: their tool_called and tool_result.
	calls [][2]soakEvent
	// moved counts the tool calls whose tool_called and tool_result two activations
	// wrote (known from the members' logs only, FATHOM_SOAK_LOGS; -1 without): the call
	// was handed over between the two. A draining member records a call its model asked
	// for and leaves it to the next owner (it starts none); a call it had started and cut
	// would show in cancelled too. movedCalls lists a few.
	moved      int
	movedCalls []string
	// cancelled counts the sandbox executions the members' logs say were cancelled, queued
	// or running (FATHOM_SOAK_LOGS; -1 without): a call stopped before its end.
	cancelled int
	problems  []string
	// ends is each session's last event type; marks counts, per session, what its
	// journal shows beside the figures above: "sub-agent tool_result" (a sub-agent's tool
	// call ended) and "hitl_received by BY" (a human wait ended: by "human" or "timeout").
	ends  map[string]string
	marks map[string]map[string]int
}

// soakEvent is one event of a session's journal, as the audit reads it.
type soakEvent struct {
	session string
	seq     int
	typ     string
	at      time.Time
	// callMS and execMS are, for a tool_result, the call's duration on its member (the
	// tool executor's wall time: waiting for a sandbox slot included) and the program's
	// own in the sandbox (the sandbox's duration_ms in the result); -1 when unknown.
	callMS, execMS int64
}

// soakStall is a gap between two consecutive events of a session.
type soakStall struct {
	gap      time.Duration
	from, to soakEvent
}

// keep keeps gap, between from and to, if it is longer.
func (s *soakStall) keep(from, to soakEvent, gap time.Duration) {
	if !from.at.IsZero() && gap > s.gap {
		*s = soakStall{gap: gap, from: from, to: to}
	}
}

// String is the gap and the event after it.
func (s soakStall) String() string {
	if s.to.session == "" {
		return "none"
	}
	return fmt.Sprintf("%s (%s before seq %d (%s))", s.gap.Round(time.Millisecond), s.to.session, s.to.seq, s.to.typ)
}

// toolDurations reads a tool_result's call and sandbox durations (soakEvent.callMS,
// execMS) from its timeline JSON: int64 fields are JSON strings there.
func toolDurations(ev map[string]any) (callMS, execMS int64) {
	callMS, execMS = jsonInt(ev["duration_ms"]), -1
	var res map[string]any
	if s, _ := ev["result"].(string); json.Unmarshal([]byte(s), &res) == nil {
		execMS = jsonInt(res["duration_ms"])
	}
	return callMS, execMS
}

// jsonInt is an integer field of timeline JSON (a number, or an int64 as a string); -1
// when it is neither.
func jsonInt(v any) int64 {
	switch x := v.(type) {
	case float64:
		return int64(x)
	case string:
		if n, err := strconv.ParseInt(x, 10, 64); err == nil {
			return n
		}
	}
	return -1
}

// audit reads every session's journal through `fathom session timeline --json`: seq
// contiguous from 1 (a gap is an event lost), no event recorded twice for a command id
// (session_started), an LLM or tool call id, or a tool's idempotency key, and no tool
// called again once its result was recorded.
func (r *soakRun) audit(dsn string) *soakAudit {
	a := &soakAudit{started: len(r.ids), window: r.window}
	for _, id := range r.ids {
		res := fathom(r.t, cleanEnv(), "session", "timeline", "--postgres", dsn, "--json", id)
		if res.code != 0 {
			r.t.Fatalf("timeline of %s: %d %s", id, res.code, res.stderr)
		}
		a.session(id, res.stdout)
	}
	a.moved, a.cancelled = -1, -1
	if soakLogsDir() != "" {
		a.moved, a.cancelled = 0, 0
		for _, n := range r.members {
			a.cancelled += len(cancelledLine.FindAllString(n.logs.String(), -1))
		}
		acts := map[string][]activation{}
		for _, c := range a.calls {
			id := c[0].session
			if _, ok := acts[id]; !ok {
				acts[id] = r.activations(id)
			}
			w0, ok0 := writer(acts[id], c[0])
			w1, ok1 := writer(acts[id], c[1])
			if ok0 && ok1 && (w0.member != w1.member || !w0.began.Equal(w1.began)) {
				a.moved++
				if len(a.movedCalls) < 5 {
					ended := "never logged its end"
					if w0.to >= 0 {
						ended = "ended " + w0.ended.UTC().Format("15:04:05.000")
					}
					a.movedCalls = append(a.movedCalls, fmt.Sprintf("%s seq %d→%d: tool_called on %s at %s (its activation %s), tool_result on %s %s later",
						id, c[0].seq, c[1].seq, w0.member.member, c[0].at.UTC().Format("15:04:05.000"), ended,
						w1.member.member, c[1].at.Sub(c[0].at).Round(time.Millisecond)))
				}
			}
		}
	}
	return a
}

func (a *soakAudit) session(id, timeline string) {
	if a.ends == nil {
		a.ends, a.marks = map[string]string{}, map[string]map[string]int{}
	}
	marks := map[string]int{}
	a.marks[id] = marks
	seen := map[string]bool{}
	results := map[string]bool{} // tool calls with a recorded result
	last, want := "", 1
	var prev soakEvent // the previous event with a time
	called := map[string]soakEvent{}
	asked := map[string]time.Time{} // open human waits' deadlines, by request id
	sc := bufio.NewScanner(strings.NewReader(timeline))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			a.problems = append(a.problems, fmt.Sprintf("%s: unreadable event %q", id, sc.Text()))
			continue
		}
		seq, _ := ev["seq"].(float64)
		if int(seq) > want {
			a.lost += int(seq) - want
			a.problems = append(a.problems, fmt.Sprintf("%s: seq jumps from %d to %d", id, want-1, int(seq)))
		}
		want = int(seq) + 1
		typ, _ := ev["type"].(string)
		last = typ
		cur := soakEvent{session: id, seq: int(seq), typ: typ, callMS: -1, execMS: -1}
		if typ == "tool_result" {
			cur.callMS, cur.execMS = toolDurations(ev)
		}
		if s, _ := ev["at"].(string); s != "" {
			at, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				a.problems = append(a.problems, fmt.Sprintf("%s: event %d has no time: %q", id, int(seq), s))
			} else {
				cur.at = at
				// A wait for a human is no stall: the gap before a hitl_received is counted
				// less the wait (all of it for a human's answer; up to the deadline for the
				// default action, so a deadline taken late still shows).
				gap := at.Sub(prev.at)
				if typ == "hitl_received" && !prev.at.IsZero() {
					waited := gap
					if ev["by"] == "timeout" {
						waited = min(gap, max(asked[fmt.Sprint(ev["request_id"])].Sub(prev.at), 0))
					}
					gap -= waited
				}
				a.stall.keep(prev, cur, gap)
				a.beside.keep(prev, cur, gap-time.Duration(max(cur.callMS, 0))*time.Millisecond)
				if w := a.window; !w[0].IsZero() && prev.at.Before(w[1]) && at.After(w[0]) {
					a.during.keep(prev, cur, gap)
				}
				prev = cur
			}
		}
		for _, k := range []string{"command_id", "call_id", "idempotency_key"} {
			v, _ := ev[k].(string)
			if v == "" || (k == "command_id" && typ != "session_started") {
				continue
			}
			key := fmt.Sprintf("%s %s=%s sub_agent=%v", typ, k, v, ev["sub_agent_id"])
			if seen[key] {
				a.duplicated++
				a.problems = append(a.problems, fmt.Sprintf("%s: %s recorded twice", id, key))
			}
			seen[key] = true
		}
		if typ == "hitl_requested" {
			if ns := jsonInt(ev["deadline_unix_nano"]); ns > 0 {
				asked[fmt.Sprint(ev["request_id"])] = time.Unix(0, ns)
			}
		}
		switch sub, _ := ev["sub_agent_id"].(string); {
		case typ == "tool_result" && sub != "":
			marks["sub-agent tool_result"]++
		case typ == "hitl_received":
			marks[fmt.Sprintf("hitl_received by %v", ev["by"])]++
		}
		call, _ := ev["call_id"].(string)
		key := fmt.Sprintf("%s sub_agent=%v", call, ev["sub_agent_id"])
		switch typ {
		case "tool_called":
			if results[call] {
				a.reexecuted++
				a.problems = append(a.problems, fmt.Sprintf("%s: tool call %s called again after its result", id, call))
			}
			called[key] = cur
		case "tool_result":
			results[call] = true
			if c, ok := called[key]; ok && !c.at.IsZero() && !cur.at.IsZero() {
				a.calls = append(a.calls, [2]soakEvent{c, cur})
			}
		}
	}
	a.ends[id] = last
	switch last {
	case "session_completed":
		a.completed++
	case "session_failed", "session_cancelled":
		a.failed++
		a.problems = append(a.problems, fmt.Sprintf("%s: ended with %s", id, last))
	default:
		a.stuck++
		a.problems = append(a.problems, fmt.Sprintf("%s: stuck at %q", id, last))
	}
}

// percentile is the p-th percentile of ds (0 when empty).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}

// summary is one line per figure.
func (a *soakAudit) summary(cfg soakConfig) string {
	var b strings.Builder
	line := func(k string, v any) { fmt.Fprintf(&b, "soak: %-40s %v\n", k, v) }
	line("nodes / lease TTL / Consul check TTL / model latency", fmt.Sprintf("%d / %s / %s / %s", cfg.nodes, cfg.leaseTTL, cfg.checkTTL, cfg.latency))
	line("duration", a.duration.Round(time.Second))
	line("kill -9s (each node restarted)", a.kills)
	a.counts(line)
	line("sessions of a killed node never resumed", a.unresumed)
	line("resume latency after a kill p50", percentile(a.resume, 50).Round(time.Millisecond))
	line("resume latency after a kill p99", percentile(a.resume, 99).Round(time.Millisecond))
	a.listProblems(line)
	return b.String()
}

// counts writes the audit's session and event counts with line.
func (a *soakAudit) counts(line func(k string, v any)) {
	line("sessions started", a.started)
	line("sessions completed", a.completed)
	line("sessions failed", a.failed)
	line("sessions stuck", a.stuck)
	line("events lost", a.lost)
	line("events duplicated", a.duplicated)
	line("tool calls re-executed after a result", a.reexecuted)
}

// listProblems writes the audit's first 20 problems with line, and how many more there are.
func (a *soakAudit) listProblems(line func(k string, v any)) {
	for i, p := range a.problems {
		if i == 20 {
			line("…", fmt.Sprintf("%d more problems", len(a.problems)-i))
			return
		}
		line("problem", p)
	}
}

// activation is one activation of a session on a member, as the member's debug lines
// tell it ("session activated" with the journal head it loaded, "session deactivated"
// with the seq it ended at): it wrote the session's events from+1 up to to.
type activation struct {
	member       *soakNode
	from, to     int // to is -1 while the member logged no end (it was killed, or still runs)
	began, ended time.Time
}

// cancelledLine is a sandbox's log line of an execution cancelled while queued or running.
var cancelledLine = regexp.MustCompile(`msg="sandbox execution cancelled while queued"|msg="sandbox execution finished"[^\n]*status=cancelled`)

// activationLine is a session grain's debug line of its start or end (text log format).
var activationLine = regexp.MustCompile(`^time=(\S+) level=DEBUG msg="session (activated|deactivated)" .*\bsession_id=(\S+) .*\bseq=(\d+)`)

// activations reads session id's activations from the logs of every member the soak
// started, in the order they began. The grains log them at debug level only: without
// FATHOM_SOAK_LOGS there are none.
func (r *soakRun) activations(id string) []activation {
	var out []activation
	for _, n := range r.members {
		open := -1 // the member's activation of id that has not ended, in out
		for _, l := range strings.Split(n.logs.String(), "\n") {
			m := activationLine.FindStringSubmatch(l)
			if m == nil || m[3] != id {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, m[1])
			if err != nil {
				continue
			}
			seq, _ := strconv.Atoi(m[4])
			switch {
			case m[2] == "activated":
				out = append(out, activation{member: n, from: seq, to: -1, began: at})
				open = len(out) - 1
			case open >= 0:
				out[open].to, out[open].ended = seq, at
				open = -1
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].began.Before(out[j].began) })
	return out
}

// writer is the activation that wrote ev: of the ones that began before it and had not
// ended before its seq, the one that loaded the latest head (an activation of a killed
// member never logs its end). ok is false when no log tells.
func writer(acts []activation, ev soakEvent) (w activation, ok bool) {
	for _, a := range acts {
		if a.from < ev.seq && (a.to < 0 || a.to >= ev.seq) && !a.began.After(ev.at.Add(time.Millisecond)) && (!ok || a.from >= w.from) {
			w, ok = a, true
		}
	}
	return w, ok
}

// describeEvent is ev with its time and the member that wrote it, for a summary line.
func (r *soakRun) describeEvent(ev soakEvent) string {
	s := fmt.Sprintf("seq %d %s at %s", ev.seq, ev.typ, ev.at.UTC().Format("15:04:05.000"))
	if ev.callMS >= 0 {
		s += fmt.Sprintf(" (the call took %dms on its member", ev.callMS)
		if ev.execMS >= 0 {
			s += fmt.Sprintf(", the program %dms of it in the sandbox", ev.execMS)
		}
		s += ")"
	}
	w, ok := writer(r.activations(ev.session), ev)
	if !ok {
		if soakLogsDir() == "" {
			return s + ", writer unknown (set FATHOM_SOAK_LOGS)"
		}
		return s + ", writer unknown (no member logged its activation)"
	}
	end := "not ended"
	if w.to >= 0 {
		end = fmt.Sprintf("ended at seq %d at %s", w.to, w.ended.UTC().Format("15:04:05.000"))
	}
	s += fmt.Sprintf(" by %s (%s", w.member.member, w.member.build)
	if w.member.file != "" {
		s += ", " + filepath.Base(w.member.file)
	}
	return s + fmt.Sprintf("; its activation loaded seq %d at %s, %s)", w.from, w.began.UTC().Format("15:04:05.000"), end)
}

// stallLines writes, with line, stall named k and its two events, each with its writer.
func (r *soakRun) stallLines(k string, s soakStall, line func(k string, v any)) {
	line(k, s)
	if s.to.session == "" {
		return
	}
	line("  event before", r.describeEvent(s.from))
	line("  event after", r.describeEvent(s.to))
}
