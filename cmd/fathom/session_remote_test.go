package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionWatchAndStateAtStep: after a run, `session watch` prints exactly the stored
// events and exits 0 at session_completed, both from the journal and through a node's
// gateway; `session state --at N` is the state after N steps (0: after planning), and
// the node gives the same answer over HTTP.
func TestSessionWatchAndStateAtStep(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	r := fathom(t, cleanEnv(), "run", "--data-dir", data, "--json", "Write a haiku about event sourcing")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	id := checkCompletedRun(t, jsonEvents(t, r.stdout))

	w := fathom(t, cleanEnv(), "session", "watch", "--data-dir", data, "--json", id)
	if w.code != 0 || w.stdout != r.stdout {
		t.Fatalf("watch from the journal (exit %d) differs from the run:\n%s\nvs\n%s\n%s", w.code, w.stdout, r.stdout, w.stderr)
	}
	w = fathom(t, cleanEnv(), "session", "watch", "--data-dir", data, "--json", "--from", "5", id)
	if lines := strings.SplitAfter(r.stdout, "\n"); w.code != 0 || w.stdout != strings.Join(lines[5:], "") {
		t.Fatalf("watch --from 5 (exit %d) is not the run's events after seq 5:\n%s", w.code, w.stdout)
	}

	stateAt := func(args ...string) map[string]any {
		t.Helper()
		res := fathom(t, cleanEnv(), append([]string{"session", "state"}, args...)...)
		var m map[string]any
		if err := json.Unmarshal([]byte(res.stdout), &m); err != nil || res.code != 0 {
			t.Fatalf("state %v (exit %d): %v\n%s%s", args, res.code, err, res.stdout, res.stderr)
		}
		return m
	}
	plan := stateAt("--data-dir", data, "--at", "0", id)
	one := stateAt("--data-dir", data, "--at", "1", id)
	steps := func(m map[string]any) []any { return m["steps"].([]any) }
	status := func(m map[string]any, i int) any { return steps(m)[i].(map[string]any)["status"] }
	if plan["plan_seq"] != plan["seq"] || status(plan, 0) != "STEP_STATUS_PENDING" {
		t.Fatalf("--at 0 is not the state after planning: %v", plan)
	}
	if status(one, 0) != "STEP_STATUS_COMPLETED" || status(one, 1) != "STEP_STATUS_PENDING" || steps(one)[0].(map[string]any)["ended_seq"] != one["seq"] {
		t.Fatalf("--at 1 is not the state after step 1: %v", one)
	}
	if res := fathom(t, cleanEnv(), "session", "state", "--data-dir", data, "--at", "9", id); res.code != 1 || !strings.Contains(res.stderr, "past the plan") {
		t.Fatalf("--at past the plan: exit %d %s", res.code, res.stderr)
	}

	// The same through a node's gateway.
	const tok = "watch-token"
	p := startNode(t, cleanEnv(), "--data-dir", data, "--token", tok)
	w = fathom(t, cleanEnv(), "session", "watch", "--addr", p.url, "--token", tok, "--json", id)
	if w.code != 0 || w.stdout != r.stdout {
		t.Fatalf("watch through the node (exit %d) differs from the run:\n%s\nvs\n%s\n%s", w.code, w.stdout, r.stdout, w.stderr)
	}
	res := fathom(t, cleanEnv(), "session", "state", "--addr", p.url, "--token", tok, "--at", "1", id)
	var remote map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &remote); err != nil || res.code != 0 {
		t.Fatalf("state --addr (exit %d): %v\n%s%s", res.code, err, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stdout, `"ended_seq"`) || !strings.Contains(res.stdout, "STEP_STATUS_COMPLETED") {
		t.Fatalf("state --addr --at 1: %s", res.stdout)
	}
	if res := fathom(t, cleanEnv(), "session", "watch", "--addr", p.url, "--token", "wrong", id); res.code != 1 || !strings.Contains(res.stderr, "401") {
		t.Fatalf("watch with a wrong token: exit %d %s", res.code, res.stderr)
	}
}
