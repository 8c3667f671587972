// Package session is the session grain: the actor shell around the pure session core
// (actors/session/core), one virtual actor (cluster kind "Session") per session.
//
// # The grain
//
// The grain holds a session's event-sourced state and is the only writer of its
// journal stream. Every change goes through one path: decide events with the core
// (core.Decide*), apply them to a copy, append them with the expected sequence, and
// only then make the copy the state and publish the events (commit; the commit
// pipeline of pipeline.go lets the answer of the orchestrator's call be decided while
// earlier appends are in flight). The grain also owns the session's timers (step
// retries, interrupt and human-input deadlines), its lease in the session index,
// snapshots, the summarizer and the trace spans of steps and sub-agent runs.
//
// # Agents and runners
//
// The grain runs no call itself. Its children are agent actors (actors/agent): one for
// the orchestrator while the session runs, one per running sub-agent. After every
// commit the grain sends each the committed state (agent.Work); the agent actor starts
// what is due in step-runner (runner.go: one LLM call, request built from the state)
// and tool-runner (toolrunner.go: one recorded tool call through the executor)
// children made by this package (agentCalls, agents.go), and forwards their results,
// which the grain decides on and commits. A call whose runner stops without an answer
// (crashed past its restart limit, or stalled past the agent actor's watchdog) is
// reported lost and failed by the grain, the orchestrator's exactly like a
// sub-agent's.
//
//	Grain[session_id]
//	├─ agent-orchestrator ─ step-runner, tool-runner ×n
//	└─ agent-{sub_agent_id} ─ step-runner, tool-runner ×n
//
// # Failure
//
// A failed append marks the state untrusted: the grain reloads from the journal before
// deciding anything else (a new generation for its agent actors, whose calls with lost
// results become due again; a recorded tool result is never run again). An append that
// conflicts means another activation owns the stream: this one stops. A crashing command
// answers INTERNAL and restarts the grain, which reloads.
package session
