package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestSessionCancel: `fathom session cancel ID` ends a session waiting for a human, over
// the data dir and through a node (--addr), recording session_cancelled with --reason
// and --by; the cancelled session is terminal (a second cancel is refused), and a
// missing ID is a usage error.
func TestSessionCancel(t *testing.T) {
	t.Parallel()
	env := humanModel(t)
	data := filepath.Join(t.TempDir(), "data")
	if r := fathom(t, env, "run", "--data-dir", data, "--json", "--session-id", "c1", "print copies"); r.code != 3 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	r := fathom(t, env, "session", "cancel", "--data-dir", data, "--reason", "not needed", "--by", "alice", "c1")
	if r.code != 0 || !strings.Contains(r.stdout, "session c1 cancelled (seq ") {
		t.Fatalf("cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ls := fathom(t, env, "session", "list", "--data-dir", data, "--json")
	var row map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(ls.stdout)), &row); err != nil || row["session_id"] != "c1" || row["status"] != "cancelled" {
		t.Fatalf("list after cancel: %v %v\n%s", row, err, ls.stdout)
	}
	evs := jsonEvents(t, fathom(t, env, "session", "timeline", "--data-dir", data, "--json", "c1").stdout)
	last := evs[len(evs)-1]
	if last["type"] != "session_cancelled" || last["reason"] != "not needed" || last["by"] != "alice" {
		t.Fatalf("last event %v", last)
	}
	if again := fathom(t, env, "session", "cancel", "--data-dir", data, "c1"); again.code != 1 || !strings.Contains(again.stderr, "failed_precondition") {
		t.Fatalf("cancel of a cancelled session: exit %d\n%s", again.code, again.stderr)
	}
	if none := fathom(t, env, "session", "cancel", "--data-dir", data); none.code != 2 {
		t.Fatalf("cancel without ID: exit %d", none.code)
	}

	const tok = "cancel-token"
	p := startNode(t, env, "--data-dir", filepath.Join(t.TempDir(), "node"), "--token", tok)
	if code, body := httpJSON(t, "POST", p.url+"/v1/sessions", tok, map[string]any{"goal": "print copies", "session_id": "c2"}); code != 201 {
		t.Fatalf("start: %d %v", code, body)
	}
	status := func() any {
		_, st := httpJSON(t, "GET", p.url+"/v1/sessions/c2", tok, nil)
		state, _ := st["state"].(map[string]any)
		return state["status"]
	}
	testenv.Eventually(t, 20*time.Second, func() bool { return status() == "SESSION_STATUS_AWAITING_HUMAN" }, "c2 never waited for a human")
	res := fathom(t, cleanEnv(), "session", "cancel", "--addr", p.url, "--token", tok, "--reason", "operator stop", "c2")
	if res.code != 0 {
		t.Fatalf("cancel --addr: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if s := status(); s != "SESSION_STATUS_CANCELLED" {
		t.Fatalf("c2 after cancel --addr: %v", s)
	}
}
