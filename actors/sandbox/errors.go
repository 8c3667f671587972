package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/messages/fsp"
	"github.com/fathom-agents/fathom/tools"
)

// ErrRetriesExhausted is the failure a connection escalates to its supervisor after
// Config.MaxRetries failed reconnection attempts in a row (see RetriesExhaustedError).
var ErrRetriesExhausted = errors.New("sandbox connection: reconnection retries exhausted")

// RetriesExhaustedError is the reason a connection actor fails with when it gives up
// reconnecting; its supervisor restarts it after a delay. It wraps ErrRetriesExhausted.
type RetriesExhaustedError struct {
	// Connection is the connection actor's name.
	Connection string
	// Attempts is the number of failed attempts in a row.
	Attempts int
	// Last is the last dial error.
	Last error
}

// Error implements error.
func (e *RetriesExhaustedError) Error() string {
	return fmt.Sprintf("sandbox connection %s: %d reconnection attempts failed, last: %v", e.Connection, e.Attempts, e.Last)
}

// Unwrap returns ErrRetriesExhausted.
func (e *RetriesExhaustedError) Unwrap() error { return ErrRetriesExhausted }

// DialError is a failed WebSocket dial.
type DialError struct {
	// URL is the sandbox URL.
	URL string
	// Status is the HTTP status of a refused upgrade, 0 if there was no HTTP answer.
	Status int
	// Err is the underlying error.
	Err error
}

// Error implements error.
func (e *DialError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("dial %s: upgrade refused with HTTP %d: %v", e.URL, e.Status, e.Err)
	}
	return fmt.Sprintf("dial %s: %v", e.URL, e.Err)
}

// Unwrap returns the underlying error.
func (e *DialError) Unwrap() error { return e.Err }

// Auth reports whether the sandbox refused the credentials (HTTP 401 or 403).
func (e *DialError) Auth() bool { return e.Status == 401 || e.Status == 403 }

// The ToolErrors of the protocol's failure cases, one constructor per row of the seed
// design's mapping table (dimension 21, gap 2), with FSP's error codes refined by
// category:
//
//	case                                  ToolError type   retryable
//	disconnect while pending              sandbox          yes
//	malformed frame                       sandbox          no
//	execution timeout (client or status)  timeout          no
//	error frame, resource or protocol     execution        frame's flag (no)
//	error frame TIMEOUT                   timeout          no
//	error frame, infrastructure           sandbox          frame's flag (yes)
//	status oom                            execution        no
//	status cancelled                      execution        yes
//	pool exhausted / sandbox unreachable  sandbox          yes
//	credentials refused at upgrade        sandbox          no

func disconnectedError(tool string, acked bool, cause error) *tools.ToolError {
	when := "before the sandbox acknowledged it"
	if acked {
		when = "while it ran"
	}
	return tools.SandboxError(tool, fmt.Sprintf("the connection to the sandbox was lost %s (%v); the execution did not finish and can be retried", when, cause), true)
}

func malformedError(tool string, cause error) *tools.ToolError {
	return tools.SandboxError(tool, fmt.Sprintf("the sandbox sent a malformed frame (%v); the execution's outcome is unknown", cause), false)
}

func poolExhaustedError(tool string, size int, wait time.Duration) *tools.ToolError {
	return tools.SandboxError(tool, fmt.Sprintf("sandbox pool exhausted: all %d connections stayed busy for %s; try again shortly", size, wait), true)
}

func unavailableError(tool, url string, last error) *tools.ToolError {
	msg := "sandbox unavailable: no connection to " + url + " is up"
	if last != nil {
		msg += " (last error: " + last.Error() + ")"
	}
	return tools.SandboxError(tool, msg, true)
}

func authError(tool string, e *DialError) *tools.ToolError {
	return tools.SandboxError(tool, fmt.Sprintf("the sandbox at %s refused the credentials (HTTP %d); retrying cannot help: check SANDBOX_API_KEY (--sandbox-token) or SANDBOX_REFRESH_URL", e.URL, e.Status), false)
}

// errorFrameError maps a sandbox error frame to a ToolError: TIMEOUT is a timeout
// (limit is the execution's time limit), the infrastructure codes are sandbox errors,
// the rest (resource and protocol codes, unknown codes) are execution errors; the
// frame's retryable flag is kept.
func errorFrameError(tool string, e *fsp.Error, limit time.Duration) *tools.ToolError {
	if e.Code == fsp.CodeTimeout {
		return tools.TimeoutError(tool, limit)
	}
	msg := fmt.Sprintf("%s: %s", e.Code, e.Message)
	if e.Code.Category() == fsp.CategoryInfrastructure {
		return tools.SandboxError(tool, "sandbox error "+msg, e.Retryable)
	}
	return tools.ExecutionError(tool, msg, e.Retryable, tools.Field{Key: "code", Value: string(e.Code)})
}

// outcomeError returns the ToolError a finished execution ends in, or nil when its
// Result is the answer (completed or failed: the program ran; its exit code and stderr
// say how it went).
func outcomeError(tool string, a *Accumulator, limit time.Duration, memoryMB int64) *tools.ToolError {
	if a.Err != nil {
		return errorFrameError(tool, a.Err, limit)
	}
	switch a.Status {
	case fsp.StatusTimeout:
		return tools.TimeoutError(tool, limit)
	case fsp.StatusOOM:
		return tools.ExecutionError(tool, fmt.Sprintf("the program exceeded its memory limit of %d MB and was killed", memoryMB), false,
			tools.Field{Key: "stdout", Value: tail(a.Stdout)}, tools.Field{Key: "stderr", Value: tail(a.Stderr)})
	case fsp.StatusCancelled:
		return tools.ExecutionError(tool, "the execution was cancelled", true)
	}
	return nil
}

// tail returns the last 2 KiB of output, for error context.
func tail(b []byte) string {
	const n = 2048
	if len(b) > n {
		return "…" + strings.ToValidUTF8(string(b[len(b)-n:]), "")
	}
	return string(b)
}

func timeoutError(tool string, limit time.Duration) *tools.ToolError {
	return tools.TimeoutError(tool, limit)
}

func invalidRequestError(tool string, err error) *tools.ToolError {
	return tools.ExecutionError(tool, "the request cannot be sent to the sandbox: "+err.Error(), false)
}
