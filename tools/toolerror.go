package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrorType classifies a tool failure for the LLM and for retry decisions.
type ErrorType string

// The error types of the seed design.
const (
	// ErrValidation: the arguments did not match the tool's schema.
	ErrValidation ErrorType = "validation"
	// ErrExecution: the tool ran and failed (or panicked).
	ErrExecution ErrorType = "execution"
	// ErrTimeout: the tool did not finish in time.
	ErrTimeout ErrorType = "timeout"
	// ErrSandbox: the sandbox that runs external tools was unavailable or failed.
	ErrSandbox ErrorType = "sandbox"
	// ErrPermission: the tool may not run here (policy, missing approval).
	ErrPermission ErrorType = "permission"
	// ErrRejected: a human rejected the call (or nobody decided on it in time), so it
	// never ran; the message is the human's.
	ErrRejected ErrorType = "rejected"
)

// Field is one entry of a ToolError's context. Context is ordered so the text the LLM
// sees is stable.
type Field struct {
	Key   string
	Value any
}

// ToolError is a structured tool failure: enough for the LLM to understand it and,
// when Retryable, to try again differently. It implements error.
type ToolError struct {
	// ToolName is the tool that failed.
	ToolName string `json:"tool_name"`
	// Type classifies the failure.
	Type ErrorType `json:"error_type"`
	// Message says what went wrong.
	Message string `json:"message"`
	// Retryable is true when a new attempt (possibly with other arguments) may succeed.
	Retryable bool `json:"retryable"`
	// Context carries the original arguments, partial results or hints. Only validation
	// and execution errors show it to the LLM.
	Context []Field `json:"-"`
	// Config is true when the failure is the node's configuration's (the tool has no
	// backend configured here): no attempt, with any arguments, succeeds until the node
	// is reconfigured. Never retryable.
	Config bool `json:"config,omitempty"`
}

// NotConfigured marks e as a configuration failure (Config, not retryable) and
// returns it.
func (e *ToolError) NotConfigured() *ToolError {
	e.Config, e.Retryable = true, false
	return e
}

// Error implements error.
func (e *ToolError) Error() string {
	return fmt.Sprintf("tool %s: %s error: %s", e.ToolName, e.Type, e.Message)
}

// ValidationError is for arguments that do not match the schema. Retryable: the LLM
// can correct them.
func ValidationError(tool, message string, context ...Field) *ToolError {
	return &ToolError{ToolName: tool, Type: ErrValidation, Message: message, Retryable: true, Context: context}
}

// ExecutionError is for a tool that ran and failed. retryable says whether trying again
// may help.
func ExecutionError(tool, message string, retryable bool, context ...Field) *ToolError {
	return &ToolError{ToolName: tool, Type: ErrExecution, Message: message, Retryable: retryable, Context: context}
}

// TimeoutError is for a tool that did not finish within timeout. Not retryable.
func TimeoutError(tool string, timeout time.Duration) *ToolError {
	ms := timeout.Milliseconds()
	return &ToolError{ToolName: tool, Type: ErrTimeout, Message: fmt.Sprintf("Execution timed out after %dms", ms),
		Context: []Field{{"timeout_ms", ms}}}
}

// SandboxError is for an external tool whose sandbox was unavailable or failed.
func SandboxError(tool, message string, retryable bool) *ToolError {
	return &ToolError{ToolName: tool, Type: ErrSandbox, Message: message, Retryable: retryable}
}

// PermissionError is for a tool that may not run. Not retryable.
func PermissionError(tool, message string) *ToolError {
	return &ToolError{ToolName: tool, Type: ErrPermission, Message: message}
}

// RejectedError is for a call a human rejected when asked to approve it (or that
// nobody approved in time): it never ran, and message (the human's) says why. Not
// retryable: the same call would wait for the same human again.
func RejectedError(tool, message string) *ToolError {
	return &ToolError{ToolName: tool, Type: ErrRejected, Message: message}
}

// FromAPIError wraps an HTTP API failure a tool ran into: "API error: STATUS",
// retryable for 429, 500, 502, 503 and 504.
func FromAPIError(tool string, status int, body string) *ToolError {
	retryable := status == 429 || status == 500 || status == 502 || status == 503 || status == 504
	return &ToolError{ToolName: tool, Type: ErrExecution, Message: fmt.Sprintf("API error: %d", status), Retryable: retryable,
		Context: []Field{{"status", status}, {"body", body}}}
}

// FromPanic converts a recovered panic value into a non-retryable execution error.
func FromPanic(tool string, recovered any) *ToolError {
	return &ToolError{ToolName: tool, Type: ErrExecution, Message: fmt.Sprintf("Tool crashed: %v", recovered),
		Context: []Field{{"exception_type", fmt.Sprintf("%T", recovered)}}}
}

// Normalize turns any error a tool returned into a ToolError: a ToolError anywhere in
// the chain is kept as is (its name filled in if empty); anything else becomes a
// retryable execution error with the error's text.
func Normalize(tool string, err error) *ToolError {
	if err == nil {
		return nil
	}
	var te *ToolError
	if errors.As(err, &te) {
		if te.ToolName == "" {
			cp := *te
			cp.ToolName = tool
			return &cp
		}
		return te
	}
	return ExecutionError(tool, err.Error(), true)
}

// FormatForLLM renders the error as the tool result the LLM reads, exactly in the
// seed design's format:
//
//	Tool `web_search` failed.
//	Error type: timeout
//	Message: Execution timed out after 30000ms
//	This error is not retryable.
//
// Context is shown only for validation and execution errors (other types could expose
// internals), rendered as "key: value" pairs with values in the seed's notation (maps as
// %{k: v}, null as nil).
func (e *ToolError) FormatForLLM() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tool `%s` failed.\nError type: %s\nMessage: %s\n", e.ToolName, e.Type, e.Message)
	if e.Retryable {
		b.WriteString("This error may be resolved by trying again with different parameters.")
	} else {
		b.WriteString("This error is not retryable.")
	}
	if len(e.Context) > 0 && (e.Type == ErrValidation || e.Type == ErrExecution) {
		b.WriteString("\nContext: ")
		for i, f := range e.Context {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(f.Key)
			b.WriteString(": ")
			inspect(&b, f.Value)
		}
	}
	return b.String()
}

// inspect writes v in the seed's (Elixir) notation. json.RawMessage values keep their
// key order, so tool arguments render as the LLM sent them.
func inspect(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("nil")
	case json.RawMessage:
		dec := json.NewDecoder(bytes.NewReader(x))
		dec.UseNumber()
		if err := inspectJSON(b, dec); err != nil {
			b.WriteString(strconv.Quote(string(x)))
		}
	case string:
		b.WriteString(strconv.Quote(x))
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64, json.Number:
		fmt.Fprint(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			inspect(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("%{")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k + ": ")
			inspect(b, x[k])
		}
		b.WriteByte('}')
	case error:
		b.WriteString(strconv.Quote(x.Error()))
	default:
		fmt.Fprintf(b, "%v", x)
	}
}

func inspectJSON(b *strings.Builder, dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			b.WriteString("%{")
			for i := 0; dec.More(); i++ {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(b, "%v: ", k)
				if err := inspectJSON(b, dec); err != nil {
					return err
				}
			}
			b.WriteByte('}')
		case '[':
			b.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b.WriteString(", ")
				}
				if err := inspectJSON(b, dec); err != nil {
					return err
				}
			}
			b.WriteByte(']')
		}
		_, err := dec.Token() // the closing delimiter
		return err
	default:
		inspect(b, t)
		return nil
	}
}
