// Package mcp is Fathom's Model Context Protocol client, on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk): it connects to one MCP server — a child
// process over stdio, or a streamable HTTP endpoint — lists its tools and calls them,
// and adapts each tool to a tools.Tool named "{server}__{tool}" with the server's JSON
// Schema, so the node's executor runs it like any other tool (timeout, validation,
// idempotency key, ToolError).
//
// # Failures
//
// A call's failures reach the model as ToolErrors:
//
//	case                                           type        retryable
//	result with isError: true                      execution   yes (the text is the message)
//	the server refused the arguments (-32602)      validation  yes
//	any other JSON-RPC error of the server         execution   no
//	the server is not connected (restarting),      sandbox     yes
//	  the connection dropped during the call, the
//	  request did not reach it (refused, HTTP error)
//	timeout (the executor's)                       timeout     no
//
// The call's idempotency key (tools.Call.IdempotencyKey) is sent in the request's
// _meta as "fathom/idempotency_key", so a server can recognise a repeated call. The W3C
// trace context of the span in the call's context (the session's execute_tool span) goes
// in _meta as "traceparent" (and "tracestate"), so an instrumented server joins the trace.
//
// # Connections
//
// Dial starts the server's process (stdio: Command, Args, Env, Dir; the child sees only
// HOME, LOGNAME, PATH, SHELL, TERM, USER and TMPDIR of the node's environment, plus
// Env) or opens an HTTP session (URL, Headers on every request), and initialises the MCP
// session. Conn.Tools lists the tools (every page); Options.OnToolsChanged is told of
// notifications/tools/list_changed. Keeping a connection up — restarting a crashed
// server with backoff, re-listing on list_changed — is the supervised connection actor's
// job (actors/mcp).
//
//	conn, err := mcp.Dial(ctx, mcp.ServerConfig{Name: "orders", Command: "node", Args: []string{"orders-server.js"}}, mcp.Options{})
//	...
//	defer conn.Close()
//	infos, err := conn.Tools(ctx)
//	t, err := mcp.NewTool("orders", infos[0], staticCaller{conn}) // a tools.Tool
package mcp
