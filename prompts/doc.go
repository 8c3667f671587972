// Package prompts owns Fathom's prompt templates: Go text/template files (*.md.tmpl)
// embedded in the binary, parsed and checked once, and rendered per call.
//
// # Templates
//
// Every template is named by its file's path without the ".md.tmpl" extension:
//
//   - orchestrator: the session grain's own calls; data [AgentData] with Phase "plan"
//     (the planning call, answered with the JSON plan), "replan" (after a step failed
//     for good: the JSON plan of the remaining work) or "synthesize" (the closing
//     summary written from the sub-agents' hand-offs).
//   - researcher, coder, writer, reviewer: the system prompts of the sub-agents that
//     plan steps of type research, code, write and review are delegated to; data
//     [AgentData]. Each ends its work with a JSON hand-off (see _shared/handoff).
//   - executor: the system prompt of a step the orchestrator runs itself (type custom);
//     data [ExecutorData].
//   - summarizer: the system prompt of a rolling-summary regeneration; data
//     [SummarizerData].
//   - agents/<name>: the system prompt of an agent of the node's own (the agents section
//     of the configuration file, fathom.Config.Agents), added by [Set.WithAgents]; data
//     [AgentData] with AgentType the agent's name. It may include the partials.
//   - _shared/artifact_conventions, _shared/tool_guidelines, _shared/hitl_protocols,
//     _shared/handoff: partials the agent templates include with
//     {{template "_shared/tool_guidelines" .}}; they receive [AgentData].
//
// The first line of each top-level template is a role marker ("FATHOM-ROLE: coder");
// the orchestrator's second line is its phase ("FATHOM-PHASE: synthesize"). The
// built-in demo model (llm/mock) and tests key on these lines.
//
// Besides text/template's built-ins, templates may call join (strings.Join), has
// (whether a list of strings holds a value: {{if has .Tools "ask_human"}}) and agents
// (the node's own agents, [AgentInfo]: the orchestrator lists them in its team table and
// among the step types with {{range agents}}; empty without any, so the prompt is then
// what it always was).
//
// # Overrides
//
// [Load] reads a directory laid out like this package (orchestrator.md.tmpl,
// _shared/tool_guidelines.md.tmpl, ...): each file found replaces the embedded template
// of the same name, every other template keeps its default. Extra partials may be added
// under _shared/. The whole set is parsed and then rendered once with sample data, so a
// syntax error or a reference to a field that does not exist fails Load with a
// [*TemplateError] naming the file and line, at start rather than in the middle of a
// session.
//
//	set, err := prompts.Load("/etc/fathom/prompts")
//	if err != nil {
//		return err // e.g. /etc/fathom/prompts/coder.md.tmpl:12:3: executing "coder" at <.Nope>: ...
//	}
//	sys, err := set.Render(prompts.Coder, prompts.AgentData{AgentType: "coder", ...})
package prompts
