package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/fathom-agents/fathom/internal/errcode"
	"github.com/fathom-agents/fathom/messages"
)

// Error codes of `error` frames and of HTTP error bodies. They are stable: clients may
// switch on them. The HTTP status of each is given in parentheses.
const (
	// CodeInvalidArgument: malformed JSON, a missing or bad field, a binary frame (400).
	CodeInvalidArgument = errcode.InvalidArgument
	// CodeUnknownOp: the frame's op is not one the gateway knows (400).
	CodeUnknownOp = errcode.UnknownOp
	// CodeUnauthenticated: no token, or a token the gateway does not know (401).
	CodeUnauthenticated = errcode.Unauthenticated
	// CodePermissionDenied: a read-only token asked for a write operation (403).
	CodePermissionDenied = errcode.PermissionDenied
	// CodeNotFound: no such session, subscription or route (404).
	CodeNotFound = errcode.NotFound
	// CodeFailedPrecondition: the operation does not fit the current state, such as a
	// second start of a session or a second subscription to it on one connection (409).
	CodeFailedPrecondition = errcode.FailedPrecondition
	// CodeResourceExhausted: a limit was reached: a per-connection limit, or a quota of
	// the caller's tenant (a start while the tenant runs its max_running_sessions, with a
	// Retry-After header in seconds) (429).
	CodeResourceExhausted = errcode.ResourceExhausted
	// CodeUnsupported: the operation exists in the protocol but this node's session grain
	// does not implement it yet (501).
	CodeUnsupported = errcode.Unsupported
	// CodeUnavailable: the journal or the cluster could not serve the request, or the
	// gateway is shutting down; retry later (503).
	CodeUnavailable = errcode.Unavailable
	// CodeTimeout: the session did not answer in time (504).
	CodeTimeout = errcode.Timeout
	// CodeInternal: anything else; the message says what (500).
	CodeInternal = errcode.Internal
)

// Close codes the gateway uses besides the standard ones (1001 going away on shutdown,
// 1008 policy violation for a refused origin after upgrade, 1009 message too big).
const (
	// CloseSlowConsumer closes a connection that did not read its frames for
	// Config.SlowConsumerTimeout: the client reads too slowly. Reconnect and subscribe again from the last seq received.
	CloseSlowConsumer = 4000
)

// RequestIDHeader carries a request's id: the gateway takes a client's own (1 to
// MaxRequestIDBytes of letters, digits and ._~:+/=-) or makes one, answers it on every
// response, puts it in every error body and logs it with the error's detail.
const RequestIDHeader = "X-Request-Id"

// MaxRequestIDBytes bounds a client's X-Request-Id; a longer or otherwise invalid one is
// replaced by a new id.
const MaxRequestIDBytes = 128

// Plain messages of the errors whose detail stays in the log: clients get these, the
// log gets the cause under the answer's request_id.
const (
	msgUnavailable = "the journal is unavailable; retry"
	msgTimeout     = "the session did not answer in time; retry"
	msgInternal    = "internal error; the node's log has the details under this request_id"
)

// apiError is an error with a stable code, rendered as an error frame or HTTP body.
type apiError struct {
	code   string
	msg    string // what the client reads: never a database address, user or internal error text
	status int    // HTTP status when it is not the code's usual one
	// detail is the cause behind a plain message: logged with the request id, never sent.
	detail error
	// retryAfter, when set, is the Retry-After header (seconds) of the HTTP answer.
	retryAfter string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func errorf(code, format string, args ...any) *apiError {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

// hidden returns an error of code whose client message is msg; detail goes to the log.
func hidden(code, msg string, detail error) *apiError {
	return &apiError{code: code, msg: msg, detail: detail}
}

// validRequestID reports whether a client's request id may be used as it is.
func validRequestID(id string) bool {
	if id == "" || len(id) > MaxRequestIDBytes {
		return false
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._~:+/=-", r)
		if !ok {
			return false
		}
	}
	return true
}

var httpStatus = map[string]int{
	CodeInvalidArgument:    http.StatusBadRequest,
	CodeUnknownOp:          http.StatusBadRequest,
	CodeUnauthenticated:    http.StatusUnauthorized,
	CodePermissionDenied:   http.StatusForbidden,
	CodeNotFound:           http.StatusNotFound,
	CodeFailedPrecondition: http.StatusConflict,
	CodeResourceExhausted:  http.StatusTooManyRequests,
	CodeUnsupported:        http.StatusNotImplemented,
	CodeUnavailable:        http.StatusServiceUnavailable,
	CodeTimeout:            http.StatusGatewayTimeout,
	CodeInternal:           http.StatusInternalServerError,
}

// statusOf returns the HTTP status of an error code.
func statusOf(code string) int {
	if s, ok := httpStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// toAPIError turns any error of an operation into an apiError: gateway errors pass as
// they are, grain errors map by reason, timeouts of the grain call become CodeTimeout.
// The client-facing codes (invalid_argument, not_found, failed_precondition) keep the
// grain's message, which speaks of the request; unavailable, timeout and internal
// errors get a plain message and keep the cause as the detail for the log.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	if errors.Is(err, messages.ErrUnknownEvent) { // an event a newer Fathom wrote (the feed wraps it): upgrade
		return &apiError{code: CodeFailedPrecondition, msg: err.Error()}
	}
	code := errcode.Of(err) // the one classification, shared with the fathom Go API
	if ge, ok := errcode.Grain(err); ok {
		switch code {
		case CodeUnavailable:
			return hidden(code, msgUnavailable, err)
		case CodeInvalidArgument, CodeNotFound, CodeFailedPrecondition, CodePermissionDenied:
			return &apiError{code: code, msg: ge.Message}
		case CodeResourceExhausted: // a tenant's quota: when to retry is in the metadata
			return &apiError{code: code, msg: ge.Message, retryAfter: ge.GetMetadata()[messages.RetryAfterKey]}
		}
		return hidden(CodeInternal, msgInternal, err)
	}
	if code == CodeTimeout {
		return hidden(CodeTimeout, msgTimeout, err)
	}
	return hidden(CodeInternal, msgInternal, err)
}
