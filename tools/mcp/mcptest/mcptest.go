// Package mcptest runs an MCP server nobody here wrote — a small server on the official
// TypeScript SDK (@modelcontextprotocol/sdk, server.cjs) — for the tests of Fathom's MCP
// client, over stdio or streamable HTTP. It needs node and the npm package that
// scripts/install-node-mcp.sh installs (FATHOM_TEST_NODE_MCP, see internal/testenv):
// without them tests skip, or fail under FATHOM_TEST_REQUIRE_SERVICES.
//
// The server's tools: echo {text} (answers "echo: TEXT (pid PID, key KEY)" with the
// call's idempotency key from _meta), lookup_order {order_id} (A-1 and B-2 exist; others
// are an isError result), fail {} (always an isError result), crash {} (the process
// exits), add_tool {name} and remove_tool {name} (change the tool list: the SDK sends
// notifications/tools/list_changed), slow {ms}.
package mcptest

import (
	"bufio"
	"context"
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	mcptool "github.com/fathom-agents/fathom/tools/mcp"
)

//go:embed server.cjs
var script []byte

// Script writes the server's script into a temporary directory and returns its path and
// the NODE_PATH that finds the SDK.
func Script(t testing.TB) (path, nodePath string) {
	t.Helper()
	dir := testenv.NodeMCP(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed (scripts/install-node-mcp.sh installs it): %v", err)
	}
	path = filepath.Join(t.TempDir(), "server.cjs")
	if err := os.WriteFile(path, script, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, filepath.Join(dir, "node_modules")
}

// Stdio returns the configuration of a stdio server named name running the test server.
func Stdio(t testing.TB, name string) mcptool.ServerConfig {
	t.Helper()
	path, nodePath := Script(t)
	return mcptool.ServerConfig{Name: name, Command: "node", Args: []string{path, "stdio"}, Env: map[string]string{"NODE_PATH": nodePath}}
}

// HTTP starts the test server over streamable HTTP (requiring "Authorization: Bearer
// token" when token is set) and returns its URL; the test's cleanup stops it.
func HTTP(t testing.TB, token string) string {
	t.Helper()
	path, nodePath := Script(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", path, "http")
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodePath, "MCP_TOKEN="+token)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start the HTTP MCP server: %v", err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`listening on (\S+)`)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("the HTTP MCP server did not print its address within 30s")
		return ""
	}
}
