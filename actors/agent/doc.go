// Package subagent owns Fathom's sub-agents: the specialists (researcher, coder, writer,
// reviewer, and the node's own agents of the session core's registry, core.Agents) a
// session delegates plan steps to, each with an isolated context.
//
// # Hub and spoke
//
// The session grain is the orchestrator. A plan step of type research, code, write or
// review, or whose type names an agent of the node's own, runs a sub-agent of that agent
// (see Agents.ProfileFor in actors/session/core) as a supervised child
// actor of the grain ([Actor]). Sub-agents never talk to each other: what one learns
// reaches another only through the orchestrator, as a structured hand-off
// ([messages.SubagentResult]) that the next sub-agent's task brief quotes.
//
// # Isolation and resumption
//
// A sub-agent's context (its task briefs, assistant turns and tool results) is recorded
// in the session's event stream, tagged with its sub_agent_id, and folded into
// SessionState.sub_agents by the session's Apply: it never enters the orchestrator's
// context (which sees the hand-off only), and it survives crashes, passivation and
// failover like every other event. A later run of the same sub-agent (a retry of its
// step, or a step naming it in sub_agent_id) continues that context.
//
// The Actor itself holds no state worth keeping: it is told the committed session
// state ([Work]) and starts what that state says is due (the pending LLM call, the
// pending tool calls) in children made by the session ([Calls]); their results go to
// the grain, which decides and commits the events. A restarted Actor asks for work
// again ([NeedWork]); a recorded tool result is never run again.
//
// # Go-function agents
//
// An agent may be a Go function (core.AgentFunc) instead of a model: its run is one
// "call" made by a [FuncCall] child in place of an LLM child. The function gets the
// brief (core.FuncBrief: goal, step, task, upstream hand-offs) and its hand-off is
// returned to the grain as the call's answer (core.FuncAnswer), recorded as
// llm_requested/llm_responded with model "go:{name}" and read by ParseHandoff like a
// model agent's final answer. An error is a failed call: the step is retried.
//
// # Hand-off
//
// A sub-agent ends its run by answering without tool calls. The profiles and the
// hand-off are pure domain, in the session core (actors/session/core): ParseHandoff
// reads the model's interpretation (status, summary, recommendations, blockers,
// confidence and the type-specific fields) tolerantly: malformed output yields status
// partial with the raw text as summary, never an error. HandoffFacts adds what code
// knows for certain (artifacts, tools used, token usage, duration), and DecideHandoff
// says what the orchestrator does next.
package agent
