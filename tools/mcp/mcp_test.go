package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fathom-agents/fathom/tools"
	"github.com/fathom-agents/fathom/tools/mcp"
	"github.com/fathom-agents/fathom/tools/mcp/mcptest"
)

// connCaller calls through one fixed connection (the actor's handle does it in a node).
type connCaller struct{ c *mcp.Conn }

func (c connCaller) CallTool(ctx context.Context, tool string, args json.RawMessage, key string) (*sdk.CallToolResult, error) {
	if c.c == nil {
		return nil, mcp.ErrNotConnected
	}
	return c.c.CallTool(ctx, tool, args, key)
}

func dial(t *testing.T, cfg mcp.ServerConfig) *mcp.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := mcp.Dial(ctx, cfg, mcp.Options{})
	if err != nil {
		t.Fatalf("dial %s: %v", cfg.Name, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// executor registers every tool of conn's server under name and returns an executor.
func executor(t *testing.T, name string, conn *mcp.Conn) *tools.Executor {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	infos, err := conn.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		tool, err := mcp.NewTool(name, info, connCaller{conn})
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Register(tool); err != nil {
			t.Fatalf("register %s: %v", tool.Name(), err)
		}
	}
	return &tools.Executor{Registry: reg, Timeout: 10 * time.Second}
}

// TestToolsOfTheTypeScriptServer: over stdio and over streamable HTTP, the official
// TypeScript SDK's tools are listed with their JSON Schemas, offered as {server}__{tool},
// validated by the executor against the server's schema, and called with the call's
// idempotency key in _meta; an isError result is an execution error the model can read.
func TestToolsOfTheTypeScriptServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) mcp.ServerConfig
	}{
		{"stdio", func(t *testing.T) mcp.ServerConfig { return mcptest.Stdio(t, "orders") }},
		{"http", func(t *testing.T) mcp.ServerConfig {
			return mcp.ServerConfig{Name: "orders", URL: mcptest.HTTP(t, "s3cret"), Headers: map[string]string{"Authorization": "Bearer s3cret"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exec := executor(t, "orders", dial(t, tc.cfg(t)))
			echo, ok := exec.Registry.Get("orders__echo")
			if !ok {
				t.Fatalf("no orders__echo among %v", names(exec.Registry))
			}
			if echo.Description() == "" || !strings.Contains(string(echo.Schema()), `"minLength":1`) {
				t.Fatalf("echo's description %q or schema %s is not the server's", echo.Description(), echo.Schema())
			}
			ctx := context.Background()
			res := exec.Run(ctx, tools.Call{ID: "c1", Name: "orders__echo", Args: json.RawMessage(`{"text":"hello"}`), IdempotencyKey: "s1/step-1/0"})
			if res.Err != nil || !regexp.MustCompile(`^echo: hello \(pid \d+, key s1/step-1/0\)$`).MatchString(res.Output) {
				t.Fatalf("echo: output %q, error %v", res.Output, res.Err)
			}
			res = exec.Run(ctx, tools.Call{ID: "c2", Name: "orders__lookup_order", Args: json.RawMessage(`{"order_id":"A-1"}`)})
			if res.Err != nil || res.Output != `{"order_id":"A-1","status":"shipped","total":42.5}` {
				t.Fatalf("lookup_order: output %q, error %v", res.Output, res.Err)
			}
			// The server's schema is enforced before the call leaves the node.
			res = exec.Run(ctx, tools.Call{ID: "c3", Name: "orders__echo", Args: json.RawMessage(`{"text":""}`)})
			if res.Err == nil || res.Err.Type != tools.ErrValidation || !strings.Contains(res.Err.Message, "/text") {
				t.Fatalf("empty text: %+v", res.Err)
			}
			res = exec.Run(ctx, tools.Call{ID: "c4", Name: "orders__fail", Args: json.RawMessage(`{}`)})
			if res.Err == nil || res.Err.Type != tools.ErrExecution || res.Err.Message != "the warehouse is on fire" || !res.Err.Retryable {
				t.Fatalf("isError result: %+v", res.Err)
			}
			if c := res.Content(); !strings.Contains(c, "Tool `orders__fail` failed.\nError type: execution\nMessage: the warehouse is on fire") {
				t.Fatalf("the model reads %q", c)
			}
		})
	}
}

func names(r *tools.Registry) []string {
	var out []string
	for _, t := range r.Tools() {
		out = append(out, t.Name())
	}
	return out
}

// TestHTTPHeadersAreSent: the server refuses a session without the configured
// Authorization header, and Dial says which server failed.
func TestHTTPHeadersAreSent(t *testing.T) {
	u := mcptest.HTTP(t, "s3cret")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := mcp.Dial(ctx, mcp.ServerConfig{Name: "docs", URL: u, Headers: map[string]string{"Authorization": "Bearer wrong"}}, mcp.Options{})
	var ce *mcp.ConnectError
	if !errors.As(err, &ce) || ce.Server != "docs" || !strings.Contains(err.Error(), "mcp server docs: connect") {
		t.Fatalf("dial with a wrong token: %v", err)
	}
}

// TestDeadServerIsARetryableSandboxError: a call whose server died (its process exited)
// or that has no connection at all is a retryable sandbox error, never a hang.
func TestDeadServerIsARetryableSandboxError(t *testing.T) {
	conn := dial(t, mcptest.Stdio(t, "orders"))
	exec := executor(t, "orders", conn)
	ctx := context.Background()
	res := exec.Run(ctx, tools.Call{ID: "c1", Name: "orders__crash", Args: json.RawMessage(`{}`)})
	if res.Err == nil || res.Err.Type != tools.ErrSandbox || !res.Err.Retryable || !strings.Contains(res.Err.Message, "MCP server orders is unavailable") {
		t.Fatalf("call that kills the server: %+v", res.Err)
	}
	res = exec.Run(ctx, tools.Call{ID: "c2", Name: "orders__echo", Args: json.RawMessage(`{"text":"anyone?"}`)})
	if res.Err == nil || res.Err.Type != tools.ErrSandbox || !res.Err.Retryable {
		t.Fatalf("call to the dead server: %+v", res.Err)
	}
	tool, err := mcp.NewTool("orders", mcp.ToolInfo{Name: "echo", InputSchema: json.RawMessage(`{}`)}, connCaller{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tool.Execute(ctx, nil); !isSandbox(err) {
		t.Fatalf("call without a connection: %v", err)
	}
}

func isSandbox(err error) bool {
	var te *tools.ToolError
	return errors.As(err, &te) && te.Type == tools.ErrSandbox && te.Retryable
}

// TestTimeoutCancelsTheCall: the executor's timeout ends a slow call as a timeout error.
func TestTimeoutCancelsTheCall(t *testing.T) {
	exec := executor(t, "orders", dial(t, mcptest.Stdio(t, "orders")))
	exec.Timeout = 300 * time.Millisecond
	res := exec.Run(context.Background(), tools.Call{ID: "c1", Name: "orders__slow", Args: json.RawMessage(`{"ms":5000}`)})
	if res.Err == nil || res.Err.Type != tools.ErrTimeout {
		t.Fatalf("slow call: %+v", res.Err)
	}
}

func TestServerConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  mcp.ServerConfig
		want string
	}{
		{mcp.ServerConfig{Command: "node"}, "name is required"},
		{mcp.ServerConfig{Name: "a__b", Command: "node"}, "single '_'"},
		{mcp.ServerConfig{Name: "a"}, "set command"},
		{mcp.ServerConfig{Name: "a", Command: "node", URL: "http://x"}, "exclusive"},
		{mcp.ServerConfig{Name: "a", URL: "ftp://x"}, "not an http"},
		{mcp.ServerConfig{Name: "a", URL: "http://x", Args: []string{"y"}}, "belong to a stdio server"},
		{mcp.ServerConfig{Name: "a", Command: "node", Headers: map[string]string{"A": "b"}}, "belong to an HTTP server"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if err := (mcp.ServerConfig{Name: "orders-db_2", Command: "node"}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestRender(t *testing.T) {
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.ImageContent{MIMEType: "image/png", Data: []byte("xyz")}}}
	if got := mcp.Render(res); got != "a\n[image image/png, 3 bytes]" {
		t.Fatalf("render %q", got)
	}
	if got := mcp.Render(&sdk.CallToolResult{StructuredContent: map[string]any{"n": 1}}); got != `{"n":1}` {
		t.Fatalf("structured %q", got)
	}
}
