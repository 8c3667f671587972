package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// pgServer is a private PostgreSQL server started with the project's script, so this
// test can stop and restart it without disturbing the shared test server.
type pgServer struct {
	dir, port, dsn string
}

func startPrivatePostgres(t *testing.T) *pgServer {
	t.Helper()
	testenv.PostgresAdminDSN(t) // skips (or fails under make test) without the test services
	dir, err := os.MkdirTemp("/tmp", "fathom-pg-outage-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // the postgres user must reach it
		t.Fatal(err)
	}
	s := &pgServer{dir: dir, port: freePort(t)}
	t.Cleanup(func() {
		s.run(t, "stop")
		os.RemoveAll(dir)
	})
	s.dsn = strings.TrimSpace(s.run(t, "start"))
	return s
}

func (s *pgServer) run(t *testing.T, verb string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join("..", "..", "scripts", "postgres.sh"), verb, s.dir)
	cmd.Env = append(os.Environ(), "FATHOM_PG_PORT="+s.port, "FATHOM_PG_FAST=0")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("postgres.sh %s: %v\n%s", verb, err, stderr)
	}
	return string(out)
}

// TestPostgresOutageMidRun takes a node's real PostgreSQL server away while a session is
// running: new commands fail with a clear 503, and once the server is back on the same
// address the session finishes with every event stored exactly once.
func TestPostgresOutageMidRun(t *testing.T) {
	testenv.Faults(t)
	pg := startPrivatePostgres(t)
	script, err := mock.ParseScript([]byte(`{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"a\",\"type\":\"research\",\"description\":\"one\"},{\"id\":\"b\",\"type\":\"write\",\"description\":\"two\"},{\"id\":\"c\",\"type\":\"review\",\"description\":\"three\"}]}"},
		{"system_match":"FATHOM-ROLE: (executor|researcher|writer|reviewer)","response":"done {{.Step}}","delay_ms":1500}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var inflight atomic.Int64 // model calls being answered
	h := mock.New(mock.Config{Script: script}).Handler()
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inflight.Add(1)
		defer inflight.Add(-1)
		h.ServeHTTP(w, r)
	}))
	defer model.Close()
	const token = "t"
	n := startNode(t, cleanEnv("OPENAI_BASE_URL="+model.URL+"/v1", "OPENAI_API_KEY=x"), "--postgres", pg.dsn, "--token", token)

	code, body := httpJSON(t, "POST", n.url+"/v1/sessions", token, map[string]any{"goal": "survive an outage", "session_id": "s-outage", "command_id": "c1"})
	if code != 201 {
		t.Fatalf("start: %d %v", code, body)
	}
	status := func() string {
		_, st := httpJSON(t, "GET", n.url+"/v1/sessions/s-outage", token, nil)
		state, _ := st["state"].(map[string]any)
		return fmt.Sprint(state["status"])
	}
	testenv.Eventually(t, 20*time.Second, func() bool { return strings.Contains(status(), "EXECUTING") }, "session never ran: %s", status())

	pg.run(t, "stop") // a step's LLM call is in flight
	code, body = httpJSON(t, "POST", n.url+"/v1/sessions", token, map[string]any{"goal": "while down", "session_id": "s-down", "command_id": "c1"})
	if code != 503 {
		t.Fatalf("start while PostgreSQL is down: %d %v, want 503", code, body)
	}
	// The call in flight finishes while the journal is down (no new one starts: its
	// request could not be recorded).
	testenv.Eventually(t, 30*time.Second, func() bool { return inflight.Load() == 0 }, "a model call is still in flight with PostgreSQL down")
	pg.run(t, "start")

	testenv.Eventually(t, 60*time.Second, func() bool { return strings.Contains(status(), "COMPLETED") }, "session did not complete after PostgreSQL came back: %s", status())
	code, body = httpJSON(t, "POST", n.url+"/v1/sessions", token, map[string]any{"goal": "after", "session_id": "s-down", "command_id": "c1"})
	if code != 201 {
		t.Fatalf("start after PostgreSQL is back: %d %v", code, body)
	}
	n.stop(t)

	r := fathom(t, cleanEnv(), "session", "timeline", "--postgres", pg.dsn, "--json", "s-outage")
	if r.code != 0 {
		t.Fatalf("timeline: %d %s", r.code, r.stderr)
	}
	evs := jsonEvents(t, r.stdout) // checks seq is 1..n without gaps
	checkCompletedRun(t, evs)
	seen := map[string]int{}
	for _, ev := range evs {
		seen[ev["type"].(string)]++
	}
	if seen["step_completed"] != 3 || seen["session_started"] != 1 || seen["session_completed"] != 1 {
		t.Fatalf("events after the outage: %v", seen)
	}
}
