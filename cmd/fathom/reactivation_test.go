package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// startMockLLM runs `fathom mock-llm` with script and returns its base URL (…/v1).
func startMockLLM(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(fathomBin, "mock-llm", "--listen", "127.0.0.1:0", "--script", path)
	cmd.Env = cleanEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := waitLine(t, out, regexp.MustCompile(`mock-llm listening on (\S+)`))
	return regexp.MustCompile(`(http://\S+)`).FindString(line)
}

// journalHead reads a session's newest seq and event type straight from the journal's
// tables: no grain request, so nothing is activated by looking.
func journalHead(t *testing.T, conn *pgx.Conn, id string) (uint64, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var seq int64
	var typ string
	err := conn.QueryRow(ctx, `SELECT seq, type FROM fathom_events WHERE stream_id = $1 ORDER BY seq DESC LIMIT 1`, id).Scan(&seq, &typ)
	if err == pgx.ErrNoRows {
		return 0, ""
	}
	if err != nil {
		t.Fatalf("read the journal of %s: %v", id, err)
	}
	return uint64(seq), typ
}

// auditJournal checks a finished session's stream: seq 1..n (jsonEvents), completed,
// no event recorded twice for one command id, LLM call or tool call, and no tool called
// again once its result was recorded.
func auditJournal(t *testing.T, dsn, id string) []map[string]any {
	t.Helper()
	r := fathom(t, cleanEnv(), "session", "timeline", "--postgres", dsn, "--json", id)
	if r.code != 0 {
		t.Fatalf("timeline of %s: %d %s", id, r.code, r.stderr)
	}
	evs := jsonEvents(t, r.stdout)
	checkCompletedRun(t, evs)
	seen := map[string]int{}
	results := map[string]bool{} // tool calls with a recorded result
	for _, ev := range evs {
		typ := ev["type"].(string)
		call := fmt.Sprintf("%v sub_agent=%v", ev["call_id"], ev["sub_agent_id"])
		switch typ {
		case "tool_called":
			if results[call] {
				t.Fatalf("session %s calls tool %s again after its result was recorded", id, call)
			}
		case "tool_result":
			results[call] = true
		}
		for _, k := range []string{"command_id", "call_id", "idempotency_key"} {
			if v, _ := ev[k].(string); v != "" && (k != "command_id" || typ == "session_started") {
				key := fmt.Sprintf("%s %s=%s sub_agent=%v", typ, k, v, ev["sub_agent_id"])
				if seen[key]++; seen[key] > 1 {
					t.Fatalf("session %s records %q twice", id, key)
				}
			}
		}
	}
	return evs
}

