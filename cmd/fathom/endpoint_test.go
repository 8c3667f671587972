package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionInputKeepsTheEndpoint: a session started against an OpenAI-compatible
// server is not finished on the built-in demo model by a `session input` that has no
// endpoint configured: it is refused with a clear error (the answer is not recorded),
// and continues there only with --allow-endpoint-change.
func TestSessionInputKeepsTheEndpoint(t *testing.T) {
	t.Parallel()
	env := humanModel(t)
	data := filepath.Join(t.TempDir(), "data")
	r := fathom(t, env, "run", "--data-dir", data, "--json", "--session-id", "e1", "print copies")
	if r.code != 3 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	demo := cleanEnv() // no OPENAI_BASE_URL, no key: the demo model
	refused := fathom(t, demo, "session", "input", "--data-dir", data, "e1", "ask", `{"n": 3}`)
	if refused.code == 0 || !strings.Contains(refused.stderr, "was started on openai at http://127.0.0.1:") ||
		!strings.Contains(refused.stderr, "configured for demo") || !strings.Contains(refused.stderr, "--allow-endpoint-change") {
		t.Fatalf("input on the demo model: exit %d\n%s%s", refused.code, refused.stdout, refused.stderr)
	}
	state := fathom(t, demo, "session", "state", "--data-dir", data, "e1")
	if !strings.Contains(state.stdout, "awaiting_human") && !strings.Contains(state.stdout, "AWAITING_HUMAN") {
		t.Fatalf("the refused answer changed the session:\n%s", state.stdout)
	}
	allowed := fathom(t, demo, "session", "input", "--data-dir", data, "--allow-endpoint-change", "e1", "ask", `{"n": 3}`)
	if allowed.code != 0 || !strings.Contains(allowed.stdout, "✓ session completed") {
		t.Fatalf("input with --allow-endpoint-change: exit %d\n%s%s", allowed.code, allowed.stdout, allowed.stderr)
	}
}
