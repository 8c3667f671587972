package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunOnTheMemoryJournal: `fathom run --journal memory` completes a session on the
// built-in demo model with its events in memory: no journal file is written. The same
// journal is chosen by FATHOM_JOURNAL and by the config file's journal key.
func TestRunOnTheMemoryJournal(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	r := fathom(t, cleanEnv(), "run", "--journal", "memory", "--data-dir", data, "--json", "Write a haiku about event sourcing")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	checkCompletedRun(t, jsonEvents(t, r.stdout))
	if _, err := os.Stat(filepath.Join(data, "journal.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the memory journal wrote a journal file: %v", err)
	}

	r = fathom(t, cleanEnv("FATHOM_JOURNAL=memory"), "run", "--data-dir", data, "Explain virtual actors")
	if r.code != 0 || !strings.Contains(r.stdout, "(events in memory, lost when fathom exits)") || !strings.Contains(r.stdout, "session completed") {
		t.Fatalf("FATHOM_JOURNAL=memory: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	cfg := filepath.Join(t.TempDir(), "fathom.yaml")
	if err := os.WriteFile(cfg, []byte("journal: memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = fathom(t, cleanEnv(), "run", "--config", cfg, "--data-dir", data, "Explain virtual actors")
	if r.code != 0 || !strings.Contains(r.stdout, "(events in memory, lost when fathom exits)") {
		t.Fatalf("journal: memory in --config: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "journal.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the memory journal wrote a journal file: %v", err)
	}
}

// TestUnknownJournalIsRefused: a journal name no backend has is refused before a node
// starts, with the valid names; the memory journal cannot be read from another process.
func TestUnknownJournalIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "fathom.yaml")
	if err := os.WriteFile(cfg, []byte("journal: sqlite\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"flag", nil, []string{"run", "--data-dir", dir, "--journal", "sqlite", "goal"}, 2, `bad --journal "sqlite": want bolt, memory or postgres`},
		{"env", []string{"FATHOM_JOURNAL=sqlite"}, []string{"run", "--data-dir", dir, "goal"}, 2, `bad --journal "sqlite": want bolt, memory or postgres`},
		{"config key", nil, []string{"run", "--data-dir", dir, "--config", cfg, "goal"}, 2, `journal: "sqlite" is not a journal (want bolt, memory or postgres)`},
		{"reader", nil, []string{"session", "list", "--data-dir", dir, "--journal", "sqlite"}, 2, `bad --journal "sqlite": want bolt, memory or postgres`},
		{"postgres without a DSN", nil, []string{"run", "--data-dir", dir, "--journal", "postgres", "goal"}, 1, "needs a PostgreSQL DSN"},
		{"reading the memory journal", nil, []string{"session", "list", "--journal", "memory"}, 1, "the memory journal keeps its sessions only inside the running node"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := fathom(t, cleanEnv(c.env...), c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("exit %d (want %d), stderr does not say %q:\n%s", r.code, c.code, c.want, r.stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "journal.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused journal name still opened the embedded journal: %v", err)
	}
}

// TestRunOnTheMemoryJournalWaitingForAHuman: a session of `fathom run --journal memory`
// that waits for a human exits 3 saying the session is lost with the process, not that
// it is saved for `fathom session input`.
func TestRunOnTheMemoryJournalWaitingForAHuman(t *testing.T) {
	t.Parallel()
	r := fathom(t, humanModel(t), "run", "--journal", "memory", "--data-dir", filepath.Join(t.TempDir(), "data"), "print copies")
	if r.code != exitAwaitingHuman || strings.Contains(r.stderr, "it is saved") ||
		!strings.Contains(r.stderr, "the memory journal keeps nothing after fathom exits: the session is lost") {
		t.Fatalf("exit %d (want %d), stderr:\n%s", r.code, exitAwaitingHuman, r.stderr)
	}
}
