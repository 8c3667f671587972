// Package mcp keeps a node's MCP servers connected: one supervised connection actor per
// configured server (a stdio child process or a streamable HTTP endpoint, through the
// client in tools/mcp), started with the node. Each lists its server's tools at start and
// again on notifications/tools/list_changed, and keeps them registered in the node's tool
// registry as "{server}__{tool}", so the executor runs them like any other tool.
//
// # Supervision tree
//
//	root guardian (Proto.Actor default: one-for-one, restart)
//	└─ /mcp                supervisor: spawns one connection per server; supervises them by rule
//	   └─ /mcp/{server}    connection: dial, list, watch, ping; fails when the server dies
//	                       restarted with exponential backoff (RestartBackoff doubling up to
//	                       MaxBackoff; failures older than RestartWindow are forgotten)
//
// The strategies are declared as data, each with its reason, in supervision.go. A
// restart is an ordinary Proto.Actor supervision event (actor.SupervisorEvent on the
// event stream), so the node's observer (actors/observer) logs it and counts it as
// fathom_actor_restarts_total{kind="mcp_server"} like any other.
//
// # Lifecycle of a connection
//
// The connection dials in a goroutine it owns (the process starts, the MCP handshake
// runs, the tools are listed, all within Config.ConnectTimeout) and is told the outcome
// as a message. Connected, it registers the tools, publishes the connection to the
// server's handle (which tools call through) and watches it: when the connection ends —
// the process exited or crashed, the HTTP session broke — it fails with *ExitedError and
// its supervisor restarts it after the backoff, which starts a new process. Meanwhile the
// server's tools stay registered and fail with a retryable sandbox error ("not
// connected"), so the model may try again. A list_changed notification lists the tools
// again and updates the registry (added, changed and removed tools).
//
// A dead or hung server is noticed without a call: the connection pings it every
// Config.PingInterval and fails like above when a ping is not answered within
// Config.PingTimeout. A call an HTTP server refuses because it no longer knows the
// connection's session (it restarted) did not run: the handle asks the connection to
// reconnect at once (no backoff, no supervision event), waits for the new connection
// and sends the call again, once.
//
// Start waits for every server's first connection: a server that cannot be started or
// reached fails the node's start with the server's name and the cause, since its tools
// could not be offered.
//
//	servers, err := mcp.Start(ctx, system, mcp.Config{Servers: cfgs, Registry: reg, Logger: log})
//	...
//	defer servers.Stop(ctx)
package mcp
