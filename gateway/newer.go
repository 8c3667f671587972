package gateway

import (
	"errors"

	"github.com/fathom-agents/fathom/messages"
)

// readError is the answer to a failed read of a session's stored events (msg is the
// plain message of an unavailable journal): an event written by a newer Fathom than
// this node's (messages.ErrUnknownEvent, during a rolling upgrade or after a roll-back)
// is failed_precondition naming it, since retrying here would not help.
func readError(msg string, err error) *apiError {
	if errors.Is(err, messages.ErrUnknownEvent) {
		return &apiError{code: CodeFailedPrecondition, msg: err.Error() + ": a member of a newer Fathom serves this session (upgrade this one)"}
	}
	return hidden(CodeUnavailable, msg, err)
}
