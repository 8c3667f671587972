package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm/mock"
)

// TestSessionInputWithoutTheConfigIsRefused: a session waits for approval of a call its
// config agent made; `fathom session input` without the session's --config is refused
// (exit 1, naming the agent) and changes nothing: the session keeps waiting, and the
// answer given with the flags the run's hint names completes it.
func TestSessionInputWithoutTheConfigIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "fathom.yaml")
	cfg := "agents:\n  - name: analyst\n    description: Reads order data\n    prompt_file: analyst.md.tmpl\n    tools: [write_artifact]\napproval:\n  tools: [write_artifact]\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "analyst.md.tmpl"), []byte(analystPromptFile), 0o600); err != nil {
		t.Fatal(err)
	}
	handoff := "Done.\n```json\n" + `{"status":"completed","summary":"saved","recommendations":[],"blockers":[],"confidence":0.9}` + "\n```"
	base := startMockLLM(t, scriptJSON(t, mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-PHASE: synthesize", Response: "Saved."},
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"s1","type":"analyst","description":"save the notes","dependencies":[]}]}`},
		{SystemMatch: "(?s)FATHOM-ROLE: analyst", ToolMatch: ".", Response: handoff},
		{SystemMatch: "(?s)FATHOM-ROLE: analyst", ToolCalls: []mock.ToolCallRule{{Name: "write_artifact", Arguments: `{"type":"research","filename":"n.md","content":"x"}`}}},
	}, Default: "nothing scripted"}))
	env := cleanEnv("OPENAI_BASE_URL="+base, "OPENAI_API_KEY=k", "FATHOM_MODEL=mock-model")
	data := filepath.Join(dir, "data")
	r := fathom(t, env, "run", "--config", cfgPath, "--data-dir", data, "--session-id", "h1", "save notes")
	if r.code != exitAwaitingHuman {
		t.Fatalf("run: exit %d, want %d\n%s\n%s", r.code, exitAwaitingHuman, r.stdout, r.stderr)
	}
	// The hint names every flag the answer needs: the journal and the config.
	if !strings.Contains(r.stderr, "fathom session input --config "+cfgPath+" --data-dir "+data+" h1 s1 JSON") {
		t.Fatalf("the hint does not name --config and --data-dir:\n%s", r.stderr)
	}
	status := func() string {
		t.Helper()
		st := fathom(t, env, "session", "state", "--data-dir", data, "h1")
		var s map[string]any
		if err := json.Unmarshal([]byte(st.stdout), &s); err != nil {
			t.Fatalf("state: %v\n%s%s", err, st.stdout, st.stderr)
		}
		return s["status"].(string)
	}
	answer := `{"decision":"approve"}`
	bad := fathom(t, env, "session", "input", "--data-dir", data, "h1", "s1", answer)
	if bad.code != 1 || !strings.Contains(bad.stderr, "agent analyst") || !strings.Contains(bad.stderr, "--config") {
		t.Fatalf("input without --config: exit %d, want 1 naming the agent\n%s%s", bad.code, bad.stdout, bad.stderr)
	}
	if s := status(); s != "SESSION_STATUS_AWAITING_HUMAN" {
		t.Fatalf("after the refused input the session is %s, want it still waiting", s)
	}
	good := fathom(t, env, "session", "input", "--config", cfgPath, "--data-dir", data, "h1", "s1", answer)
	if good.code != 0 || status() != "SESSION_STATUS_COMPLETED" {
		t.Fatalf("input with --config: exit %d\n%s%s", good.code, good.stdout, good.stderr)
	}
}
