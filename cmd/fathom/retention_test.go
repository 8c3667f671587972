package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestRetentionJanitorDeletesEndedSessions: `fathom node --retention 1s` deletes a
// completed session (its events, index row, artifacts and their directory) once its
// last event is a second old; a bad --retention or FATHOM_RETENTION is a usage error (exit 2).
func TestRetentionJanitorDeletesEndedSessions(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	r := fathom(t, cleanEnv(), "run", "--data-dir", data, "--json", "Write a haiku about event sourcing")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	id := checkCompletedRun(t, jsonEvents(t, r.stdout))
	arts := filepath.Join(data, "artifacts", "tenants", "default", id)
	if files, err := filepath.Glob(filepath.Join(arts, "*", "*")); err != nil || len(files) == 0 {
		t.Fatalf("the run left no artifacts to delete: %v %v", files, err)
	}

	for _, c := range []struct {
		env  []string
		args []string
	}{
		{cleanEnv(), []string{"--retention", "soon"}},
		{cleanEnv(), []string{"--retention", "-1h"}},
		{cleanEnv("FATHOM_RETENTION=3 weeks"), nil},
	} {
		res := fathom(t, c.env, append([]string{"node", "--listen", "127.0.0.1:0", "--data-dir", data}, c.args...)...)
		if res.code != 2 || !strings.Contains(strings.ToLower(res.stderr), "retention") {
			t.Errorf("node %v (env %v): exit %d, want 2 naming the retention\n%s", c.args, c.env[len(c.env)-1], res.code, res.stderr)
		}
	}

	const tok = "retention-token"
	p := startNode(t, cleanEnv(), "--data-dir", data, "--token", tok, "--retention", "1s")
	testenv.Eventually(t, 30*time.Second, func() bool {
		ls := fathom(t, cleanEnv(), "session", "list", "--addr", p.url, "--token", tok, "--json")
		return ls.code == 0 && strings.TrimSpace(ls.stdout) == ""
	}, "the completed session is still listed after its retention of 1s")
	p.stop(t)
	if !strings.Contains(p.stderr.String(), "janitor: deleted sessions past their retention") {
		t.Errorf("no janitor log line:\n%s", p.stderr)
	}
	var left []string
	_ = filepath.WalkDir(arts, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, path)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("artifacts of %s left: %v", id, left)
	}
	if _, err := os.Stat(arts); !os.IsNotExist(err) {
		t.Errorf("the artifact directory of %s is left behind (%v)", id, err)
	}
	tl := fathom(t, cleanEnv(), "session", "timeline", "--data-dir", data, id)
	if tl.code != 1 || !strings.Contains(tl.stderr, "not found") {
		t.Errorf("timeline after the janitor: exit %d\n%s%s", tl.code, tl.stdout, tl.stderr)
	}
}

// TestSessionDelete: `fathom session delete ID` removes an ended session, its artifacts
// and their directory on the data dir and, with --addr, through a node's gateway; an
// unknown session exits 1 either way.
func TestSessionDelete(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	var ids []string
	for i := 0; i < 2; i++ {
		r := fathom(t, cleanEnv(), "run", "--data-dir", data, "--json", "Write a haiku about event sourcing")
		if r.code != 0 {
			t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
		}
		ids = append(ids, checkCompletedRun(t, jsonEvents(t, r.stdout)))
	}
	artDir := func(id string) string { return filepath.Join(data, "artifacts", "tenants", "default", id) }
	for _, id := range ids {
		if files, err := filepath.Glob(filepath.Join(artDir(id), "*", "*")); err != nil || len(files) == 0 {
			t.Fatalf("the run of %s left no artifacts to delete: %v %v", id, files, err)
		}
	}
	gone := func(id string) {
		t.Helper()
		if _, err := os.Stat(artDir(id)); !os.IsNotExist(err) {
			t.Fatalf("the artifact directory of deleted session %s is left behind (%v)", id, err)
		}
	}
	d := fathom(t, cleanEnv(), "session", "delete", "--data-dir", data, ids[0])
	if d.code != 0 || !strings.Contains(d.stdout, "deleted session "+ids[0]) {
		t.Fatalf("delete on the data dir: exit %d\n%s%s", d.code, d.stdout, d.stderr)
	}
	gone(ids[0])
	if tl := fathom(t, cleanEnv(), "session", "timeline", "--data-dir", data, ids[0]); tl.code != 1 {
		t.Fatalf("timeline of the deleted session: exit %d\n%s", tl.code, tl.stdout)
	}
	if d := fathom(t, cleanEnv(), "session", "delete", "--data-dir", data, ids[0]); d.code != 1 || !strings.Contains(d.stderr, "not found") {
		t.Fatalf("second delete: exit %d\n%s", d.code, d.stderr)
	}

	const tok = "delete-token"
	p := startNode(t, cleanEnv(), "--data-dir", data, "--token", tok)
	d = fathom(t, cleanEnv(), "session", "delete", "--addr", p.url, "--token", tok, "--json", ids[1])
	if d.code != 0 || !strings.Contains(d.stdout, `"deleted":true`) {
		t.Fatalf("delete through the node: exit %d\n%s%s", d.code, d.stdout, d.stderr)
	}
	gone(ids[1])
	if d := fathom(t, cleanEnv(), "session", "delete", "--addr", p.url, "--token", tok, ids[1]); d.code != 1 || !strings.Contains(d.stderr, "404") {
		t.Fatalf("second delete through the node: exit %d\n%s", d.code, d.stderr)
	}
	if ls := fathom(t, cleanEnv(), "session", "list", "--addr", p.url, "--token", tok, "--json"); ls.code != 0 || strings.TrimSpace(ls.stdout) != "" {
		t.Fatalf("list after deleting both: exit %d\n%s", ls.code, ls.stdout)
	}
}
