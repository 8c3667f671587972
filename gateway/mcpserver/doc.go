// Package mcpserver serves Fathom's agents as MCP tools: `/mcp` on the gateway, over
// the streamable HTTP transport of the official Go SDK
// (github.com/modelcontextprotocol/go-sdk), behind the gateway's authentication (the
// same bearer tokens, JWTs and API keys as every other route).
//
// Every agent of the node (the built-in researcher, coder, writer and reviewer and the
// configuration's own agents) is a tool named after it, and run_agent is the generic
// one: a call starts a session with the call's goal (an agent's tool asks the planner to
// hand the goal to that agent), waits for it, and answers its final result as text, with
// the session's id, status, result and cost as structured content. While it runs, a
// caller that sent a progress token gets a progress notification for each of the
// session's steps (the event itself, as the gateway's streams render it, in the
// notification's _meta "fathom/event"). Cancelling the request (notifications/cancelled)
// cancels the session. A session that stops to wait for a human ends the call with status
// "awaiting_input" and the question; the answer goes in over the gateway's input
// operation. Bad arguments are a tool error result saying what is wrong.
//
// It is an adapter over the gateway's seam (gateway.Handler's Mount, Do, Follow, Stream
// and EventJSON): the operations run for the request's principal, so a call does exactly
// what the same principal may do over the gateway's own routes.
//
// A long run is one tool call that streams progress until the session ends, or a task
// (the MCP tasks extension, protocol 2025-11-25): a tools/call with params.task answers
// at once with a task whose id is the session's, and tasks/get, tasks/result, tasks/list
// and tasks/cancel read, await, list and cancel the session for the caller's principal.
// The SDK version Fathom uses (v1.8.0) has no tasks support; tasks.go builds it on the
// SDK's custom methods and receiving middleware.
package mcpserver
