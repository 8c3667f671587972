package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/tools/mcp/mcptest"
)

// scriptJSON is script as `fathom mock-llm --script` reads it.
func scriptJSON(t *testing.T, script mock.Script) string {
	t.Helper()
	data, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestRunWithMCPServersFromAConfigFile: `fathom run --config FILE` reads the issue's
// mcp_servers section, starts the stdio server (the TypeScript SDK's, next to the file)
// and connects to the HTTP one with its headers; the session's model calls a tool of
// each, and both results are in the journal's events.
func TestRunWithMCPServersFromAConfigFile(t *testing.T) {
	t.Parallel()
	script, nodePath := mcptest.Script(t)
	docsURL := mcptest.HTTP(t, "xyz")
	dir := t.TempDir()
	if err := os.Rename(script, filepath.Join(dir, "orders-server.cjs")); err != nil {
		t.Fatal(err)
	}
	cfg := `mcp_servers:
  - name: orders                      # stdio
    command: node
    args: [orders-server.cjs, stdio]
    env: {NODE_PATH: ` + nodePath + `}
  - name: docs                        # streamable HTTP
    url: ` + docsURL + `
    headers: {Authorization: Bearer xyz}
`
	cfgPath := filepath.Join(dir, "fathom.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startMockLLM(t, scriptJSON(t, mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"step-1","type":"custom","description":"look it up","dependencies":[]}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: `echo: A-1 shipped`, Response: "Order A-1 has shipped."},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: `"status":"shipped"`, ToolCalls: []mock.ToolCallRule{{Name: "docs__echo", Arguments: `{"text":"A-1 shipped"}`}}},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: []mock.ToolCallRule{{Name: "orders__lookup_order", Arguments: `{"order_id":"A-1"}`}}},
	}, Default: "done"}))
	r := fathom(t, cleanEnv("OPENAI_BASE_URL="+base, "OPENAI_API_KEY=k"), "run", "--config", cfgPath, "--data-dir", t.TempDir(), "--json", "Where is order A-1?")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	evs := jsonEvents(t, r.stdout)
	checkCompletedRun(t, evs)
	results := map[string]string{}
	for _, ev := range evs {
		if ev["type"] == "tool_result" {
			tool, _ := ev["tool"].(string)
			res, _ := ev["result"].(string)
			results[tool] = res
		}
	}
	if results["orders__lookup_order"] != `{"order_id":"A-1","status":"shipped","total":42.5}` || !strings.HasPrefix(results["docs__echo"], "echo: A-1 shipped") {
		t.Fatalf("tool results %v\n%s", results, r.stdout)
	}
}

// TestBadConfigFileFailsTheStart: a typo in the file given by FATHOM_CONFIG fails `fathom
// run` and `fathom node` before anything starts, with the file, the line and the key.
func TestBadConfigFileFailsTheStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "fathom.yaml")
	bad := "mcp_servers:\n  - name: orders\n    command: node\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n  - name: x\n    comand: node\n"
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	want := path + ":7: mcp_servers[2].comand: unknown key"
	for _, args := range [][]string{{"run", "--data-dir", t.TempDir(), "a goal"}, {"node", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}} {
		r := fathom(t, cleanEnv("FATHOM_CONFIG="+path), args...)
		if r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Fatalf("fathom %s: exit %d, stderr:\n%s\nwant %q", args[0], r.code, r.stderr, want)
		}
	}
	if err := os.WriteFile(path, []byte("approval:\n  tools: [code_execute, no_such_tool]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := fathom(t, cleanEnv(), "run", "--config", path, "--data-dir", t.TempDir(), "a goal")
	if r.code != 2 || !strings.Contains(r.stderr, path+":2: approval.tools[1]: ") || !strings.Contains(r.stderr, `"no_such_tool" is not a tool of this node`) {
		t.Fatalf("approval of an unknown tool: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestNodeWithMCPServersFromFATHOM_CONFIG: `fathom node` reads the file FATHOM_CONFIG
// names, a session started over the gateway calls the stdio server's tool, and stopping
// the node ends the server's process.
func TestNodeWithMCPServersFromFATHOM_CONFIG(t *testing.T) {
	t.Parallel()
	script, nodePath := mcptest.Script(t)
	cfgPath := filepath.Join(t.TempDir(), "fathom.yaml")
	cfg := "mcp_servers:\n  - name: orders\n    command: node\n    args: [" + script + ", stdio]\n    env: {NODE_PATH: " + nodePath + "}\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startMockLLM(t, scriptJSON(t, mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"step-1","type":"custom","description":"echo","dependencies":[]}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: `echo: over the gateway`, Response: "Echoed."},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: []mock.ToolCallRule{{Name: "orders__echo", Arguments: `{"text":"over the gateway"}`}}},
	}, Default: "done"}))
	p := startNode(t, cleanEnv("FATHOM_CONFIG="+cfgPath, "OPENAI_BASE_URL="+base, "OPENAI_API_KEY=k"), "--data-dir", t.TempDir())
	lines := nodeSessionEvents(t, p, "node-mcp-1", "Echo something")
	var pid int
	for _, l := range lines {
		if m := regexp.MustCompile(`"tool_result".*echo: over the gateway \(pid (\d+)`).FindStringSubmatch(l); m != nil {
			pid, _ = strconv.Atoi(m[1])
		}
	}
	if pid == 0 || !strings.Contains(lines[len(lines)-1], "session_completed") {
		t.Fatalf("no orders__echo result from the MCP server:\n%s", strings.Join(lines, "\n"))
	}
	p.stop(t)
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the MCP server (pid %d) outlived the node: kill -0: %v\n%s", pid, err, p.stderr)
	}
}
