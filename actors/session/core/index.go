package core

import (
	"time"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// IndexStatus is the session index's status of st (persistence.Status*).
func IndexStatus(st *messages.SessionState) string {
	switch st.GetStatus() {
	case messages.SessionStatus_SESSION_STATUS_COMPLETED:
		return persistence.StatusCompleted
	case messages.SessionStatus_SESSION_STATUS_FAILED:
		return persistence.StatusFailed
	case messages.SessionStatus_SESSION_STATUS_CANCELLED:
		return persistence.StatusCancelled
	case messages.SessionStatus_SESSION_STATUS_INTERRUPTED:
		return persistence.StatusInterrupted
	case messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN:
		return persistence.StatusAwaitingHuman
	}
	return persistence.StatusRunning
}

// DueAt is when session state st next needs a live activation (zero: never). Work that
// runs now (a pending LLM call, tool calls not held for a human or an interrupt, busy
// sub-agents, or a running session with nothing else scheduled) is due at now; otherwise
// the earliest of a retry's retry_at, the interrupt's deadline and the human-input
// deadlines, and the next attempt of a pending webhook notification (even for a terminal
// session). A completed session with a queued message is due now: its next turn begins.
// A terminal session, and one waiting on a human or an interrupt without a
// deadline, is due never otherwise. It is the same rule that keeps a grain from passivating
// (updateIdle), as a function of the state alone.
func DueAt(st *messages.SessionState, now time.Time) time.Time {
	if st.GetSeq() == 0 {
		return time.Time{}
	}
	if Terminal(st) {
		if st.GetStatus() == messages.SessionStatus_SESSION_STATUS_COMPLETED && len(st.GetQueuedMessages()) > 0 {
			return now // a message queued while the turn ran opens the next turn (DecideQueued)
		}
		if w := NextWebhookAt(st); w != 0 {
			return time.Unix(0, w).UTC()
		}
		return time.Time{}
	}
	if st.GetPending() != nil || SubAgentsBusy(st) {
		return now
	}
	for _, c := range st.GetPendingTools() {
		if !HeldTool(st, c) {
			return now
		}
	}
	var at int64
	for _, d := range []int64{st.GetRetryAtUnixNano(), st.GetInterrupt().GetDeadlineUnixNano(), NextHumanDeadline(st), NextWebhookAt(st)} {
		if d != 0 && (at == 0 || d < at) {
			at = d
		}
	}
	switch {
	case at != 0:
		return time.Unix(0, at).UTC()
	case IndexStatus(st) == persistence.StatusRunning:
		return now // nothing scheduled, yet not waiting on anyone: let an activation look
	}
	return time.Time{}
}

// IndexEntryOf is session state st's row of the session index at now.
func IndexEntryOf(st *messages.SessionState, now time.Time) persistence.IndexEntry {
	return persistence.IndexEntry{SessionID: st.GetSessionId(), Status: IndexStatus(st), DueAt: DueAt(st, now), Seq: st.GetSeq()}
}
