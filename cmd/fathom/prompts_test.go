package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
)

func writePrompt(t *testing.T, dir, rel, text string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runInProcess(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Loggers of the in-process node and sandbox write from their own goroutines.
	var out, errb testenv.Buffer
	code = Run(ctx, args, &out, &errb)
	return out.String(), errb.String(), code
}

// TestRunRejectsBrokenPrompts: a broken template in --prompts-dir (or
// FATHOM_PROMPTS_DIR) fails `fathom run` with the file and line, before any session or
// journal exists.
func TestRunRejectsBrokenPrompts(t *testing.T) {
	cases := []struct {
		name, rel, text, want string
		env                   bool
	}{
		{"syntax error", "coder.md.tmpl", "FATHOM-ROLE: coder\n\nGoal: {{.Goal}\n", ":3: bad character U+007D '}'", false},
		{"missing field", "orchestrator.md.tmpl", "FATHOM-ROLE: orchestrator\n{{.Plan}}\n", ":2:2: executing \"orchestrator\" at <.Plan>: can't evaluate field Plan", false},
		{"missing field in a partial, by env", "_shared/tool_guidelines.md.tmpl", "tools:\n{{range .Tools}}{{.Name}}{{end}}", ":2:", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, "data")
			file := writePrompt(t, filepath.Join(dir, "prompts"), c.rel, c.text)
			args := []string{"run", "--data-dir", data, "goal"}
			if c.env {
				t.Setenv("FATHOM_PROMPTS_DIR", filepath.Join(dir, "prompts"))
			} else {
				args = append(args[:1], append([]string{"--prompts-dir", filepath.Join(dir, "prompts")}, args[1:]...)...)
			}
			_, stderr, code := runInProcess(t, args...)
			if code != 1 || !strings.Contains(stderr, file+c.want) {
				t.Fatalf("exit %d, stderr does not name %s%s:\n%s", code, file, c.want, stderr)
			}
			if _, err := os.Stat(filepath.Join(data, "journal.db")); !os.IsNotExist(err) {
				t.Fatalf("a journal was opened before the prompts were checked (%v)", err)
			}
		})
	}
}

// TestRunWithAPromptOverride: a valid override of one template is loaded (and logged)
// and the demo session still completes with the other templates' defaults.
func TestRunWithAPromptOverride(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writePrompt(t, filepath.Join(dir, "prompts"), "_shared/hitl_protocols.md.tmpl", "## Asking a human\nNever ask; decide and say so.\n")
	writePrompt(t, filepath.Join(dir, "prompts"), "notes.txt", "not a template")
	stdout, stderr, code := runInProcess(t, "run", "--data-dir", filepath.Join(dir, "data"), "--prompts-dir", filepath.Join(dir, "prompts"),
		"--log-level", "info", "--json", "Write a haiku about prompts")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "prompt templates overridden") || !strings.Contains(stderr, "_shared/hitl_protocols") {
		t.Fatalf("the override was not reported:\n%s", stderr)
	}
	checkCompletedRun(t, jsonEvents(t, stdout))
}
