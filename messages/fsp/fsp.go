package fsp

import (
	"strconv"
	"strings"
	"time"
)

// Version is the protocol version this package speaks, carried in every frame's "v" and in
// the upgrade request's X-Protocol-Version header.
const Version = 1

// Upgrade request and endpoint.
const (
	// Path is the sandbox's WebSocket endpoint.
	Path = "/ws"
	// HeaderAuthorization carries "Bearer <token>" on the upgrade request.
	HeaderAuthorization = "Authorization"
	// BearerPrefix starts the HeaderAuthorization value.
	BearerPrefix = "Bearer "
	// HeaderProtocolVersion carries the client's protocol version ("1") on the upgrade
	// request; the sandbox echoes the version it speaks on the upgrade response.
	HeaderProtocolVersion = "X-Protocol-Version"
)

// VersionHeaderValue is the value of HeaderProtocolVersion for Version.
var VersionHeaderValue = strconv.Itoa(Version)

// BearerToken returns the token of an Authorization header value "Bearer <token>" and
// whether the value had that form. The scheme is matched case-insensitively.
func BearerToken(authorization string) (string, bool) {
	if len(authorization) < len(BearerPrefix) || !strings.EqualFold(authorization[:len(BearerPrefix)], BearerPrefix) {
		return "", false
	}
	tok := strings.TrimSpace(authorization[len(BearerPrefix):])
	return tok, tok != ""
}

// Type is a frame's "type".
type Type string

// The message types of FSP v1.
const (
	// TypeExecute (client → sandbox) starts an execution.
	TypeExecute Type = "execute"
	// TypeCancel (client → sandbox) aborts a running execution.
	TypeCancel Type = "cancel"
	// TypePing (client → sandbox) asks for a health check.
	TypePing Type = "ping"
	// TypeAck (sandbox → client) confirms an execute was received and queued.
	TypeAck Type = "ack"
	// TypeStatus (sandbox → client) reports an execution state change.
	TypeStatus Type = "status"
	// TypeStdout (sandbox → client) carries a chunk of standard output.
	TypeStdout Type = "stdout"
	// TypeStderr (sandbox → client) carries a chunk of standard error.
	TypeStderr Type = "stderr"
	// TypeResult (sandbox → client) closes an execution after its terminal status.
	TypeResult Type = "result"
	// TypeError (sandbox → client) reports a rejected request or an infrastructure failure.
	TypeError Type = "error"
	// TypePong (sandbox → client) answers a ping, optionally with load.
	TypePong Type = "pong"
)

// Known reports whether t is a message type of FSP v1.
func (t Type) Known() bool {
	switch t {
	case TypeExecute, TypeCancel, TypePing, TypeAck, TypeStatus, TypeStdout, TypeStderr,
		TypeResult, TypeError, TypePong:
		return true
	}
	return false
}

// needsID reports whether frames of type t must carry an execution id. An error frame's
// id is optional (a frame too malformed to read has none); ping and pong have none.
func (t Type) needsID() bool {
	switch t {
	case TypeExecute, TypeCancel, TypeAck, TypeStatus, TypeStdout, TypeStderr, TypeResult:
		return true
	}
	return false
}

// Language is an execute frame's "language".
type Language string

// The languages FSP v1 names. A sandbox may support a subset.
const (
	LangPython     Language = "python"
	LangJavaScript Language = "javascript"
	LangShell      Language = "shell"
	LangElixir     Language = "elixir"
)

// Languages lists the languages FSP v1 names.
var Languages = []Language{LangPython, LangJavaScript, LangShell, LangElixir}

// Known reports whether l is a language FSP v1 names.
func (l Language) Known() bool {
	for _, k := range Languages {
		if l == k {
			return true
		}
	}
	return false
}

// Status is a status frame's "status".
type Status string

// The execution statuses of FSP v1.
const (
	// StatusRunning: execution started (not terminal).
	StatusRunning Status = "running"
	// StatusCompleted: execution finished normally (whatever its exit code).
	StatusCompleted Status = "completed"
	// StatusFailed: execution encountered an error (e.g. its output exceeded the limit).
	StatusFailed Status = "failed"
	// StatusCancelled: the client cancelled the execution.
	StatusCancelled Status = "cancelled"
	// StatusTimeout: the execution exceeded its time limit.
	StatusTimeout Status = "timeout"
	// StatusOOM: the execution exceeded its memory limit.
	StatusOOM Status = "oom"
)

// Known reports whether s is a status of FSP v1.
func (s Status) Known() bool {
	return s == StatusRunning || s.Terminal()
}

// Terminal reports whether s ends an execution (everything but running). A result frame
// follows a terminal status.
func (s Status) Terminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusTimeout, StatusOOM:
		return true
	}
	return false
}

