package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/jackc/pgx/v5"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// slowSixSteps is a mock-llm script: a plan of six steps, each answered after delay.
func slowSixSteps(delay time.Duration) string {
	return `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[` +
		`{\"id\":\"a\",\"type\":\"custom\",\"description\":\"one\"},{\"id\":\"b\",\"type\":\"custom\",\"description\":\"two\"},` +
		`{\"id\":\"c\",\"type\":\"custom\",\"description\":\"three\"},{\"id\":\"d\",\"type\":\"custom\",\"description\":\"four\"},` +
		`{\"id\":\"e\",\"type\":\"custom\",\"description\":\"five\"},{\"id\":\"f\",\"type\":\"custom\",\"description\":\"six\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","response":"done {{.Step}}","delay_ms":` + strconv.Itoa(int(delay/time.Millisecond)) + `}]}`
}

// leaseOwner reads session id's live lease holder straight from the session index
// ("" when nobody holds it): no grain request, so nothing is activated by looking.
func leaseOwner(t *testing.T, conn *pgx.Conn, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var owner string
	err := conn.QueryRow(ctx, `SELECT coalesce(lease_owner, '') FROM fathom_sessions WHERE session_id = $1 AND lease_expires > now()`, id).Scan(&owner)
	if err == pgx.ErrNoRows {
		return ""
	}
	if err != nil {
		t.Fatalf("read the lease of %s: %v", id, err)
	}
	return owner
}

// connectPG opens a connection to the test journal, closed with the test.
func connectPG(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// startSessions starts n sessions named prefix-0.. through node via (no host lookup
// afterwards: a state query would activate them) and returns their ids.
func startSessions(t *testing.T, via *nodeProc, token, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		startSession(t, via, token, id)
		ids = append(ids, id)
	}
	return ids
}

// startSession starts session id (goal "heal <id>") through node via, retrying until the
// gateway answers 201.
func startSession(t *testing.T, via *nodeProc, token, id string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, body := httpJSON(t, "POST", via.url+"/v1/sessions", token, map[string]any{"goal": "heal " + id, "session_id": id, "command_id": "c1"})
		if code != 201 {
			t.Logf("start %s: %d %v", id, code, body)
		}
		return code == 201
	}, "session %s did not start", id)
}

// waitAllCompleted waits for every session to complete and audits each journal.
func waitAllCompleted(t *testing.T, conn *pgx.Conn, dsn string, ids []string) {
	t.Helper()
	for _, id := range ids {
		testenv.Eventually(t, 120*time.Second, func() bool {
			_, typ := journalHead(t, conn, id)
			return typ == "session_completed"
		}, "session %s did not complete", id)
		auditJournal(t, dsn, id)
	}
}

// owners returns, for each session, its live lease holder.
func owners(t *testing.T, conn *pgx.Conn, ids []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, id := range ids {
		out[id] = leaseOwner(t, conn, id)
	}
	return out
}

// TestGracefulLeaveHandsSessionsOverAtOnce: two `fathom node` processes (Consul, one
// PostgreSQL journal, `fathom mock-llm` answering each step after a second, the default
// 10 s lease). Node A gets SIGTERM while it hosts running sessions: they finish the model
// call in flight (the drain), stop at a step boundary (A releases their leases) and
// continue on node B within 3 s (the call's second + 2 s), with no client request; every
// session completes and the journal audit finds nothing twice.
func TestGracefulLeaveHandsSessionsOverAtOnce(t *testing.T) {
	testenv.Faults(t)
	consul := testenv.ConsulAddr(t)
	dsn := testenv.PostgresDSN(t)
	const token = "t"
	model := startMockLLM(t, slowSixSteps(time.Second))
	env := cleanEnv("OPENAI_BASE_URL="+model, "OPENAI_API_KEY=x")
	common := []string{"--consul", consul, "--postgres", dsn, "--token", token, "--cluster-name", "fathom-leave-" + freePort(t)}
	a := startNode(t, env, common...)
	b := startNode(t, env, common...)
	conn := connectPG(t, dsn)

	// Half the ids hash to A among {A, B} (and every id goes to A while A sees only
	// itself), so A hosts some of them whatever its view when they start.
	prefix := "leave-" + freePort(t)
	var ids []string
	for i, nA := 0, 0; len(ids) < 8; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if toA := rendezvousOwner(t, id, a.member, b.member) == a.member; toA && nA < 4 || !toA && len(ids)-nA < 4 {
			if toA {
				nA++
			}
			startSession(t, a, token, id)
			ids = append(ids, id)
		}
	}
	var onA []string
	testenv.Eventually(t, 30*time.Second, func() bool {
		onA = onA[:0]
		for id, owner := range owners(t, conn, ids) {
			if owner == a.member {
				onA = append(onA, id)
			}
		}
		return len(onA) > 0
	}, "no session holds a lease on node A (%s)", a.member)

	leftAt := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for _, id := range onA {
		testenv.Eventually(t, 3*time.Second-time.Since(leftAt), func() bool {
			_, typ := journalHead(t, conn, id)
			return typ == "session_completed" || leaseOwner(t, conn, id) == b.member
		}, "session %s was not taken over by node B within 3s of node A's SIGTERM (lease: %q)", id, leaseOwner(t, conn, id))
	}
	t.Logf("%d sessions of node A continued on node B %s after its SIGTERM", len(onA), time.Since(leftAt).Round(time.Millisecond))
	if err := a.cmd.Wait(); err != nil {
		t.Errorf("node A exited with %v", err)
	}
	waitAllCompleted(t, conn, dsn, ids)
	b.stop(t)
}

