package core

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/messages"
)

// Double texting: a follow-up message sent while a turn runs (SendRequest.on_busy).
// "reject" (the default) refuses it, as a send to a running session always was; "queue"
// records message_queued, and the message runs as the next turn once the current one
// completes (DecideQueued, which the grain asks whenever the session is completed with
// a queue); "interrupt" records it too, and the current turn starts no new step: at its
// next step boundary, with nothing running, it completes (interruptedResult) and the
// message runs. A turn that fails or is cancelled ends the session: its queue never runs.

// The on_busy values.
const (
	OnBusyReject    = "reject"
	OnBusyQueue     = "queue"
	OnBusyInterrupt = "interrupt"
)

// decideBusySend is DecideSend for a session whose turn is running: the refusal of
// "reject", or message_queued.
func decideBusySend(s *messages.SessionState, req *messages.SendRequest, content string, now time.Time) ([]*messages.Event, error) {
	switch req.GetOnBusy() {
	case OnBusyQueue, OnBusyInterrupt:
	default:
		return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "session %s is running (%s); send when it has completed, or with on_busy queue or interrupt", s.GetSessionId(), s.GetStatus())
	}
	b := NewEvents(s, req.GetCommandId(), now)
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_MessageQueued{MessageQueued: &messages.MessageQueued{Content: content, OnBusy: req.GetOnBusy()}}
	})
	return b.Evs, nil
}

// validOnBusy checks a send's on_busy.
func validOnBusy(v string) error {
	switch v {
	case "", OnBusyReject, OnBusyQueue, OnBusyInterrupt:
		return nil
	}
	return refuse(messages.ErrorReason_INVALID_ARGUMENT, "on_busy %q: want reject, queue or interrupt", v)
}

// applyMessageQueued adds a message to the queue.
func applyMessageQueued(s *messages.SessionState, m *messages.MessageQueued) error {
	if Terminal(s) {
		return fmt.Errorf("%w: message_queued on a %s session", ErrBadEvent, s.GetStatus())
	}
	s.QueuedMessages = append(s.QueuedMessages, m)
	return nil
}

// interruptQueued reports whether a queued message interrupts the current turn.
func interruptQueued(s *messages.SessionState) bool {
	for _, m := range s.GetQueuedMessages() {
		if m.GetOnBusy() == OnBusyInterrupt {
			return true
		}
	}
	return false
}

// interruptedResult is the result of a turn a queued message interrupted.
func interruptedResult(s *messages.SessionState) string {
	done := 0
	for _, st := range s.GetSteps() {
		if st.GetStatus() == messages.StepStatus_STEP_STATUS_COMPLETED {
			done++
		}
	}
	var b strings.Builder
	b.WriteString("Interrupted by a new message")
	if n := len(s.GetSteps()); n > 0 {
		b.WriteString(" after " + strconv.Itoa(done) + " of " + strconv.Itoa(n) + " steps")
	}
	b.WriteString(".")
	return b.String()
}

// DecideQueued runs the oldest queued message of a completed session as its next turn
// (DecideSend's events, the message_received marked from_queue). It decides nothing
// when the session is not completed or has no queue; a message the session can no
// longer take (its budget is spent) is refused as DecideSend refuses it.
func DecideQueued(s *messages.SessionState, cfg Config, now time.Time) ([]*messages.Event, error) {
	q := s.GetQueuedMessages()
	if s.GetStatus() != messages.SessionStatus_SESSION_STATUS_COMPLETED || len(q) == 0 {
		return nil, nil
	}
	evs, err := DecideSend(s, &messages.SendRequest{CommandId: "queued/" + strconv.FormatUint(s.GetSeq(), 10), Content: q[0].GetContent()}, cfg, now)
	if err != nil {
		return nil, err
	}
	for _, ev := range evs {
		if m := ev.GetMessageReceived(); m != nil {
			m.FromQueue = true
		}
	}
	return evs, nil
}
