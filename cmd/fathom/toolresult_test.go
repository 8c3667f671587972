package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm/mock"
)

// TestMaxToolResultBytes: --max-tool-result-bytes, env FATHOM_MAX_TOOL_RESULT_BYTES and
// the configuration file's max_tool_result_bytes (in that order of precedence) cap what
// a session records of a tool result. code_execute prints 300,000 bytes ("xxxxxxxxx "
// repeated) in the local
// sandbox: under a 4 KiB cap its tool_result keeps the head and tail around the note
// naming the artifact results/{call_id} and the full size, and `fathom session
// artifacts` lists and downloads the whole result; under a cap above it the result is
// recorded whole. Bad values are usage errors (exit 2).
func TestMaxToolResultBytes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeConfig := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	small, large := writeConfig("small.yaml", "max_tool_result_bytes: 4096\n"), writeConfig("large.yaml", "max_tool_result_bytes: 983040\n")
	bad := writeConfig("bad.yaml", "approval:\n  tools: [code_execute]\nmax_tool_result_bytes: 12\n")
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{cleanEnv(), []string{"--max-tool-result-bytes", "5"}, "--max-tool-result-bytes 5"},
		{cleanEnv(), []string{"--max-tool-result-bytes", "2000000"}, "--max-tool-result-bytes 2000000"},
		{cleanEnv("FATHOM_MAX_TOOL_RESULT_BYTES=big"), nil, "FATHOM_MAX_TOOL_RESULT_BYTES"},
		{cleanEnv(), []string{"--config", bad}, "bad.yaml:3: max_tool_result_bytes"},
	} {
		r := fathom(t, c.env, append(append([]string{"run", "--data-dir", filepath.Join(dir, "refused")}, c.args...), "hi")...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("run %v (env %s): exit %d, want 2 naming %q\n%s", c.args, c.env[len(c.env)-1], r.code, c.want, r.stderr)
		}
	}

	const printed = 300000
	base := startMockLLM(t, scriptJSON(t, mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"s","type":"custom","description":"print a lot"}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: `\[truncated: \d+ bytes; full result stored as artifact \S+/results/call_`, Response: "saw the note"},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: "(x{9} ){100}", Response: "saw it whole"},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: ".", Response: "saw neither"},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: []mock.ToolCallRule{{Name: "code_execute",
			Arguments: fmt.Sprintf(`{"language":"python","code":"print('xxxxxxxxx ' * %d)"}`, printed/10)}}},
	}}))
	// run returns the session's one tool_result and the step's output.
	run := func(data string, env []string, args ...string) (id string, result map[string]any, output string) {
		t.Helper()
		r := fathom(t, append(env, "OPENAI_BASE_URL="+base, "OPENAI_API_KEY=k"), append(append([]string{"run", "--data-dir", data}, args...), "--json", "print a lot")...)
		if r.code != 0 {
			t.Fatalf("run %v: exit %d\n%s", args, r.code, r.stderr)
		}
		evs := jsonEvents(t, r.stdout)
		id = checkCompletedRun(t, evs)
		for _, ev := range evs {
			switch ev["type"] {
			case "tool_result":
				if result != nil {
					t.Fatalf("more than one tool_result:\n%s", r.stdout)
				}
				result = ev
			case "step_completed":
				output, _ = ev["output"].(string)
			}
		}
		if result == nil || result["error"] != nil {
			t.Fatalf("tool_result %v", result)
		}
		return id, result, output
	}

	// The flag wins over a bad environment value and the file.
	data := filepath.Join(dir, "capped")
	id, res, out := run(data, cleanEnv("FATHOM_MAX_TOOL_RESULT_BYTES=big"), "--config", large, "--max-tool-result-bytes", "4096")
	text, _ := res["result"].(string)
	m := regexp.MustCompile(`\[truncated: (\d+) bytes; full result stored as artifact (\S+) `).FindStringSubmatch(text)
	path := id + "/results/" + fmt.Sprint(res["call_id"])
	if out != "saw the note" || m == nil || m[2] != path || len(text) > 4096 {
		t.Fatalf("capped tool_result (%d bytes, model said %q):\n%s", len(text), out, text)
	}
	size, _ := strconv.Atoi(m[1])
	if size <= printed {
		t.Fatalf("the note says %d bytes; the program printed %d", size, printed)
	}
	ls := fathom(t, cleanEnv(), "session", "artifacts", "--data-dir", data, "--json", id)
	if ls.code != 0 || !strings.Contains(ls.stdout, `"path":"`+path+`"`) || !strings.Contains(ls.stdout, `"size":`+m[1]) || !strings.Contains(ls.stdout, `"artifact_type":"results"`) {
		t.Fatalf("session artifacts: exit %d\n%s%s", ls.code, ls.stdout, ls.stderr)
	}
	dl := t.TempDir()
	if r := fathom(t, cleanEnv(), "session", "artifacts", "--data-dir", data, "--out", dl, id); r.code != 0 {
		t.Fatalf("session artifacts --out: exit %d\n%s", r.code, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(dl, "results", fmt.Sprint(res["call_id"])))
	if err != nil || len(b) != size || !strings.Contains(string(b), strings.Repeat("xxxxxxxxx ", printed/10)) {
		t.Fatalf("downloaded result: %d bytes (%v), want %d holding the %d printed", len(b), err, size, printed)
	}

	// The environment wins over the file.
	_, res, out = run(filepath.Join(dir, "whole"), cleanEnv("FATHOM_MAX_TOOL_RESULT_BYTES=983040"), "--config", small)
	if text, _ := res["result"].(string); out != "saw it whole" || strings.Contains(text, "[truncated") || strings.Count(text, "x") < printed*9/10 {
		t.Fatalf("under a 960 KiB cap the result was not recorded whole (model said %q, %d bytes)", out, len(text))
	}
}