// rendezvousOwner is the member address disthash places identity on among members.
func rendezvousOwner(t *testing.T, identity string, members ...string) string {
	t.Helper()
	var ms []*cluster.Member
	for _, m := range members {
		host, port, err := net.SplitHostPort(m)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		ms = append(ms, &cluster.Member{Id: m, Host: host, Port: int32(p), Kinds: []string{"Session"}})
	}
	r := cluster.NewRendezvous()
	r.UpdateMembers(ms)
	return r.GetByClusterIdentity(&cluster.ClusterIdentity{Kind: "Session", Identity: identity})
}

// TestMemberJoinMovesSessionsAtOnce: sessions run on nodes A and B; node C joins. Each
// running session whose identity now hashes to C (disthash) stops where it ran and
// continues on C within 2 s of C's start, with no client request; the others stay put.
// Every session completes and the journal audit finds nothing twice.
func TestMemberJoinMovesSessionsAtOnce(t *testing.T) {
	testenv.Faults(t)
	consul := testenv.ConsulAddr(t)
	dsn := testenv.PostgresDSN(t)
	const token = "t"
	model := startMockLLM(t, slowSixSteps(time.Second))
	env := cleanEnv("OPENAI_BASE_URL="+model, "OPENAI_API_KEY=x")
	common := []string{"--consul", consul, "--postgres", dsn, "--token", token, "--cluster-name", "fathom-join-" + freePort(t)}
	a := startNode(t, env, common...)
	b := startNode(t, env, common...)
	conn := connectPG(t, dsn)
	ids := startSessions(t, a, token, "join-"+freePort(t), 16)
	testenv.Eventually(t, 30*time.Second, func() bool {
		for id, owner := range owners(t, conn, ids) {
			if owner != rendezvousOwner(t, id, a.member, b.member) {
				return false
			}
		}
		return true
	}, "the sessions did not all run on their owners among A and B")

	c := startNode(t, env, common...)
	joinedAt := time.Now()
	var moved []string
	for _, id := range ids {
		if rendezvousOwner(t, id, a.member, b.member, c.member) == c.member {
			moved = append(moved, id)
		}
	}
	if len(moved) == 0 {
		t.Fatalf("no session hashes to node C among %v", ids)
	}
	for _, id := range moved {
		testenv.Eventually(t, 2*time.Second-time.Since(joinedAt), func() bool {
			_, typ := journalHead(t, conn, id)
			return typ == "session_completed" || leaseOwner(t, conn, id) == c.member
		}, "session %s, moved to node C by its join, did not continue there within 2s (lease: %q)", id, leaseOwner(t, conn, id))
	}
	t.Logf("%d of %d sessions moved to node C within %s of its start", len(moved), len(ids), time.Since(joinedAt).Round(time.Millisecond))
	waitAllCompleted(t, conn, dsn, ids)
	for _, n := range []*nodeProc{a, b, c} {
		n.stop(t)
	}
}

