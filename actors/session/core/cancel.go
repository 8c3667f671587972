package core

import (
	"time"

	"github.com/fathom-agents/fathom/messages"
)

// maxCancelText bounds the reason and by of a cancel request.
const maxCancelText = 1024

// DecideCancel records session_cancelled for a session that has not ended.
func DecideCancel(s *messages.SessionState, req *messages.CancelRequest, now time.Time) ([]*messages.Event, error) {
	if err := decideCommand(s, req.GetCommandId()); err != nil {
		return nil, err
	}
	if len(req.GetReason()) > maxCancelText || len(req.GetBy()) > maxCancelText {
		return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "reason and by are at most %d bytes each", maxCancelText)
	}
	b := NewEvents(s, req.GetCommandId(), now)
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_SessionCancelled{SessionCancelled: &messages.SessionCancelled{Reason: req.GetReason(), By: req.GetBy()}}
	})
	return b.Evs, nil
}
