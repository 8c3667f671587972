package summarizer

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
)

// Request asks for a session's summary to be regenerated. The messages never leave the
// node, so they are plain Go values.
type Request struct {
	// SessionID identifies the session: one job per session at a time.
	SessionID string
	// Input is the previous summary and the recorded messages (oldest first). The pool
	// keeps the slice until the job ends: pass a copy the grain will not modify.
	Input memory.SummaryInput
	// ReplyTo receives the answer; nil means the request's sender.
	ReplyTo *actor.PID
	// Tokenizer counts the new summary (Result.Tokens), so the count matches the
	// session's own; nil means the pool's (Config.Tokenizer).
	Tokenizer *memory.Tokenizer
}

// Result is a regenerated summary: the content of a summary_updated event.
type Result struct {
	// SessionID is the request's session.
	SessionID string
	// Content is the new summary (full replacement).
	Content string
	// Through is the Seq of the newest message the summary covers.
	Through uint64
	// Tokens is the content's token count (memory.Tokenizer.Count).
	Tokens int
	// From is the Seq of the oldest message the model saw verbatim.
	From uint64
	// Model and Usage are the provider's.
	Model string
	Usage llm.Usage
	// Duration is how long the model took.
	Duration time.Duration
}

// Failure says a request produced no summary. The session keeps its old summary.
type Failure struct {
	// SessionID is the request's session.
	SessionID string
	// Through is what the summary would have covered (0 if unknown).
	Through uint64
	// Err is the cause: an llm error, or wraps one of the sentinels below.
	Err error
}

// Sentinel causes of a Failure. Compare with errors.Is.
var (
	// ErrSuperseded: a newer request for the same session replaced this one before it ran.
	ErrSuperseded = errors.New("summarizer: superseded by a newer request")
	// ErrOverloaded: too many sessions were waiting for a worker.
	ErrOverloaded = errors.New("summarizer: queue full")
	// ErrTimeout: the model did not answer within Config.Timeout.
	ErrTimeout = errors.New("summarizer: model timed out")
	// ErrCrashed: the worker crashed (the provider panicked) and was restarted.
	ErrCrashed = errors.New("summarizer: worker crashed")
	// ErrEmpty: the model answered with no text.
	ErrEmpty = errors.New("summarizer: empty summary")
	// ErrInvalid: the request cannot be run (no session id, no messages, bad input).
	ErrInvalid = errors.New("summarizer: invalid request")
)

// job is one accepted request.
type job struct {
	id      uint64
	req     *Request
	replyTo *actor.PID
	worker  *actor.PID // set while running
}

// runJob hands a job to a worker.
type runJob struct{ job *job }

// jobDone is a worker's report to the pool: exactly one of res and err is set.
type jobDone struct {
	id      uint64
	session string
	worker  *actor.PID
	res     *Result
	err     error
	through uint64
	// stopping is set when the worker is being restarted or stopped: it is not idle;
	// after a restart it says so with workerReady.
	stopping bool
}

// workerReady tells the pool a worker (re)started and can take a job.
type workerReady struct{ worker *actor.PID }
