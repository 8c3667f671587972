// Package summarizer runs summary regenerations in the background: a supervised pool of
// Summarizer workers (the node's /summarizers) that regenerate a session's rolling
// summary from scratch with the "summarizer" prompt and reply with the result. The
// session grain never waits for it: it sends a Request and carries on; the answer comes
// back later as a message, which the grain turns into a summary_updated event.
//
// # Protocol
//
// Send a *Request to the pool's PID (with ctx.Request, so the pool knows whom to answer,
// or set ReplyTo). Every Request gets exactly one answer, sent to the requester:
//
//   - *Result: the new summary (Content, Through, Tokens). Persist it as summary_updated
//     if Through is newer than the summary the session has; otherwise drop it.
//   - *Failure: Err says why (llm errors, timeouts, a crashed worker, or one of the
//     sentinels below). The old summary stays; try again at the next trigger.
//
// One job per session at a time: a Request for a session whose job is running waits
// until that job ends, and a newer Request for the same session replaces a waiting one
// (the replaced one is answered with ErrSuperseded). When all workers are busy, requests
// queue (bounded by Config.MaxQueued; beyond it ErrOverloaded).
//
// # Supervision
//
// Each worker makes its LLM call on a goroutine of its own, so its mailbox stays free
// and a slow model only occupies a worker until Config.Timeout. A panic in the provider
// is re-raised inside the worker actor: the pool's one-for-one strategy restarts the
// worker (a SupervisorEvent on the event stream, visible to operators), the job is
// answered with a Failure wrapping ErrCrashed, and the next job runs on the fresh worker.
//
//	pid, err := summarizer.Spawn(system.Root, "summarizers", summarizer.Config{Provider: p})
//	ctx.Request(pid, &summarizer.Request{SessionID: id, Input: memory.SummaryInput{Previous: s, Messages: msgs}})
//	// later, in Receive: case *summarizer.Result: ...; case *summarizer.Failure: ...
package summarizer