// TestPausedMemberIsLetBackIn: nodes A and B run sessions; A is paused (SIGSTOP) for
// 10 s, far past its 3 s Consul health deadline, then resumed. Meanwhile clients keep
// starting sessions through B and never get a server error; once A is back both members
// are ready, sessions started afterwards are placed on A again (it was let back in, not
// blocked for good), and every session completes with a clean journal audit.
func TestPausedMemberIsLetBackIn(t *testing.T) {
	testenv.Faults(t)
	consul := testenv.ConsulAddr(t)
	dsn := testenv.PostgresDSN(t)
	const token = "t"
	model := startMockLLM(t, slowSixSteps(500*time.Millisecond))
	env := cleanEnv("OPENAI_BASE_URL="+model, "OPENAI_API_KEY=x")
	common := []string{"--consul", consul, "--postgres", dsn, "--token", token, "--cluster-name", "fathom-pause-" + freePort(t)}
	a := startNode(t, env, common...)
	b := startNode(t, env, common...)
	conn := connectPG(t, dsn)
	prefix := "pause-" + freePort(t)
	ids := startSessions(t, b, token, prefix, 8)

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
	for i := 0; time.Since(pausedAt) < 10*time.Second; i++ {
		id := fmt.Sprintf("%s-during-%d", prefix, i)
		code, body := httpJSON(t, "POST", b.url+"/v1/sessions", token, map[string]any{"goal": "heal " + id, "session_id": id, "command_id": "c1"})
		if code >= 500 && code != 503 && code != 504 {
			t.Fatalf("start %s through B while A is paused: %d %v", id, code, body)
		}
		if code == 201 {
			ids = append(ids, id)
		}
	}
	resume()
	for _, n := range []*nodeProc{a, b} {
		testenv.Eventually(t, 30*time.Second, func() bool {
			code, _ := httpJSON(t, "GET", n.url+"/readyz", "", nil)
			return code == 200
		}, "node %s not ready after A resumed", n.member)
	}
	// A is a member again: new sessions land on it.
	var after []string
	testenv.Eventually(t, 60*time.Second, func() bool {
		id := fmt.Sprintf("%s-after-%d", prefix, len(after))
		code, body := httpJSON(t, "POST", b.url+"/v1/sessions", token, map[string]any{"goal": "heal " + id, "session_id": id, "command_id": "c1"})
		if code != 201 {
			t.Fatalf("start %s through B after A resumed: %d %v", id, code, body)
		}
		after = append(after, id)
		testenv.Eventually(t, 10*time.Second, func() bool { return leaseOwner(t, conn, id) != "" }, "session %s holds no lease", id)
		return leaseOwner(t, conn, id) == a.member
	}, "no new session was placed on A after it resumed (A was not let back in)")
	waitAllCompleted(t, conn, dsn, append(ids, after...))
	a.stop(t)
	b.stop(t)
}

// consulAgent is a private Consul dev agent started with the project's script, so this
// test can stop and restart it without disturbing the shared one.
type consulAgent struct{ dir, addr string }

func startPrivateConsul(t *testing.T) *consulAgent {
	t.Helper()
	testenv.ConsulAddr(t) // skips (or fails under make test) without the test services
	c := &consulAgent{dir: t.TempDir()}
	t.Cleanup(func() { c.run(t, "stop") })
	c.addr = strings.TrimSpace(c.run(t, "start"))
	return c
}

func (c *consulAgent) run(t *testing.T, verb string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join("..", "..", "scripts", "consul.sh"), verb, c.dir)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("consul.sh %s: %v\n%s", verb, err, stderr)
	}
	return string(out)
}

// passing lists the ids of the cluster's members whose Consul check passes.
func (c *consulAgent) passing(t *testing.T, clusterName string) []string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + c.addr + "/v1/health/service/" + clusterName + "?passing=1")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var entries []struct{ Service struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&entries); err != nil {
		return nil
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Service.ID)
	}
	return ids
}

