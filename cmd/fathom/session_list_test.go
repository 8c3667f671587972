package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionListColumnsAndFilters: `session list` shows each session's status, cost and
// goal from the journal's index and filters by status and goal text; `session list
// --addr` asks a node's gateway (GET /v1/sessions) with the same filters and pages with
// --cursor; a bad filter is a usage error (exit 2).
func TestSessionListColumnsAndFilters(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	ids := map[string]string{}
	for _, goal := range []string{"Write a haiku about event sourcing", "Explain virtual actors"} {
		r := fathom(t, cleanEnv(), "run", "--data-dir", data, "--json", goal)
		if r.code != 0 {
			t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
		}
		ids[goal] = checkCompletedRun(t, jsonEvents(t, r.stdout))
	}
	haiku, actors := ids["Write a haiku about event sourcing"], ids["Explain virtual actors"]

	ls := fathom(t, cleanEnv(), "session", "list", "--data-dir", data)
	lines := strings.Split(strings.TrimSpace(ls.stdout), "\n")
	if ls.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "SESSION") || !strings.Contains(lines[0], "STATUS") || !strings.Contains(lines[0], "GOAL") {
		t.Fatalf("list (exit %d):\n%s%s", ls.code, ls.stdout, ls.stderr)
	}
	// Newest first, each with its status and goal.
	if !strings.HasPrefix(lines[1], actors) || !strings.Contains(lines[1], "completed") || !strings.Contains(lines[1], "Explain virtual actors") ||
		!strings.HasPrefix(lines[2], haiku) || !strings.Contains(lines[2], "Write a haiku about event sourcing") {
		t.Fatalf("list rows:\n%s", ls.stdout)
	}

	rows := func(r result) []map[string]any {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if l == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			out = append(out, m)
		}
		return out
	}
	got := rows(fathom(t, cleanEnv(), "session", "list", "--data-dir", data, "--json", "--goal", "HAIKU"))
	if len(got) != 1 || got[0]["session_id"] != haiku || got[0]["status"] != "completed" {
		t.Fatalf("--goal HAIKU = %v", got)
	}
	if got := rows(fathom(t, cleanEnv(), "session", "list", "--data-dir", data, "--json", "--status", "failed")); len(got) != 0 {
		t.Fatalf("--status failed = %v", got)
	}
	if got := rows(fathom(t, cleanEnv(), "session", "list", "--data-dir", data, "--json", "--since", "1h")); len(got) != 2 {
		t.Fatalf("--since 1h = %v", got)
	}

	for _, args := range [][]string{{"--status", "sleeping"}, {"--since", "yesterday"}, {"--limit", "5000"}} {
		r := fathom(t, cleanEnv(), append([]string{"session", "list", "--data-dir", data}, args...)...)
		if r.code != 2 {
			t.Errorf("list %v: exit %d, want 2\n%s", args, r.code, r.stderr)
		}
	}

	// Through a node's gateway.
	const tok = "list-token"
	p := startNode(t, cleanEnv(), "--data-dir", data, "--token", tok)
	page := rows(fathom(t, cleanEnv(), "session", "list", "--addr", p.url, "--token", tok, "--json", "--limit", "1"))
	if len(page) != 2 || page[0]["session_id"] != actors || page[0]["goal"] != "Explain virtual actors" || page[1]["next_cursor"] == nil {
		t.Fatalf("first page through the node = %v", page)
	}
	next := rows(fathom(t, cleanEnv(), "session", "list", "--addr", p.url, "--token", tok, "--json", "--limit", "1", "--cursor", page[1]["next_cursor"].(string)))
	if len(next) != 1 || next[0]["session_id"] != haiku {
		t.Fatalf("second page through the node = %v", next)
	}
	got = rows(fathom(t, cleanEnv(), "session", "list", "--addr", p.url, "--token", tok, "--json", "--goal", "virtual", "--status", "completed"))
	if len(got) != 1 || got[0]["session_id"] != actors {
		t.Fatalf("--goal virtual through the node = %v", got)
	}
	text := fathom(t, cleanEnv(), "session", "list", "--addr", p.url, "--token", tok)
	if text.code != 0 || !strings.Contains(text.stdout, "STATUS") || !strings.Contains(text.stdout, haiku) {
		t.Fatalf("text list through the node (exit %d):\n%s%s", text.code, text.stdout, text.stderr)
	}

}
