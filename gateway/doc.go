// Package gateway is Fathom's HTTP + WebSocket API for clients and operators. It reaches
// sessions only through session grain clients and the node's event feed, exactly as any
// other service would. docs/gateway-protocol.md is the full reference.
//
// # Routes
//
//	GET    /healthz                          liveness, no auth
//	GET    /readyz                           readiness (journal reachable, not draining), no auth
//	GET    /v1/ws                            the WebSocket (JSON text frames)
//	POST   /v1/sessions                      start {goal, session_id?, command_id?, config?}
//	GET    /v1/sessions/{id}                 current state and hosting member
//	GET    /v1/sessions/{id}/timeline        steps with their place in the event stream
//	GET    /v1/sessions/{id}/state?at=N      state after step N (0 = after planning)
//	GET    /v1/sessions/{id}/events          stored then live events: NDJSON, or SSE
//	GET    /v1/sessions/{id}/events/{seq}    one stored event; ?field=F: a transcript value whole
//	GET    /v1/sessions/{id}/transcript      the run per agent (package transcript); ?seq=N: as at N
//	POST   /v1/sessions/{id}/input|pause|resume|breakpoints|fork, DELETE .../breakpoints
//	POST   /v1/node/drain                    drain this member (admin): answers once it drained
//	POST   /v1/agui                          an AG-UI run (package gateway/agui, mounted with Mount)
//
// # WebSocket frames
//
// The client sends {"op": ..., "id"?: ...} frames: start, subscribe {session_id,
// from_seq}, unsubscribe, state, timeline, state_at {step_index}, input, pause, resume,
// set_breakpoint, clear_breakpoints, fork. The server answers each with an "ack" or an
// "error" frame echoing id, and streams "event" frames (the one JSON rendering of events,
// messages.MarshalEventJSON, with "op":"event" in front) and unsequenced "delta" frames.
// A subscription delivers every stored event after from_seq, then live ones, with no
// gap and no repeat, from Config.Feed: the gateway sees only the live read side's
// vocabulary (package live: decoded events and deltas), never the journal.
//
// One routing table (ops) serves both transports; an operation whose grain call does
// not exist yet answers CodeUnsupported.
//
// # Auth
//
// Every credential becomes an auth.Principal (subject, tenant, roles): Config.Token is an
// admin and Config.ReadToken a viewer of auth.DefaultTenant, Config.Authenticator turns
// JWTs and API keys into principals of their own tenants. Clients send "Authorization:
// Bearer <credential>"; browsers, which cannot set headers on a WebSocket, offer the
// subprotocols "fathom.v1" and "bearer.<credential>", or "fathom.v1" alone and an
// {"op":"auth","token":...} first frame (wsauth.go). The route checks the role (Scope);
// the session grain checks the tenant and owner of every request's caller, and answers
// another tenant's session as a missing one. The list filters by tenant in the index.
//
// # Robustness
//
// Each connection has one writer, which pulls its subscriptions' events from the feed
// (no goroutine per subscription), and a bounded queue of replies; a client that does
// not read for SlowConsumerTimeout (a write blocked that long, or the reply queue full
// that long) is closed with CloseSlowConsumer and resumes by subscribing from its last
// seq. Pings every PingInterval, a read deadline of PongWait, a frame limit
// (1009 beyond it), an origin check, and Shutdown drains: queued frames are flushed and
// sockets closed with 1001.
//
// # Example
//
//	h, err := gateway.New(gateway.Config{Token: tok, Sessions: node.GatewaySessions(), Feed: node.Feed()})
//	if err != nil { ... }
//	srv := &http.Server{Addr: addr, Handler: h}
//	go srv.ListenAndServe()
//	...
//	_ = h.Shutdown(ctx) // before srv.Shutdown: it does not wait for WebSockets
//	_ = srv.Shutdown(ctx)
package gateway