// TestConsulAgentRestart: nodes A and B run sessions on a private Consul agent, which is
// stopped for 10 s and started again on the same address, empty. The members register
// again, the sessions complete, and a member C started afterwards joins the same cluster
// (sessions started through it are placed on A and B as well, not all on C).
func TestConsulAgentRestart(t *testing.T) {
	testenv.Faults(t)
	agent := startPrivateConsul(t)
	dsn := testenv.PostgresDSN(t)
	const token = "t"
	model := startMockLLM(t, slowSixSteps(time.Second))
	env := cleanEnv("OPENAI_BASE_URL="+model, "OPENAI_API_KEY=x")
	name := "fathom-agent-restart-" + freePort(t)
	common := []string{"--consul", agent.addr, "--postgres", dsn, "--token", token, "--cluster-name", name}
	a := startNode(t, env, common...)
	b := startNode(t, env, common...)
	conn := connectPG(t, dsn)
	prefix := "agent-" + freePort(t)
	ids := startSessions(t, a, token, prefix, 6)

	agent.run(t, "stop")
	stoppedAt := time.Now()
	testenv.Eventually(t, 30*time.Second, func() bool { return time.Since(stoppedAt) >= 10*time.Second },
		"the clock stopped") // the outage lasts 10 s; the members keep running meanwhile
	agent.run(t, "start")
	testenv.Eventually(t, 30*time.Second, func() bool { return len(agent.passing(t, name)) == 2 },
		"A and B did not register again after the agent restarted (passing: %v)", agent.passing(t, name))

	c := startNode(t, env, common...)
	hosts := map[string]int{}
	var after []string
	testenv.Eventually(t, 60*time.Second, func() bool {
		id := fmt.Sprintf("%s-after-%d", prefix, len(after))
		code, body := httpJSON(t, "POST", c.url+"/v1/sessions", token, map[string]any{"goal": "heal " + id, "session_id": id, "command_id": "c1"})
		if code != 201 {
			t.Fatalf("start %s through C: %d %v", id, code, body)
		}
		after = append(after, id)
		testenv.Eventually(t, 10*time.Second, func() bool { return leaseOwner(t, conn, id) != "" }, "session %s holds no lease", id)
		hosts[leaseOwner(t, conn, id)]++
		return hosts[c.member] > 0 && hosts[a.member]+hosts[b.member] > 0
	}, "sessions started through C after the agent restart were not spread over the cluster: %v (A %s, B %s, C %s)", hosts, a.member, b.member, c.member)
	waitAllCompleted(t, conn, dsn, append(ids, after...))
	for _, n := range []*nodeProc{a, b, c} {
		n.stop(t)
	}
}

// TestTwoActivationsRaceOneWriterCarriesOn: two `fathom node` processes that do not see
// each other (two cluster names, as with a partition that froze one member's view) share
// one PostgreSQL journal. A session runs on A; a state query through B activates it on B
// too. B's activation answers the query from the journal but runs nothing while A holds
// the session's lease (it waits for the lease); were the lease not visible, the
// expected-sequence fence would let only one of them write. A carries the session to
// completion with no further request, and the audit finds nothing recorded twice.
func TestTwoActivationsRaceOneWriterCarriesOn(t *testing.T) {
	testenv.Faults(t)
	consul := testenv.ConsulAddr(t)
	dsn := testenv.PostgresDSN(t)
	const token = "t"
	model := startMockLLM(t, slowSixSteps(500*time.Millisecond))
	env := cleanEnv("OPENAI_BASE_URL="+model, "OPENAI_API_KEY=x")
	common := []string{"--consul", consul, "--postgres", dsn, "--token", token}
	a := startNode(t, env, append(common, "--cluster-name", "fathom-race-a-"+freePort(t))...)
	b := startNode(t, env, append(common, "--cluster-name", "fathom-race-b-"+freePort(t))...)
	conn := connectPG(t, dsn)
	ids := startSessions(t, a, token, "race-"+freePort(t), 4)
	for _, id := range ids {
		testenv.Eventually(t, 30*time.Second, func() bool { seq, _ := journalHead(t, conn, id); return seq >= 4 }, "session %s did not get going", id)
		if code, body := httpJSON(t, "GET", b.url+"/v1/sessions/"+id, token, nil); code != 200 || body["host"] != b.member {
			t.Fatalf("state of %s through B: %d %v (want an activation on B)", id, code, body)
		}
	}
	waitAllCompleted(t, conn, dsn, ids)
	a.stop(t)
	b.stop(t)
	if logs := b.stderr.String(); strings.Count(logs, "session activated while another member still hosts it: waiting for its lease") < len(ids) {
		t.Fatalf("node B's activations did not wait for A's lease:\n%s", logs)
	}
}
