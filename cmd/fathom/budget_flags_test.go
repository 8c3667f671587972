package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDefaultMaxLLMCallsFitsDeepAgents: without --max-llm-calls (or its variable) the
// session budget leaves room for --max-iterations and a full plan run by the deepest
// agent, never less than 200; the flag and the variable set it exactly (0: unlimited).
func TestDefaultMaxLLMCallsFitsDeepAgents(t *testing.T) {
	deep := filepath.Join(t.TempDir(), "fathom.yaml")
	if err := os.WriteFile(deep, []byte("agents:\n  - name: deep\n    description: digs\n    prompt: You dig.\n    max_iterations: 500\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, env string
		args      []string
		want      uint32
	}{
		{"default", "", nil, 200},
		{"deep agent", "", []string{"--config", deep}, 20 + 10*500},
		{"deep sub-agents", "", []string{"--subagent-max-iterations", "300", "--max-steps", "4", "--max-iterations", "30"}, 30 + 4*300},
		{"flag", "", []string{"--config", deep, "--max-llm-calls", "50"}, 50},
		{"unlimited", "", []string{"--config", deep, "--max-llm-calls", "0"}, 0},
		{"env", "70", []string{"--config", deep}, 70},
		{"flag wins", "70", []string{"--max-llm-calls", "9"}, 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("FATHOM_MAX_LLM_CALLS", c.env)
			cfg, err := nodeConfig(t, "", c.args...)
			configErr(t, err, "")
			if cfg.Session.MaxLLMCalls != c.want {
				t.Fatalf("max_llm_calls %d, want %d", cfg.Session.MaxLLMCalls, c.want)
			}
		})
	}
}

// TestBudgetFailureNamesTheFlag: a session stopped by its LLM-call budget says which
// flag raises it.
func TestBudgetFailureNamesTheFlag(t *testing.T) {
	t.Parallel()
	r := fathom(t, cleanEnv(), "run", "--data-dir", t.TempDir(), "--max-llm-calls", "1", "Explain virtual actors")
	if r.code != 1 || !strings.Contains(r.stderr, "session budget exceeded") || !strings.Contains(r.stderr, "--max-llm-calls (env FATHOM_MAX_LLM_CALLS)") {
		t.Fatalf("exit %d, want 1 naming --max-llm-calls:\n%s", r.code, r.stderr)
	}
}

// TestBoundFlagsSayWhatTheyBound: -h says what --max-iterations bounds (the
// orchestrator's calls of a turn, not the session's) and what --at means (right after
// step number N, not after N steps).
func TestBoundFlagsSayWhatTheyBound(t *testing.T) {
	t.Parallel()
	h := fathom(t, cleanEnv(), "run", "-h")
	line := regexp.MustCompile(`(?m)^  -max-iterations uint\n.*$`).FindString(h.stderr)
	if !strings.Contains(line, "orchestrator in one turn") || !strings.Contains(line, "--max-llm-calls") || strings.Contains(line, "per session") {
		t.Fatalf("--max-iterations help: %q", line)
	}
	for _, sub := range []string{"state", "fork"} {
		h := fathom(t, cleanEnv(), "session", sub, "-h")
		line := regexp.MustCompile(`(?m)^  -at int\n.*$`).FindString(h.stderr)
		if !strings.Contains(line, "right after step number N ended") || !strings.Contains(line, "--at 3") {
			t.Fatalf("session %s --at help: %q", sub, line)
		}
	}
}
