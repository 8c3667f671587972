// Package sandboxd is Fathom's sandbox server: it speaks FSP v1 (package messages/fsp;
// the protocol reference is docs/fsp-v1.md) over WebSocket and runs each execution in a fresh, isolated process. `fathom sandbox`
// serves it.
//
// # Protocol
//
// Clients upgrade GET /ws with "Authorization: Bearer <token>" (401 otherwise) and
// optionally "X-Protocol-Version: 1" (400 for a version list without 1). Per connection:
//
//   - execute: rejected outright with an error and no ack (LANGUAGE_NOT_SUPPORTED,
//     INVALID_REQUEST for limits above the configured maxima, oversized code, stdin or
//     env, or an id already in progress on the connection, SANDBOX_OVERLOADED past
//     MaxConcurrent+MaxQueued), else ack, then status running once the process started,
//     stdout/stderr chunks as produced, the terminal status and the result (exit_code,
//     null only when the program was killed by a signal: an exit(137) is exit code 137;
//     duration_ms; resource_usage: the program's own CPU time from wait4(2) and its own
//     peak RSS (report.go), absent when the server killed it).
//   - Terminal statuses: completed (the process exited by itself, whatever its code),
//     failed (killed by a signal of its own making, or output over max_output_bytes, which
//     is preceded by an OUTPUT_LIMIT error frame), timeout (timeout_ms passed, or the CPU
//     rlimit backstop fired), oom (the process failed and its runtime reported an
//     allocation failure or its peak RSS reached 90% of memory_mb), cancelled.
//   - An infrastructure failure after the ack (e.g. the process cannot start) is an
//     INTERNAL_ERROR error frame and no result.
//   - cancel: status cancelled and result (also for an execution still queued), or
//     UNKNOWN_EXECUTION for an id not in progress on this connection.
//   - ping: pong with load (running executions and queue depth, server-wide).
//   - Anything else that cannot be read (not JSON, unknown type, another version, missing
//     or invalid fields, binary frames, client-bound types): INVALID_REQUEST, with the
//     frame's id when it had one, and the connection lives on. A frame over MaxFrameBytes
//     closes the connection (WebSocket close 1009).
//
// When a connection closes (or misses its pongs for two ping intervals) its executions
// are killed at once: the protocol is stateless and nothing resumes them.
//
// # Isolation
//
// Every execution is a fresh process in its own process group, started through the
// helper (see RunHelperIfRequested), which sets RLIMIT_DATA to memory_mb (RLIMIT_AS to
// that plus a per-runtime headroom, since V8 reserves far more address space than it
// uses), RLIMIT_CPU just above the timeout, RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_NPROC and
// no core files, lowers its priority for cpu_shares below 512, and, when the server runs
// as root, drops to a per-slot uid (UIDBase+slot), then execs the interpreter. The
// environment is built from scratch: nothing of the server's leaks in.
//
// With bubblewrap (probed once at start; the default IsolationAuto, like IsolationBwrap,
// fails New with a BwrapError saying how to install it when it does not work here: only
// an explicit IsolationRlimits runs without it) the process also gets new PID, network,
// IPC and UTS namespaces, a root of its own holding only what the interpreters need
// (/usr and its /bin, /lib... links, the loader cache, /etc/alternatives, read-only; no
// other host file), a private size-bounded tmpfs /tmp with the work directory /tmp/work,
// and dies with the server.
//
// In both modes the helper first runs as a waiter (inside the namespace under
// bubblewrap) that starts the program and reports its exit status and rusage to the
// server over a pipe (report.go): bwrap's would hide both, and a child forked from the
// server inherits the server's peak RSS. The waiter traces the program for its exit
// only, to read its own peak RSS before its memory is gone: a program's ru_maxrss
// includes the peak of the helpers it was exec'd from.
//
// The process group is killed on timeout, cancel, disconnect, shutdown, output overflow,
// and after every normal exit too (background children die with the execution); in
// rlimits mode as root a sweep then kills whatever is left of the slot's uid, so a child
// that called setsid does not survive either.
//
// # Example
//
//	srv, err := sandboxd.New(cfg, logger)
//	if err != nil { ... }
//	mux := http.NewServeMux()
//	mux.Handle(fsp.Path, srv)
//	go http.Serve(listener, mux)
//	...
//	srv.Close(ctx) // kills every execution
//
// The package is Linux-only.
package sandboxd
