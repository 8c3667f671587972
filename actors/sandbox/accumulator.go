package sandbox

import (
	"github.com/fathom-agents/fathom/messages/fsp"
)

// Result is a finished execution as the caller (and, rendered as JSON, the LLM) sees it.
type Result struct {
	// Status is the terminal status: completed (whatever the exit code) or failed.
	// Timeouts, OOM and cancellation are reported as ToolErrors instead.
	Status fsp.Status `json:"status"`
	// ExitCode is the process exit code, nil if it was killed by a signal.
	ExitCode *int `json:"exit_code"`
	// Stdout and Stderr are the program's output streams.
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// DurationMS is the wall-clock execution time the sandbox measured.
	DurationMS int64 `json:"duration_ms"`
	// ResourceUsage is what the execution consumed, when the sandbox says.
	ResourceUsage *fsp.ResourceUsage `json:"resource_usage,omitempty"`
	// Truncated is true when the client kept only the first MaxOutputBytes of a stream.
	Truncated bool `json:"output_truncated,omitempty"`
}

// Chunk is a piece of an execution's output as it streams.
type Chunk struct {
	// ExecutionID is the FSP execution id.
	ExecutionID string
	// Stream is fsp.TypeStdout or fsp.TypeStderr.
	Stream fsp.Type
	// Data is the text, as the sandbox sent it.
	Data string
}

// OutputFunc receives output chunks live, in order per stream. It is called from a
// connection actor's mailbox and must not block (hand the chunk to a non-blocking
// publisher such as live/feed).
type OutputFunc func(Chunk)

// Accumulator folds one execution's frames into its outcome, as the protocol's
// implementation notes describe: output chunks are appended, the last status is kept,
// and the result's exit code, duration and resource usage are recorded. It is not safe
// for concurrent use; each connection actor owns the accumulators of its executions.
type Accumulator struct {
	// ExecutionID is the execution the frames belong to.
	ExecutionID string
	// Acked is true once the sandbox acknowledged the execute.
	Acked bool
	// Status is the last status received.
	Status fsp.Status
	// Stdout and Stderr hold the output so far (at most Limit bytes each).
	Stdout, Stderr []byte
	// ExitCode, DurationMS and ResourceUsage come from the result frame.
	ExitCode      *int
	DurationMS    int64
	ResourceUsage *fsp.ResourceUsage
	// Err is the error frame that ended the execution, if any.
	Err *fsp.Error
	// Finished is true once a result or error frame arrived: nothing more will come.
	Finished bool
	// Limit bounds each output stream; zero means unbounded.
	Limit int64
	// Truncated is true when output beyond Limit was dropped.
	Truncated bool
}

// NewAccumulator returns an empty accumulator for execution id keeping at most limit
// bytes of each stream (zero: unbounded).
func NewAccumulator(id string, limit int64) *Accumulator {
	return &Accumulator{ExecutionID: id, Limit: limit}
}

// Apply folds one frame of the execution in. Frames of other executions and frames that
// carry nothing for the outcome (pong) are ignored.
func (a *Accumulator) Apply(m fsp.Message) {
	if m.MessageHeader().ID != a.ExecutionID {
		return
	}
	switch f := m.(type) {
	case *fsp.Ack:
		a.Acked = true
	case *fsp.StatusUpdate:
		a.Status = f.Status
	case *fsp.Output:
		if f.Type == fsp.TypeStderr {
			a.Stderr = a.appendCapped(a.Stderr, f.Data)
		} else {
			a.Stdout = a.appendCapped(a.Stdout, f.Data)
		}
	case *fsp.Result:
		a.ExitCode, a.DurationMS, a.ResourceUsage = f.ExitCode, f.DurationMS, f.ResourceUsage
		a.Finished = true
	case *fsp.Error:
		a.Err = f
		a.Finished = true
	}
}

func (a *Accumulator) appendCapped(dst []byte, s string) []byte {
	if a.Limit > 0 && int64(len(dst)+len(s)) > a.Limit {
		a.Truncated = true
		s = s[:max(0, a.Limit-int64(len(dst)))]
	}
	return append(dst, s...)
}

// IsTerminal reports whether a terminal status arrived (completed, failed, timeout, oom,
// cancelled).
func (a *Accumulator) IsTerminal() bool { return a.Status.Terminal() }

// Result returns the outcome so far.
func (a *Accumulator) Result() *Result {
	return &Result{
		Status: a.Status, ExitCode: a.ExitCode, Stdout: string(a.Stdout), Stderr: string(a.Stderr),
		DurationMS: a.DurationMS, ResourceUsage: a.ResourceUsage, Truncated: a.Truncated,
	}
}
