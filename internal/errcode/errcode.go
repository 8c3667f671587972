// Package errcode is the one classification of the errors of session operations: the
// stable codes the gateway answers (gateway.Code*) and the fathom Go API's error values
// (fathom.ErrNotFound, ...) both come from Of, so a session grain's refusal reads the
// same through either.
package errcode

import (
	"context"
	"errors"
	"strings"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/messages"
)

// The codes (the gateway's error codes; docs/gateway-protocol.md).
const (
	InvalidArgument    = "invalid_argument"
	UnknownOp          = "unknown_op"
	Unauthenticated    = "unauthenticated"
	PermissionDenied   = "permission_denied"
	NotFound           = "not_found"
	FailedPrecondition = "failed_precondition"
	ResourceExhausted  = "resource_exhausted"
	Unsupported        = "unsupported"
	Unavailable        = "unavailable"
	Timeout            = "timeout"
	Internal           = "internal"
)

// Errors of the node's stores that session operations report (wrapped); the gateway
// re-exports them (gateway.ErrNoIndex, ...).
var (
	// ErrNoIndex: the node's journal keeps no session index.
	ErrNoIndex = errors.New("the node's journal keeps no session index")
	// ErrSessionNotFound: the node's journal has no such session.
	ErrSessionNotFound = errors.New("no such session")
	// ErrSessionNotTerminal: the session is not completed, failed or cancelled; nothing
	// was deleted.
	ErrSessionNotTerminal = errors.New("only a completed, failed or cancelled session can be deleted")
	// ErrArtifactNotFound: no artifact at the path.
	ErrArtifactNotFound = errors.New("artifact not found")
	// ErrInvalidArtifactPath: the path breaks the artifact path rules.
	ErrInvalidArtifactPath = errors.New("invalid artifact path")
	// ErrNoLongTermMemory: the node's long-term memory is off.
	ErrNoLongTermMemory = errors.New("long-term memory is off on this node (start it with --long-term-memory)")
	// ErrMemoryPermission: the caller may not act on another user's memories.
	ErrMemoryPermission = errors.New("a member acts on their own memories only")
	// ErrMemoryNotFound: the user has no memory of that id.
	ErrMemoryNotFound = errors.New("memory not found")
	// ErrInvalidMemory: a memory or a memory request the store refuses (an empty user,
	// a text over the size limit).
	ErrInvalidMemory = errors.New("invalid memory")
)

// grainReasons maps the session grain's ErrorReason to codes.
var grainReasons = map[string]string{
	messages.ErrorReason_INVALID_ARGUMENT.String():    InvalidArgument,
	messages.ErrorReason_NOT_FOUND.String():           NotFound,
	messages.ErrorReason_FAILED_PRECONDITION.String(): FailedPrecondition,
	messages.ErrorReason_UNAVAILABLE.String():         Unavailable,
	messages.ErrorReason_INTERNAL.String():            Internal,
	messages.ErrorReason_PERMISSION_DENIED.String():   PermissionDenied,
	messages.ErrorReason_RESOURCE_EXHAUSTED.String():  ResourceExhausted,
}

// Grain returns err's session grain error, if it wraps one.
func Grain(err error) (*cluster.GrainErrorResponse, bool) {
	var ge *cluster.GrainErrorResponse
	ok := errors.As(err, &ge)
	return ge, ok
}

// Of returns err's code: a grain error's by its ErrorReason (an unknown reason is
// internal); an event a newer Fathom wrote (messages.ErrUnknownEvent) failed_precondition;
// an invalid session id invalid_argument; the store errors above theirs; a call that ran
// out of time (Proto.Actor reports a grain call's timeout as a plain error) timeout;
// anything else internal. nil has no code ("").
func Of(err error) string {
	if err == nil {
		return ""
	}
	if ge, ok := Grain(err); ok {
		if code, ok := grainReasons[ge.Reason]; ok {
			return code
		}
		return Internal
	}
	switch {
	case errors.Is(err, messages.ErrUnknownEvent), errors.Is(err, ErrSessionNotTerminal):
		return FailedPrecondition
	case errors.Is(err, messages.ErrInvalidSessionID), errors.Is(err, ErrInvalidArtifactPath), errors.Is(err, ErrInvalidMemory):
		return InvalidArgument
	case errors.Is(err, ErrSessionNotFound), errors.Is(err, ErrArtifactNotFound), errors.Is(err, ErrMemoryNotFound):
		return NotFound
	case errors.Is(err, ErrMemoryPermission):
		return PermissionDenied
	case errors.Is(err, ErrNoIndex), errors.Is(err, errors.ErrUnsupported), errors.Is(err, ErrNoLongTermMemory):
		return Unsupported
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	}
	if s := err.Error(); strings.Contains(s, "timeout") || strings.Contains(s, "deadline") {
		return Timeout
	}
	return Internal
}