// TestReactivationAcrossNodesAfterKill: two `fathom node` processes (Consul, one
// PostgreSQL journal, `fathom mock-llm` answering each step after a delay). A session
// runs on node A; A is killed with SIGKILL mid-run. With no client request, node B takes
// it over once the membership drops A: it breaks A's leases and its reactivator
// activates the session, whose next event is appended long before A's lease (60 s)
// would have lapsed; it completes, and the journal audit finds seq contiguous and
// nothing recorded twice.
func TestReactivationAcrossNodesAfterKill(t *testing.T) {
	testenv.Faults(t)
	consul := testenv.ConsulAddr(t)
	dsn := testenv.PostgresDSN(t)
	// The lease is long: the session can move within takeOverBound only by the takeover.
	const token, leaseTTL, takeOverBound = "t", 60 * time.Second, 20 * time.Second
	model := startMockLLM(t, `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[`+
		`{\"id\":\"a\",\"type\":\"custom\",\"description\":\"one\"},{\"id\":\"b\",\"type\":\"custom\",\"description\":\"two\"},`+
		`{\"id\":\"c\",\"type\":\"custom\",\"description\":\"three\"},{\"id\":\"d\",\"type\":\"custom\",\"description\":\"four\"},`+
		`{\"id\":\"e\",\"type\":\"custom\",\"description\":\"five\"},{\"id\":\"f\",\"type\":\"custom\",\"description\":\"six\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","response":"done {{.Step}}","delay_ms":1000}]}`)
	env := cleanEnv("OPENAI_BASE_URL="+model, "OPENAI_API_KEY=x")
	common := []string{"--consul", consul, "--postgres", dsn, "--token", token, "--lease-ttl", leaseTTL.String(), "--log-level", "debug",
		"--cluster-name", "fathom-reactivation-" + freePort(t)}
	a := startNode(t, env, common...)
	b := startNode(t, env, common...)

	// Start sessions through A until one is hosted by A (identity hashing decides).
	var ids []string
	victim := ""
	testenv.Eventually(t, 60*time.Second, func() bool {
		id := fmt.Sprintf("kill-%d", len(ids))
		code, body := httpJSON(t, "POST", a.url+"/v1/sessions", token, map[string]any{"goal": "survive a kill", "session_id": id, "command_id": "c1"})
		if code != 201 {
			t.Logf("start %s: %d %v", id, code, body)
			return false
		}
		ids = append(ids, id)
		_, st := httpJSON(t, "GET", a.url+"/v1/sessions/"+id, token, nil)
		if st["host"] == a.member {
			victim = id
		}
		return victim != ""
	}, "no session was placed on node A (%s): %v", a.member, ids)

	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	testenv.Eventually(t, 30*time.Second, func() bool {
		var steps int
		err := conn.QueryRow(context.Background(), `SELECT count(*) FROM fathom_events WHERE stream_id = $1 AND type = 'step_completed'`, victim).Scan(&steps)
		return err == nil && steps >= 1
	}, "session %s never completed a step", victim)

	if err := a.cmd.Process.Kill(); err != nil { // SIGKILL: no leave, no lease release
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	killedAt := time.Now()
	seqAtKill, typAtKill := journalHead(t, conn, victim)
	if typAtKill == "session_completed" {
		t.Fatalf("session %s completed before the kill; make its steps slower", victim)
	}
	testenv.Eventually(t, takeOverBound, func() bool {
		seq, _ := journalHead(t, conn, victim)
		return seq > seqAtKill
	}, "no event of %s was appended within %s of killing its node (stuck at seq %d, %s): its lease was not taken over", victim, takeOverBound, seqAtKill, typAtKill)
	t.Logf("session %s resumed %s after the kill (seq %d, %s)", victim, time.Since(killedAt).Round(time.Millisecond), seqAtKill, typAtKill)

	for _, id := range ids {
		testenv.Eventually(t, 90*time.Second, func() bool {
			_, typ := journalHead(t, conn, id)
			return typ == "session_completed"
		}, "session %s did not complete after node A was killed", id)
		auditJournal(t, dsn, id)
	}
	if code, st := httpJSON(t, "GET", b.url+"/v1/sessions/"+victim, token, nil); code != 200 || st["host"] != b.member {
		t.Fatalf("session %s after the kill: %d, host %v (want %s)", victim, code, st["host"], b.member)
	}
	b.stop(t)
	if !strings.Contains(b.stderr.String(), "reactivator: poked session") { // read once the process ended
		t.Fatalf("node B's log has no reactivator poke")
	}
	if !strings.Contains(b.stderr.String(), "taking over the sessions of a member that left") {
		t.Fatalf("node B's log has no takeover of node A's sessions")
	}
	// A member known dead is one INFO line on the survivor, then silence: no ERROR from
	// Proto.Actor's remoting and no WARN per failed gossip (an ERROR asks an operator to act).
	var noisy []string
	unreachable := 0
	for _, line := range strings.Split(b.stderr.String(), "\n") {
		if !strings.Contains(line, "lib=protoactor") {
			continue
		}
		if strings.Contains(line, "peer unreachable") && strings.Contains(line, "level=INFO") {
			unreachable++
		}
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
			noisy = append(noisy, line)
		}
	}
	if len(noisy) > 0 {
		t.Fatalf("node B logged %d Proto.Actor ERROR/WARN lines about the killed member, e.g. %q", len(noisy), noisy[0])
	}
	if unreachable == 0 || unreachable > 2 {
		t.Fatalf("node B logged %d \"peer unreachable\" lines about the killed member; want one for its address and at most one for its gossip", unreachable)
	}
}
