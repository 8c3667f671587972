// Package mcptest runs an MCP server nobody here wrote — a small server on the official
// TypeScript SDK (@modelcontextprotocol/sdk, server.cjs) — for the tests of Fathom's MCP
// client, over stdio or streamable HTTP. It needs node and the npm package that
// scripts/install-node-mcp.sh installs (FATHOM_TEST_NODE_MCP, see internal/testenv):
// without them tests skip, or fail under FATHOM_TEST_REQUIRE_SERVICES.
//
// The server's tools: echo {text} (answers "echo: TEXT (pid PID, key KEY)" with the
// call's idempotency key from _meta), trace_context {} (the traceparent and tracestate it
// got in _meta, as JSON), lookup_order {order_id} (A-1 and B-2 exist; others
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
	return StartHTTP(t, token).URL
}

// HTTPServer is the test server over streamable HTTP, as a process the test can stop
// and start again on the same port.
type HTTPServer struct {
	// URL is the MCP endpoint.
	URL string

	t              testing.TB
	path, nodePath string
	token, port    string
	cmd            *exec.Cmd
	cancel         context.CancelFunc
}

// StartHTTP starts the test server over streamable HTTP; the test's cleanup stops it.
func StartHTTP(t testing.TB, token string) *HTTPServer {
	t.Helper()
	path, nodePath := Script(t)
	s := &HTTPServer{t: t, path: path, nodePath: nodePath, token: token, port: "0"}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

var listening = regexp.MustCompile(`listening on (http://127\.0\.0\.1:(\d+)/mcp)`)

// Start starts the server's process (on the port of the first start, after a Stop).
func (s *HTTPServer) Start() {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", s.path, "http")
	cmd.Env = append(os.Environ(), "NODE_PATH="+s.nodePath, "MCP_TOKEN="+s.token, "MCP_PORT="+s.port)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		s.t.Fatalf("start the HTTP MCP server: %v", err)
	}
	s.cmd, s.cancel = cmd, cancel
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m
			}
		}
	}()
	select {
	case m := <-found:
		s.URL, s.port = m[1], m[2]
	case <-time.After(30 * time.Second):
		s.Stop()
		s.t.Fatal("the HTTP MCP server did not print its address within 30s")
	}
}

// Stop kills the server's process and waits for it; it is idempotent.
func (s *HTTPServer) Stop() {
	if s.cmd == nil {
		return
	}
	s.cancel()
	_ = s.cmd.Wait()
	s.cmd = nil
}
