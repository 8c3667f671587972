// Package agent is Fathom's agent actor: the one loop, in actors, that runs the calls of
// a session's orchestrator and of every sub-agent it delegates to.
//
// # The supervision tree
//
// A session grain (actors/session) decides and commits every event; it runs no call
// itself. Its children are agent actors ([Actor]), one per agent, and each runs its
// agent's calls as tasks ([Call]) on a warm worker of the dispatch pool (actors/dispatch),
// not in actors of their own: spawning, watching and stopping a child per call cost the
// node more than the rest of a step's engine work.
//
//	Grain[session_id]                      actors/session: commit pipeline, timers, HITL
//	├─ agent-orchestrator                  the orchestrator (id Orchestrator, "")
//	│    ├─ (step-runner)                  its pending LLM call (plan, step, synthesis)
//	│    └─ (tool-runner ×n)               its pending tool calls
//	└─ agent-{sub_agent_id}                a running sub-agent (researcher-1, …)
//	     ├─ (step-runner)                  its pending LLM call, or a Go function's run
//	     └─ (tool-runner ×n)               its pending tool calls
//
// The orchestrator is simply the agent whose answers are plans and syntheses: its pending
// call is the state's pending_call, its pending tools the session's pending_tools. A
// sub-agent's are in SessionState.sub_agents[id]. What the answers mean is decided by
// the grain over the session core (actors/session/core, one turn function core/turn.go
// for both), never here.
//
// # Work, results and losses
//
// The actor holds no state worth keeping. After every commit the grain tells it the
// committed session state ([Work]); it starts what the state says is due for its agent
// and is not running yet — the pending LLM call, the pending tool calls up to the node's
// parallelism, never a call a human answers (ask_human, approvals) and no tool while
// the session is held at an interrupt — as calls made by the session ([Calls]). A call's
// end comes back to the actor as one message, and its result goes unchanged to the
// grain, which decides and commits the events and sends new Work. A restarted actor asks
// for Work again ([NeedWork]).
//
// A call that ends without an answer — it panicked more than 3 times in a minute (a
// panicking call is run again, as a crashed child was restarted, and the observer sees
// the same supervision events, of {agent actor}/step-runner$n or tool-runner$n), or its
// LLM call ran past the call timeout (the watchdog: LLMTimeout + 1 minute, the same for
// the orchestrator and every sub-agent) — is cancelled and reported lost ([CallLost],
// [ToolLost]), and the grain fails that call. A call the actor abandons (the watchdog,
// [Abandon], the actor's stop or restart: the session passivated, moved, ended or was
// cancelled) has its context cancelled, and its late end is dropped: the actor matches
// every end to the call it started.
//
// # Generations and the commit pipeline
//
// Calls already started are never started twice by one actor in one generation (the
// grain's count of loads from the journal): a recorded tool result is never run again,
// and a reload after a failed write makes the calls whose results were lost due again.
// The grain may start the orchestrator's LLM call while the events that make it pending
// are still being appended: that Work has CallOnly set (the call has no effect the
// journal must know of first; tools wait for a durable state, except the calls of tools
// without effects that Work.EarlyTools names), and if the append fails the grain
// abandons the call ([Abandon]); an early tool call runs to its end, and its result is
// dropped or taken as the reloaded state says.
//
// # Go-function agents
//
// An agent may be a Go function (core.AgentFunc) instead of a model: its run is one
// call ([FuncCall]) in place of an LLM call. The function gets the
// brief (core.FuncBrief: goal, step, task, upstream hand-offs) and its hand-off is
// returned to the grain as the call's answer (core.FuncAnswer), recorded as
// llm_requested/llm_responded with model "go:{name}" and read by ParseHandoff like a
// model agent's final answer. An error is a failed call: the step is retried.
//
// # Sub-agents and hand-offs
//
// The specialists (researcher, coder, writer, reviewer, and the node's own agents of the
// session core's registry, core.Agents) run with isolated contexts: a sub-agent's task
// briefs, turns and tool results are recorded in the session's event stream tagged with
// its sub_agent_id and folded into SessionState.sub_agents by the session's Apply; they
// never enter the orchestrator's context, which sees the hand-off only. Sub-agents never
// talk to each other. The profiles and the hand-off are pure domain, in the session core:
// ParseHandoff reads the model's interpretation tolerantly, HandoffFacts adds what code
// knows for certain, and DecideHandoff says what the orchestrator does next.
package agent
