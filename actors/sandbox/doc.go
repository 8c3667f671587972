// Package sandbox is the client side of the Fathom Sandbox Protocol v1 (FSP, package
// messages/fsp; reference in docs/fsp-v1.md): a pool of supervised WebSocket connection actors that run code in an
// external sandbox (`fathom sandbox`, or any FSP v1 server) on behalf of tools whose
// sandbox mode is external, code_execute first.
//
// # Supervision tree
//
//	root guardian (Proto.Actor default: one-for-one, restart)
//	└─ /sandbox            pool: queue, checkout, overflow; supervises its children by rule
//	   ├─ conn-1 … conn-N  connection ×PoolSize, + up to PoolOverflow while all are busy
//	   │                   exponential backoff restart (RestartBackoff × recent failures)
//	   └─ token            token manager, only with a refresh URL; one-for-one restart
//
// The strategies are declared as data, each with its reason, in supervision.go. A
// connection's socket I/O runs in goroutines it owns (a dialer, then a reader and a
// writer per socket); they send it typed messages (dialed, frameIn, socketClosed)
// through the root context and never touch its actor.Context.
//
// # Lifecycle of a connection
//
// A connection dials at start. When the socket drops it dials again at once, then waits
// InitialBackoff (100 ms), doubling after each failure up to MaxBackoff (30 s); a
// success resets the backoff. After MaxRetries failed dials in a row it fails with
// *RetriesExhaustedError and the pool's strategy restarts it. Before each execution the
// connection pings the sandbox; without a pong within HealthTimeout the execution goes
// back to the pool (nothing was sent) and the connection reconnects.
//
// # Failures
//
// Every failure reaches the caller as a *tools.ToolError, following the seed design's
// table (dimension 21, gap 2), refined by FSP's error categories:
//
//	case                                          type        retryable
//	connection lost while pending                 sandbox     yes
//	malformed frame (logged with its context;     sandbox     no
//	  every pending execution of the connection)
//	execution timeout (client watchdog, status    timeout     no   + best-effort cancel
//	  timeout, or error TIMEOUT)
//	error frame: OOM, OUTPUT_LIMIT, protocol      execution   the frame's flag
//	error frame: infrastructure codes             sandbox     the frame's flag
//	status oom                                    execution   no
//	status cancelled                              execution   yes
//	pool exhausted (CheckoutTimeout) / sandbox    sandbox     yes
//	  unreachable
//	credentials refused at upgrade (401/403)      sandbox     no
//
// A completed or failed execution is not an error: its Result (status, exit code,
// stdout, stderr, duration, resource usage) is the tool's output.
//
// # Authentication
//
// Every upgrade request carries "Authorization: Bearer <token>" and
// "X-Protocol-Version: 1". With a RefreshURL the token manager refreshes the token
// (RefreshToken describes the exchange) every RefreshInterval and as soon as the sandbox
// refuses it. Without one, a refused token cannot heal: each connection stops dialing
// after its first 401/403 (logging why, once) and every execution fails at once with the
// non-retryable credentials error until the client is restarted with a valid token.
//
// # Example
//
//	cfg, err := sandbox.ConfigFromEnv(os.Getenv) // SANDBOX_URL, SANDBOX_API_KEY, ...
//	...
//	pool, err := sandbox.Start(system, cfg)
//	...
//	defer pool.Stop(ctx)
//	exec := &tools.Executor{Registry: reg, External: &sandbox.Runner{Pool: pool}}
//	res := exec.Run(ctx, tools.Call{Name: "code_execute", Args: json.RawMessage(`{"language":"python","code":"print(1)"}`)})
package sandbox
