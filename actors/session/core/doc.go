// Package core is the pure domain of a Fathom session: how events change a session's
// state, and what a session decides to do next. It has no actor system, no clock and
// no I/O of its own (the import rules of internal/archtest check that it imports no
// Proto.Actor): every function takes the state and an input and returns events or a
// state. actors/session is the shell around it — the grain, the commit pipeline, the
// timers and the child actors that make the calls.
//
// # The fold
//
// [Apply] folds one event into a [messages.SessionState]; it is the single definition of
// how events change a session, used by the grain, recovery, time travel ([TimelineOf],
// [StepEndSeq]), forks and the CLI's offline readers alike. A bad event (another
// session's, a sequence gap, a payload that does not fit the state) is an error wrapping
// [ErrBadEvent], never a panic and never silently skipped. [EncodeEvents],
// [DecodeRecord], [EncodeState] and [DecodeState] are the stored forms, [FromSnapshot]
// the state a snapshot holds; reading a journal and folding it (Load, Events,
// StateAtStep) is actors/session/replay's, so the core reads nothing.
//
// # Decisions
//
// A decision is a function of (state, input, [Config], now) returning the events to
// commit. [Decide] is the one entry a shell uses: it takes any input (a command request,
// a call's result, a timer's [RetryDue], [InterruptDue] or [HumanDue], [QueuedDue],
// [SummaryDone], [WebhookDone], a [ForkInput]), stamps a command's events with its
// caller and returns them with the state they reach; [DueOf] (what is due) and
// [Terminal] are the queries. Behind it, commands ([DecideStart], [DecideCancel],
// [DecidePause], [DecideResume], [DecideSetBreakpoint], [DecideClearBreakpoints],
// [DecideProvideInput], [DecideFork]) return an error when refused (a [*CommandError] carrying the reason), and results of
// work ([DecideLLMResult] for the orchestrator's and the sub-agents' model answers,
// [DecideToolResult], [DecideRetry], [DecideHitlDeadline], [DecideInterruptDeadline])
// always decide something. An [EventBuilder] stamps the events of one decision with
// consecutive seqs and keeps a projection of the state they reach, so a decision can
// read its own earlier events.
//
// [Config] holds only settings a decision reads (model, bounds, budgets, step retries,
// agents, approvals, reasoning, context budget); the shell's (call and journal
// timeouts, passivation, leases, snapshot cadence, pipeline depth, drain, tenancy,
// retrieval) are actors/session's Config, which embeds this one.
//
// # Plans, briefs and requests
//
// The planner's answer is parsed into plan steps (ids, types, dependencies, human
// input fields, sub-agent ids) and refused with a re-prompt when unusable. A step of
// type research, code, write or review runs in a sub-agent ([ProfileFor]); its task
// brief quotes the hand-offs ([ParseHandoff], [HandoffText]) of the steps it depends
// on, and [DecideHandoff] says what the orchestrator does after one. [BuildRequest]
// and [History] build the LLM request of a step call from the state alone; the shell
// adds retrieval (summary, semantic hits) within [Config.ContextConfig]'s budget.
//
// # Example
//
// Folding events (as a journal reader does):
//
//	st := core.NewState("s1")
//	for _, ev := range events {
//		if err := core.Apply(st, ev); err != nil {
//			return fmt.Errorf("fold event %d: %w", ev.GetSeq(), err)
//		}
//	}
package core
