// Package session is the session grain: the actor shell around the pure session core
// (actors/session/core), one virtual actor (cluster kind "Session") per session.
//
// # The grain
//
// The grain holds a session's event-sourced state and is the only writer of its
// journal stream. Every change goes through one path: decide events with the core
// (core.Decide, which also folds them into a copy), append them with the expected sequence, and
// only then make the copy the state and tell the commit observers (commit; the commit
// pipeline of pipeline.go lets the answer of the orchestrator's call be decided while
// earlier appends are in flight). The grain is that pipeline, its timers and its message
// dispatch; what it owns besides is in small types of their own: its agent actors
// (agents.go), timers (timers.go), snapshot policy (snapshot.go), summarizer requests
// (memory.go), webhook delivery (webhook.go), lease (lease.go) and trace (trace.go).
// Its settings are Config: the decision settings it hands the core (Config.Core, a
// core.Config, embedded so its fields read as Config's) and its own, which no decision
// reads (call and journal timeouts, passivation, leases, snapshot cadence, pipeline
// depth, drain, tenancy, retrieval).
//
// # Commit observers
//
// What follows a durable append is an Observer (observer.go), told of each append once,
// in order, after the journal acknowledged it: the node's (Deps.Observers: the live feed,
// metrics and cluster topics, the embed worker), the grain's own (the lifecycle log, the
// quotas' usage) and the activation's (its trace and its lease). A new cross-cutting
// feature is a new observer, not a method of the grain.
//
// # Agents and runners
//
// The grain runs no call itself. Its children are agent actors (actors/agent): one for
// the orchestrator while the session runs, one per running sub-agent. After every
// commit the grain sends each the committed state (agent.Work); the agent actor starts
// what is due as a step runner (runner.go: one LLM call, request built from the state)
// or a tool runner (toolrunner.go: one recorded tool call through the executor), calls
// made by this package (agentCalls, agents.go) that the agent actor runs as tasks on the
// dispatch pool, not as actors, and forwards their results, which the grain decides on
// and commits. A call that ends without an answer (panicked past its restart limit, or
// stalled past the agent actor's watchdog) is
// reported lost and failed by the grain, the orchestrator's exactly like a
// sub-agent's.
//
//	Grain[session_id]
//	├─ agent-orchestrator ─ (step-runner, tool-runner ×n: tasks, not actors)
//	└─ agent-{sub_agent_id} ─ (step-runner, tool-runner ×n)
//
// # Failure
//
// A failed append marks the state untrusted: the grain reloads from the journal before
// deciding anything else (a new generation for its agent actors, whose calls with lost
// results become due again; a recorded tool result is never run again). An append that
// conflicts means another activation owns the stream: this one stops. A crashing command
// answers INTERNAL and restarts the grain, which reloads.
package session