// Code is an error frame's "code".
type Code string

// The error codes of FSP v1, with the category and retryable default the protocol gives
// each ([Code.Retryable]).
const (
	// CodeTimeout (resource, not retryable): execution exceeded its time limit.
	CodeTimeout Code = "TIMEOUT"
	// CodeOOM (resource, not retryable): execution exceeded its memory limit.
	CodeOOM Code = "OOM"
	// CodeOutputLimit (resource, not retryable): output exceeded max_output_bytes.
	CodeOutputLimit Code = "OUTPUT_LIMIT"
	// CodeLanguageNotSupported (protocol, not retryable): requested language unavailable.
	CodeLanguageNotSupported Code = "LANGUAGE_NOT_SUPPORTED"
	// CodeInvalidRequest (protocol, not retryable): malformed request structure.
	CodeInvalidRequest Code = "INVALID_REQUEST"
	// CodeUnknownExecution (protocol, not retryable): cancel for an unknown execution id.
	CodeUnknownExecution Code = "UNKNOWN_EXECUTION"
	// CodeSandboxOverloaded (infrastructure, retryable): sandbox at capacity, try later.
	CodeSandboxOverloaded Code = "SANDBOX_OVERLOADED"
	// CodeInternalError (infrastructure, retryable): unexpected sandbox failure.
	CodeInternalError Code = "INTERNAL_ERROR"
	// CodeNetworkError (infrastructure, retryable): sandbox network connectivity issue.
	CodeNetworkError Code = "NETWORK_ERROR"
)

// Codes lists the error codes of FSP v1.
var Codes = []Code{
	CodeTimeout, CodeOOM, CodeOutputLimit, CodeLanguageNotSupported, CodeInvalidRequest,
	CodeUnknownExecution, CodeSandboxOverloaded, CodeInternalError, CodeNetworkError,
}

// Category groups error codes as the protocol's table does.
type Category string

// The error code categories of FSP v1.
const (
	CategoryResource       Category = "resource"
	CategoryProtocol       Category = "protocol"
	CategoryInfrastructure Category = "infrastructure"
)

// Known reports whether c is an error code of FSP v1.
func (c Code) Known() bool {
	return c.Category() != ""
}

// Category returns c's category, or "" for an unknown code.
func (c Code) Category() Category {
	switch c {
	case CodeTimeout, CodeOOM, CodeOutputLimit:
		return CategoryResource
	case CodeLanguageNotSupported, CodeInvalidRequest, CodeUnknownExecution:
		return CategoryProtocol
	case CodeSandboxOverloaded, CodeInternalError, CodeNetworkError:
		return CategoryInfrastructure
	}
	return ""
}

// Retryable returns the protocol's retryable default for c: true for the infrastructure
// codes, false otherwise (and for unknown codes).
func (c Code) Retryable() bool {
	return c.Category() == CategoryInfrastructure
}

// Defaults the protocol gives optional limits.
const (
	// DefaultCPUShares is limits.cpu_shares when absent.
	DefaultCPUShares = 512
	// DefaultMaxOutputBytes is limits.max_output_bytes when absent (1 MB).
	DefaultMaxOutputBytes = 1 << 20
)

// TimeLayout renders "ts": ISO 8601 in UTC with milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Timestamp is a frame's "ts". It encodes as ISO 8601 UTC with milliseconds and decodes
// any RFC 3339 time (with or without fractional seconds).
type Timestamp struct {
	time.Time
}

// Now returns the current time as a Timestamp.
func Now() Timestamp { return Timestamp{time.Now()} }

// String renders t as it appears on the wire.
func (t Timestamp) String() string { return t.UTC().Format(TimeLayout) }

// MarshalJSON implements json.Marshaler.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(t.String())), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return errNotString
	}
	p, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || p.UTC().Year() < 1 || p.UTC().Year() > 9999 {
		return errBadTimestamp
	}
	t.Time = p
	return nil
}

// Header is the envelope every frame carries. Every message type embeds it.
type Header struct {
	// V is the protocol version; always Version.
	V int `json:"v"`
	// Type is the message type.
	Type Type `json:"type"`
	// ID is the execution id; required on execution-related messages, absent on ping and
	// pong, optional on error.
	ID string `json:"id,omitempty"`
	// TS is when the frame was sent.
	TS Timestamp `json:"ts"`
}

// NewHeader returns the header of a frame of type t about execution id, sent at ts.
func NewHeader(t Type, id string, ts time.Time) Header {
	return Header{V: Version, Type: t, ID: id, TS: Timestamp{ts}}
}

// MessageHeader returns the frame's envelope.
func (h *Header) MessageHeader() *Header { return h }

