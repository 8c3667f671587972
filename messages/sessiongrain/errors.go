package sessiongrain

import (
	"fmt"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/messages"
)

// The grain's errors are cluster.GrainErrorResponses whose reason is a
// messages.ErrorReason name. protoc-gen-go-grain writes these helpers only beside an
// ErrorReason enum of the same file; the enum stays in package messages (the session
// core refuses commands with it), so they are written here, one pair per reason.

func grainError(r messages.ErrorReason, format string, args ...any) *cluster.GrainErrorResponse {
	return cluster.NewGrainErrorResponse(r.String(), fmt.Sprintf(format, args...))
}

func isReason(err error, r messages.ErrorReason) bool {
	return err != nil && cluster.FromError(err).Reason == r.String()
}

// ErrInvalidArgument is a grain error with reason INVALID_ARGUMENT: the request is
// malformed (empty goal, missing command id).
func ErrInvalidArgument(format string, args ...any) *cluster.GrainErrorResponse {
	return grainError(messages.ErrorReason_INVALID_ARGUMENT, format, args...)
}

// IsInvalidArgument reports whether err is a grain error with reason INVALID_ARGUMENT.
func IsInvalidArgument(err error) bool { return isReason(err, messages.ErrorReason_INVALID_ARGUMENT) }

// ErrNotFound is a grain error with reason NOT_FOUND: the session does not exist.
func ErrNotFound(format string, args ...any) *cluster.GrainErrorResponse {
	return grainError(messages.ErrorReason_NOT_FOUND, format, args...)
}

// IsNotFound reports whether err is a grain error with reason NOT_FOUND.
func IsNotFound(err error) bool { return isReason(err, messages.ErrorReason_NOT_FOUND) }

// ErrFailedPrecondition is a grain error with reason FAILED_PRECONDITION: the command
// does not fit the session's state (already started).
func ErrFailedPrecondition(format string, args ...any) *cluster.GrainErrorResponse {
	return grainError(messages.ErrorReason_FAILED_PRECONDITION, format, args...)
}

// IsFailedPrecondition reports whether err is a grain error with reason
// FAILED_PRECONDITION.
func IsFailedPrecondition(err error) bool {
	return isReason(err, messages.ErrorReason_FAILED_PRECONDITION)
}

// ErrUnavailable is a grain error with reason UNAVAILABLE: the journal could not store
// the events; nothing was acknowledged.
func ErrUnavailable(format string, args ...any) *cluster.GrainErrorResponse {
	return grainError(messages.ErrorReason_UNAVAILABLE, format, args...)
}

// IsUnavailable reports whether err is a grain error with reason UNAVAILABLE.
func IsUnavailable(err error) bool { return isReason(err, messages.ErrorReason_UNAVAILABLE) }

// ErrInternal is a grain error with reason INTERNAL: the grain crashed while handling
// the command; it reloaded from the journal.
func ErrInternal(format string, args ...any) *cluster.GrainErrorResponse {
	return grainError(messages.ErrorReason_INTERNAL, format, args...)
}

// IsInternal reports whether err is a grain error with reason INTERNAL.
func IsInternal(err error) bool { return isReason(err, messages.ErrorReason_INTERNAL) }

// ErrPermissionDenied is a grain error with reason PERMISSION_DENIED: the caller sees
// the session but its role may not do this.
func ErrPermissionDenied(format string, args ...any) *cluster.GrainErrorResponse {
	return grainError(messages.ErrorReason_PERMISSION_DENIED, format, args...)
}

// IsPermissionDenied reports whether err is a grain error with reason PERMISSION_DENIED.
func IsPermissionDenied(err error) bool { return isReason(err, messages.ErrorReason_PERMISSION_DENIED) }

// ErrResourceExhausted is a grain error with reason RESOURCE_EXHAUSTED: a quota of the
// session's tenant refuses the command; the error's metadata retry_after_seconds says
// when to try again (messages.RetryAfter).
func ErrResourceExhausted(format string, args ...any) *cluster.GrainErrorResponse {
	return grainError(messages.ErrorReason_RESOURCE_EXHAUSTED, format, args...)
}

// IsResourceExhausted reports whether err is a grain error with reason
// RESOURCE_EXHAUSTED.
func IsResourceExhausted(err error) bool {
	return isReason(err, messages.ErrorReason_RESOURCE_EXHAUSTED)
}
