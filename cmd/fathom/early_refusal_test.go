package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCancelAndDeleteRefusedBeforeANodeStarts: a cancel or delete the session would
// refuse is refused from the journal, before an in-process node starts (an unknown
// session leaves no data dir behind), and neither prints the demo-model notice.
func TestCancelAndDeleteRefusedBeforeANodeStarts(t *testing.T) {
	t.Parallel()
	empty := filepath.Join(t.TempDir(), "data")
	for _, sub := range []string{"cancel", "delete"} {
		r := fathom(t, cleanEnv(), "session", sub, "--data-dir", empty, "no-such")
		if r.code != 1 || !strings.Contains(r.stderr, `session "no-such" not found`) || strings.Contains(r.stderr, "no model API key") {
			t.Fatalf("%s of an unknown session: exit %d\n%s", sub, r.code, r.stderr)
		}
		if _, err := os.Stat(empty); !os.IsNotExist(err) {
			t.Fatalf("%s of an unknown session started a node: the data dir exists (%v)", sub, err)
		}
	}
	data := t.TempDir()
	if r := fathom(t, cleanEnv(), "run", "--data-dir", data, "--session-id", "done-1", "Write a haiku"); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	r := fathom(t, cleanEnv(), "session", "cancel", "--data-dir", data, "done-1")
	if r.code != 1 || !strings.Contains(r.stderr, "failed_precondition") || !strings.Contains(r.stderr, "has ended") || strings.Contains(r.stderr, "no model API key") {
		t.Fatalf("cancel of a completed session: exit %d\n%s", r.code, r.stderr)
	}
	r = fathom(t, cleanEnv(), "session", "delete", "--data-dir", data, "done-1")
	if r.code != 0 || strings.Contains(r.stderr, "no model API key") {
		t.Fatalf("delete of a completed session: exit %d\n%s", r.code, r.stderr)
	}
}
