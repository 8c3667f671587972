package fathom

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/fathom-agents/fathom/internal/errcode"
	"github.com/fathom-agents/fathom/messages"
)

// The errors of Node's calls, for errors.Is: each call's error wraps the one that says
// why it failed (mapped from the session grain's ErrorReason, the same mapping as the
// gateway's error codes), and still wraps the cause (errors.As finds a
// *cluster.GrainErrorResponse). A call that ran out of time wraps
// context.DeadlineExceeded; an operation this node cannot serve (a journal without a
// session index) errors.ErrUnsupported.
var (
	// ErrNotFound: no such session (or artifact). Another tenant's session, and one the
	// ctx's principal may not see, is answered exactly so.
	ErrNotFound = errors.New("not found")
	// ErrInvalidArgument: the request is malformed (an empty goal, a bad session id, an
	// answer that fails its request's schema, an unknown step type).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrFailedPrecondition: the call does not fit the session's state (a resume of a
	// session that is not interrupted, a second cancel, a delete of a running session).
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrPermissionDenied: the ctx's principal sees the session, but its role may not do
	// this (a viewer's write).
	ErrPermissionDenied = errors.New("permission denied")
	// ErrResourceExhausted: a quota of the session's tenant refuses the call (RetryAfter
	// says when to try again).
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrUnavailable: the journal, the session index or the artifact store could not
	// serve the call; nothing was recorded. Retry.
	ErrUnavailable = errors.New("unavailable")
	// ErrInternal: anything else (a session grain that crashed on the call reloads from
	// its journal: retry with the same command id).
	ErrInternal = errors.New("internal error")
)

// kinds are the errors of the codes of internal/errcode.
var kinds = map[string]error{
	errcode.InvalidArgument:    ErrInvalidArgument,
	errcode.NotFound:           ErrNotFound,
	errcode.FailedPrecondition: ErrFailedPrecondition,
	errcode.PermissionDenied:   ErrPermissionDenied,
	errcode.ResourceExhausted:  ErrResourceExhausted,
	errcode.Unavailable:        ErrUnavailable,
	errcode.Unsupported:        errors.ErrUnsupported,
	errcode.Timeout:            context.DeadlineExceeded,
	errcode.Internal:           ErrInternal,
}

// callError is a call's error: its kind and its cause, both for errors.Is and As.
type callError struct {
	kind error
	err  error
}

func (e *callError) Error() string   { return e.err.Error() }
func (e *callError) Unwrap() []error { return []error{e.kind, e.err} }

// typed returns err wrapping the error of its code (internal/errcode.Of); nil stays nil
// and an error that is typed already stays as it is.
func typed(err error) error {
	var ce *callError
	if err == nil || errors.As(err, &ce) {
		return err
	}
	return &callError{kind: kinds[errcode.Of(err)], err: err}
}

// failed is a call's error: "fathom: " + what + ": " + err, typed.
func failed(what string, err error) error {
	return fmt.Errorf("fathom: %s: %w", what, typed(err))
}

// invalid is an argument error of a call the node refused before asking a session.
func invalid(what, format string, args ...any) error {
	return fmt.Errorf("fathom: %s: %w", what, &callError{kind: ErrInvalidArgument, err: fmt.Errorf(format, args...)})
}

// RetryAfter is when a call refused with ErrResourceExhausted (a tenant's quota) may be
// tried again, as the session grain said; false for any other error.
func RetryAfter(err error) (time.Duration, bool) {
	ge, ok := errcode.Grain(err)
	if !ok || errcode.Of(err) != errcode.ResourceExhausted {
		return 0, false
	}
	s, err := strconv.Atoi(ge.GetMetadata()[messages.RetryAfterKey])
	if err != nil {
		return 0, false
	}
	return time.Duration(s) * time.Second, true
}
