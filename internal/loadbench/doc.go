// Package loadbench holds the node's load benchmarks: many sessions on one node against
// the scripted model (llm/mock) over real HTTP, on a real PostgreSQL journal (skipped
// without one; make bench starts it). They report rates against an
// ideal or a bare baseline measured in the same run, latency percentiles and memory per
// session; BenchmarkEngineCPU runs the model server in a child process (this test
// binary, see TestMain) so that the process's CPU is the node's own. `make bench` runs them (internal/benchtable) and writes BENCHMARKS.md.
//
//	go test -run '^$' -bench . -benchtime 1x ./internal/loadbench/
//
// Sizes come from FATHOM_LOAD_SESSIONS (active sessions, default 1,000),
// FATHOM_LOAD_STEPS (plan steps per session, default 10) and FATHOM_LOAD_IDLE_SESSIONS
// (finished sessions left to passivate, in waves of 1,000; default 10,000, at least
// 2,000); FATHOM_LOAD_LATENCY_MS sets BenchmarkActiveSessions' model latency (default
// 200 ms), whose sub-benchmarks reach the model over plain HTTP/1.1 (model=http) and
// over HTTPS with HTTP/2 (model=https-h2). FATHOM_LOAD_IDLE_HEAP=FILE makes BenchmarkPassivatedSessions write a heap
// profile once every finished session has passivated, what they left behind (go tool
// pprof -sample_index=inuse_space), and FILE.first after the first wave (-base FILE.first
// shows what the later waves added); FATHOM_LOAD_ACTIVE_HEAP=FILE makes
// BenchmarkActiveSessions write one mid-run to FILE and before its run to FILE.base
// (FATHOM_LOAD_ACTIVE_GOROUTINES=FILE: the goroutines mid-run, counted by stack);
// FATHOM_LOAD_PROFILE_RATE=N samples one allocation per N bytes in those profiles
// (runtime.MemProfileRate; default 512 KiB, e.g. 4096 to resolve small retainers).
// The node calls the scripted model as the OpenAI API, its answers not streamed; for a
// look at the other client paths (not rows of the table), FATHOM_LOAD_API=anthropic makes
// it call the model as the Anthropic Messages API, and FATHOM_LOAD_STREAM=1 streams the
// answers (their deltas go to the node's live feed).
package loadbench
