// Package transcript is the read model of a session as a conversation: it folds the
// session's journal events (messages.Event, in seq order) into what each agent said and
// did, for the web console's session page and GET /v1/sessions/{id}/transcript.
//
// A Transcript has one lane (Agent) for the orchestrator and one per sub-agent, each a
// list of entries in seq order: the goal, the plan, each model answer (its text, its
// reasoning when the provider returned it; a call still in flight is a pending answer),
// each tool call with its arguments and its result or ToolError (and the artifacts it
// wrote, such as a result too large to keep in the journal), the task a sub-agent was
// given and its hand-off, human questions with their answers, approvals with the
// decision and who took it, a crossed budget, and the end of the run. The final result
// of a completed session is also the Transcript's Result.
//
// Texts are Values: model text, results and hand-off summaries carry their markdown
// rendered to HTML (Markdown: raw HTML dropped, only http, https, mailto and relative
// links kept, fenced code highlighted with CSS classes, CodeCSS); JSON is flagged so a
// page can pretty-print it. A value larger than Options.MaxValue is cut, flagged, and
// names where its whole text is served (FullValue renders it).
//
// The package imports only the wire formats (messages) and its markdown libraries: a
// reader folds events it got from anywhere (the gateway reads them from the live feed).
//
//	b := transcript.New("s-1", transcript.Options{})
//	for _, ev := range events { // seq order, up to the point wanted
//		b.Add(ev)
//	}
//	t := b.Transcript()
package transcript