// Message is one FSP frame: *Execute, *Cancel, *Ping, *Ack, *StatusUpdate, *Output,
// *Result, *Error or *Pong.
type Message interface {
	// MessageHeader returns the frame's envelope (for reading or filling in).
	MessageHeader() *Header
	// validate checks the type-specific fields.
	validate() error
	// defaultType is the frame type the message encodes as when Header.Type is empty.
	defaultType() Type
}

// Limits are an execute frame's resource limits.
type Limits struct {
	// TimeoutMS is the maximum execution (wall-clock) time in milliseconds. Required, > 0.
	TimeoutMS int64 `json:"timeout_ms"`
	// MemoryMB is the maximum memory allocation in MB. Required, > 0.
	MemoryMB int64 `json:"memory_mb"`
	// CPUShares is the CPU resource share; 0 (absent) means DefaultCPUShares.
	CPUShares int64 `json:"cpu_shares,omitempty"`
	// MaxOutputBytes bounds stdout+stderr together; 0 (absent) means DefaultMaxOutputBytes.
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
}

// Execute (type "execute", client → sandbox) starts an execution.
type Execute struct {
	Header
	// Language is the code's language (python, javascript, shell, elixir).
	Language Language `json:"language"`
	// Code is the source code to execute.
	Code string `json:"code"`
	// Stdin is the standard input to provide; nil for none (encoded as null).
	Stdin *string `json:"stdin"`
	// Env holds environment variables for the execution.
	Env map[string]string `json:"env,omitempty"`
	// Limits bounds the execution's resources.
	Limits Limits `json:"limits"`
}

// Cancel (type "cancel", client → sandbox) asks the sandbox to abort execution ID; it
// answers with status cancelled and a result, or UNKNOWN_EXECUTION.
type Cancel struct {
	Header
}

// Ping (type "ping", client → sandbox) asks for a pong.
type Ping struct {
	Header
}

// Ack (type "ack", sandbox → client) confirms an execute was received and queued; the
// execution has not started yet. No ack precedes an error for a rejected request.
type Ack struct {
	Header
}

// StatusUpdate (type "status", sandbox → client) reports an execution state change.
type StatusUpdate struct {
	Header
	// Status is the new state.
	Status Status `json:"status"`
}

// Output (type "stdout" or "stderr", sandbox → client) carries a chunk of an execution's
// output as produced. Header.Type says which stream; it must be set.
type Output struct {
	Header
	// Data is UTF-8 output; may be empty.
	Data string `json:"data"`
}

// ResourceUsage is what an execution consumed.
type ResourceUsage struct {
	// PeakMemoryMB is the peak resident memory in MB.
	PeakMemoryMB int64 `json:"peak_memory_mb"`
	// CPUTimeMS is the user+system CPU time in milliseconds.
	CPUTimeMS int64 `json:"cpu_time_ms"`
}

// Result (type "result", sandbox → client) closes an execution after its terminal status.
type Result struct {
	Header
	// ExitCode is the process exit code, nil (null) if it was killed by a signal.
	ExitCode *int `json:"exit_code"`
	// DurationMS is the wall-clock execution time in milliseconds.
	DurationMS int64 `json:"duration_ms"`
	// ResourceUsage is optional resource consumption.
	ResourceUsage *ResourceUsage `json:"resource_usage,omitempty"`
}

// Error (type "error", sandbox → client) says an execution could not complete because of
// the request or the sandbox. It implements error, so a client can return it as is.
type Error struct {
	Header
	// Code is the enumerated error code.
	Code Code `json:"code"`
	// Message is a human-readable description.
	Message string `json:"message"`
	// Retryable tells whether the client should retry.
	Retryable bool `json:"retryable"`
}

// Error implements error.
func (e *Error) Error() string {
	if e.ID != "" {
		return "sandbox error " + string(e.Code) + " for " + e.ID + ": " + e.Message
	}
	return "sandbox error " + string(e.Code) + ": " + e.Message
}

// NewError returns an error frame for execution id (may be empty) with code's retryable
// default.
func NewError(id string, code Code, message string, ts time.Time) *Error {
	return &Error{Header: NewHeader(TypeError, id, ts), Code: code, Message: message, Retryable: code.Retryable()}
}

// Load is the sandbox's load in a pong.
type Load struct {
	// ActiveExecutions is the number of executions running now.
	ActiveExecutions int `json:"active_executions"`
	// QueueDepth is the number of acknowledged executions waiting to start.
	QueueDepth int `json:"queue_depth"`
}

// Pong (type "pong", sandbox → client) answers a ping.
type Pong struct {
	Header
	// Load is optional load information.
	Load *Load `json:"load,omitempty"`
}
