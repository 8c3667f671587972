package main

import (
	"strings"
	"testing"
	"time"
)

// TestUsageErrorPrintsOneLine: a bad command line prints the error and one line of
// usage, not every flag; -h still lists the flags.
func TestUsageErrorPrintsOneLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args       []string
		want, line string
	}{
		{[]string{"run", "--no-such-flag", "goal"}, "no-such-flag", "Usage: fathom run [flags] GOAL"},
		{[]string{"run", "--data-dir", t.TempDir()}, "a goal is required", "Usage: fathom run [flags] GOAL"},
		{[]string{"session", "input", "--bogus", "s", "st", "{}"}, "bogus", "Usage: fathom session input "},
		{[]string{"session", "cancel"}, "exactly one session ID", "fathom session cancel -h"},
		{[]string{"node", "--max-iterations", "many"}, "max-iterations", "Usage: fathom node [flags]"},
	} {
		r := fathom(t, cleanEnv(), c.args...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 2 || len(lines) != 2 || !strings.Contains(lines[0], c.want) || !strings.Contains(lines[1], c.line) {
			t.Errorf("%v: exit %d, want 2 with the error and one usage line (%q); stderr (%d lines):\n%s", c.args, r.code, c.line, len(lines), r.stderr)
		}
	}
	if r := fathom(t, cleanEnv(), "run", "-h"); r.code != 0 || !strings.Contains(r.stderr, "-max-llm-calls") || !strings.HasPrefix(r.stderr, "Usage: fathom run") {
		t.Fatalf("run -h (exit %d) does not list the flags:\n%s", r.code, r.stderr)
	}
}

// TestHelpListsEveryCommand: `fathom help` names every command and every session
// subcommand.
func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	r := fathom(t, cleanEnv(), "help")
	if r.code != 0 {
		t.Fatalf("help: exit %d\n%s", r.code, r.stderr)
	}
	for _, c := range commands() {
		if !strings.Contains(r.stdout, "  "+c.name+" ") {
			t.Errorf("help lacks the command %s:\n%s", c.name, r.stdout)
		}
	}
	for _, sub := range []string{"list", "timeline", "state", "watch", "artifacts", "input", "fork", "send", "cancel", "delete"} {
		if !strings.Contains(r.stdout, "    "+sub+" ") {
			t.Errorf("help lacks session %s:\n%s", sub, r.stdout)
		}
		if h := fathom(t, cleanEnv(), "session", sub, "-h"); h.code != 0 {
			t.Errorf("session %s -h: exit %d", sub, h.code)
		}
	}
}

// TestSessionTimelineAddrPrintsTheTable: `session timeline --addr` prints the same
// table (and the same JSON) as reading the journal.
func TestSessionTimelineAddrPrintsTheTable(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	r := fathom(t, cleanEnv(), "run", "--data-dir", data, "--session-id", "s-tl", "Explain virtual actors")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	local := fathom(t, cleanEnv(), "session", "timeline", "--data-dir", data, "s-tl")
	localJSON := fathom(t, cleanEnv(), "session", "timeline", "--data-dir", data, "--json", "s-tl")
	if local.code != 0 || localJSON.code != 0 || !strings.Contains(local.stdout, "session_completed") {
		t.Fatalf("local timeline: exit %d/%d\n%s%s", local.code, localJSON.code, local.stdout, local.stderr)
	}
	n := startNode(t, cleanEnv(), "--data-dir", data)
	remote := fathom(t, cleanEnv(), "session", "timeline", "--addr", n.url, "s-tl")
	if remote.code != 0 || remote.stdout != local.stdout {
		t.Fatalf("timeline --addr (exit %d) differs from the journal's:\n%s\nvs\n%s\n%s", remote.code, remote.stdout, local.stdout, remote.stderr)
	}
	remoteJSON := fathom(t, cleanEnv(), "session", "timeline", "--addr", n.url, "--json", "s-tl")
	if remoteJSON.code != 0 || remoteJSON.stdout != localJSON.stdout {
		t.Fatalf("timeline --addr --json (exit %d) differs from the journal's:\n%s\nvs\n%s", remoteJSON.code, remoteJSON.stdout, localJSON.stdout)
	}
	if r := fathom(t, cleanEnv(), "session", "timeline", "--addr", n.url, "no-such"); r.code != 1 {
		t.Fatalf("timeline --addr of an unknown session: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestRunUnreachableModelFailsFast: a model base URL that refuses connections (a typo)
// fails the command within seconds, naming the variable.
func TestRunUnreachableModelFailsFast(t *testing.T) {
	t.Parallel()
	base := "http://127.0.0.1:" + freePort(t) + "/v1"
	began := time.Now()
	r := fathom(t, cleanEnv("OPENAI_BASE_URL="+base, "OPENAI_API_KEY=k"), "run", "--data-dir", t.TempDir(), "goal")
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("took %s to fail (want ≤ 10 s)", d)
	}
	if r.code != 1 || !strings.Contains(r.stderr, "OPENAI_BASE_URL="+base) || !strings.Contains(r.stderr, "refused") {
		t.Fatalf("exit %d, want 1 naming OPENAI_BASE_URL:\n%s", r.code, r.stderr)
	}
}
