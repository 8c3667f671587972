package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fathom-agents/fathom/tools"
)

// Caller calls a server's tool on whatever connection is current. A Caller that has no
// connection (the server is starting or restarting) returns an error wrapping
// ErrNotConnected.
type Caller interface {
	CallTool(ctx context.Context, tool string, args json.RawMessage, key string) (*sdk.CallToolResult, error)
}

// ErrNotConnected says the server has no live connection right now.
var ErrNotConnected = errors.New("not connected")

// Tool is a server's tool as a tools.Tool: named "{server}__{tool}", described and
// validated by the server's own description and JSON Schema, run in-process (the
// server is the isolation) through a Caller.
type Tool struct {
	server string
	info   ToolInfo
	name   string
	schema json.RawMessage
	caller Caller
}

var _ tools.Tool = (*Tool)(nil)

// NewTool adapts info, a tool of server, to a tools.Tool calling through caller. It
// fails when "{server}__{tool}" is not a valid tool name or the schema is not a JSON
// object; a schema without "type" gets "type": "object".
func NewTool(server string, info ToolInfo, caller Caller) (*Tool, error) {
	name := ToolName(server, info.Name)
	var schema map[string]any
	if err := json.Unmarshal(info.InputSchema, &schema); err != nil || schema == nil {
		return nil, fmt.Errorf("mcp server %s: tool %q: input schema is not a JSON object", server, info.Name)
	}
	raw := info.InputSchema
	if _, ok := schema["type"]; !ok {
		schema["type"] = "object"
		b, err := json.Marshal(schema)
		if err != nil {
			return nil, fmt.Errorf("mcp server %s: tool %q: input schema: %w", server, info.Name, err)
		}
		raw = b
	}
	if !tools.ValidName(name) {
		return nil, fmt.Errorf("mcp server %s: tool %q: %q is not a valid tool name (letters, digits, '_' and '-', at most 64)", server, info.Name, name)
	}
	return &Tool{server: server, info: info, name: name, schema: raw, caller: caller}, nil
}

// Name implements tools.Tool.
func (t *Tool) Name() string { return t.name }

// Description implements tools.Tool.
func (t *Tool) Description() string { return t.info.Description }

// Schema implements tools.Tool.
func (t *Tool) Schema() json.RawMessage { return t.schema }

// SandboxMode implements tools.Tool: the call runs in the server's process, not
// Fathom's sandbox.
func (t *Tool) SandboxMode() tools.SandboxMode { return tools.SandboxNone }

// Server is the server the tool belongs to.
func (t *Tool) Server() string { return t.server }

// Info is the tool as the server listed it.
func (t *Tool) Info() ToolInfo { return t.info }

// Execute implements tools.Tool: it calls the server's tool with the call's
// idempotency key and renders the result (see the package doc for the failures).
func (t *Tool) Execute(ctx context.Context, args json.RawMessage) (any, error) {
	var key string
	if c, ok := tools.CallInfo(ctx); ok {
		key = c.IdempotencyKey
	}
	res, err := t.caller.CallTool(ctx, t.info.Name, args, key)
	if err != nil {
		return nil, t.callError(ctx, err)
	}
	text := Render(res)
	if res.IsError {
		if text == "" {
			text = "the tool reported an error without a message"
		}
		return nil, tools.ExecutionError(t.name, text, true, tools.Field{Key: "mcp_server", Value: t.server})
	}
	return text, nil
}

// codeRejectedByTransport is the Go SDK's code for a request that did not reach the
// server (connection refused, HTTP error, closed stream): not the server's answer.
const codeRejectedByTransport = -32005

// callError classifies a failed call.
func (t *Tool) callError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("mcp server %s: %w", t.server, ctx.Err()) // the executor reports timeout or cancellation
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Code != codeRejectedByTransport {
		if we.Code == jsonrpc.CodeInvalidParams {
			return tools.ValidationError(t.name, "the MCP server refused the arguments: "+we.Message)
		}
		return tools.ExecutionError(t.name, fmt.Sprintf("the MCP server answered with error %d: %s", we.Code, we.Message), false)
	}
	return tools.SandboxError(t.name, fmt.Sprintf("MCP server %s is unavailable: %v", t.server, err), true)
}

// Render turns a result into the text the model reads: text content as is, one item a
// line; structured content as JSON when there is no text; other content (images,
// audio, resources) as a short description.
func Render(res *sdk.CallToolResult) string {
	var b strings.Builder
	line := func(s string) {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	for _, c := range res.Content {
		switch x := c.(type) {
		case *sdk.TextContent:
			line(x.Text)
		case *sdk.ImageContent:
			line(fmt.Sprintf("[image %s, %d bytes]", x.MIMEType, len(x.Data)))
		case *sdk.AudioContent:
			line(fmt.Sprintf("[audio %s, %d bytes]", x.MIMEType, len(x.Data)))
		case *sdk.ResourceLink:
			line(fmt.Sprintf("[resource %s: %s]", x.Name, x.URI))
		case *sdk.EmbeddedResource:
			if x.Resource != nil && x.Resource.Text != "" {
				line(x.Resource.Text)
			} else if x.Resource != nil {
				line(fmt.Sprintf("[resource %s, %s]", x.Resource.URI, x.Resource.MIMEType))
			}
		default:
			if j, err := json.Marshal(c); err == nil {
				line(string(j))
			}
		}
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		if j, err := json.Marshal(res.StructuredContent); err == nil {
			var out bytes.Buffer
			if json.Compact(&out, j) == nil {
				return out.String()
			}
			return string(j)
		}
	}
	return b.String()
}
