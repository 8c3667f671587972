package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/tools"
	"github.com/fathom-agents/fathom/tools/mcp"
	"github.com/fathom-agents/fathom/tools/mcp/mcptest"
)

type echoArgs struct {
	Text string `json:"text" jsonschema:"minLength=1" jsonschema_description:"what to echo"`
}

var benchSink string

// BenchmarkMCPOverhead is one tool call through the executor (validation against the
// schema, timeout, ToolError mapping), the same echo tool two ways: "stdio" calls the
// TypeScript SDK's server over stdio (JSON-RPC encode, pipe write, the Node.js server's
// dispatch, pipe read, decode), "in-process" is the tool as a Go function. The ratio of
// the two (make bench, row mcp-stdio) is the cost of MCP over stdio.
func BenchmarkMCPOverhead(b *testing.B) {
	ctx := context.Background()
	args := json.RawMessage(`{"text":"virtual actors"}`)
	b.Run("stdio", func(b *testing.B) {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, err := mcp.Dial(dctx, mcptest.Stdio(b, "orders"), mcp.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		infos, err := conn.Tools(dctx)
		if err != nil {
			b.Fatal(err)
		}
		reg, err := tools.NewRegistry()
		if err != nil {
			b.Fatal(err)
		}
		for _, info := range infos {
			if info.Name != "echo" {
				continue
			}
			t, err := mcp.NewTool("orders", info, connCaller{conn})
			if err != nil {
				b.Fatal(err)
			}
			if err := reg.Register(t); err != nil {
				b.Fatal(err)
			}
		}
		run(b, &tools.Executor{Registry: reg}, "orders__echo", args)
	})
	b.Run("in-process", func(b *testing.B) {
		pid := os.Getpid()
		echo := tools.MustNew("orders__echo", "Echoes the text back", tools.SandboxNone, func(ctx context.Context, a echoArgs) (any, error) {
			c, _ := tools.CallInfo(ctx)
			return fmt.Sprintf("echo: %s (pid %d, key %s)", a.Text, pid, c.IdempotencyKey), nil
		})
		reg, err := tools.NewRegistry(echo)
		if err != nil {
			b.Fatal(err)
		}
		run(b, &tools.Executor{Registry: reg}, "orders__echo", args)
	})
}

func run(b *testing.B, ex *tools.Executor, name string, args json.RawMessage) {
	ctx := context.Background()
	call := tools.Call{ID: "c", Name: name, Args: args, IdempotencyKey: "s/step-1/0"}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := ex.Run(ctx, call)
		if r.Err != nil {
			b.Fatal(r.Err)
		}
		benchSink = r.Output
	}
}
