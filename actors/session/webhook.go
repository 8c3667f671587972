package session

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/webhooks"
)

// Webhook delivery. The notifications due are in the state (core/webhook.go); the grain
// hands the ones whose time came to the node's sender (Deps.Webhooks), one attempt of
// each at a time, and records each outcome as webhook_delivered or webhook_failed. A
// timer wakes it for the next attempt while it is active; once passivated, the session
// index's due time (core.DueAt) has the reactivator activate it again, on this node or
// another, which resumes from the journal.

// Messages of webhook delivery. They never leave the process.
type (
	// webhookDueMsg fires when a pending notification's next attempt is due.
	webhookDueMsg struct{}
	// webhookDone reports an attempt.
	webhookDone struct {
		id      string
		attempt uint32
		outcome webhooks.Outcome
	}
)

// webhookState is a grain's side of its session's webhook delivery.
type webhookState struct {
	self *actor.PID
	root *actor.RootContext
	// inflight are the attempts handed to the sender, by webhook id.
	inflight map[string]uint32
	timer    *time.Timer
	timerAt  int64
}

// busyRetry is the wait before asking a full sender queue again.
const busyRetry = time.Second

// kick submits the pending notifications of session id (in state st) that are due and
// not in flight, and sets the timer of the next one.
func (w *webhookState) kick(d *Deps, id string, st *messages.SessionState) {
	s := d.Webhooks
	pending := st.GetWebhooks()
	if s == nil || len(pending) == 0 {
		return
	}
	now := d.Now().UnixNano()
	self, root := w.self, w.root
	var next int64
	later := func(at int64) {
		if next == 0 || at < next {
			next = at
		}
	}
	for _, p := range pending {
		if _, busy := w.inflight[p.GetWebhookId()]; busy {
			continue
		}
		if at := p.GetNextAttemptUnixNano(); at > now {
			later(at)
			continue
		}
		hid, attempt := p.GetWebhookId(), p.GetAttempts()+1
		a, due := core.WebhookAttempt(st, p)
		if !due {
			continue
		}
		ok := s.Submit(a, func(o webhooks.Outcome) {
			root.Send(self, &webhookDone{id: hid, attempt: attempt, outcome: o})
		})
		if !ok {
			later(now + int64(busyRetry))
			continue
		}
		if w.inflight == nil {
			w.inflight = map[string]uint32{}
		}
		w.inflight[hid] = attempt
	}
	if next != 0 && next != w.timerAt {
		w.timerAt = next
		w.timer = resetTimer(w.timer, time.Until(time.Unix(0, next)), func() { root.Send(self, &webhookDueMsg{}) })
	}
}

// fired notes a message of webhook delivery (its decision is decideOn's): the timer
// fired, or an attempt returned.
func (w *webhookState) fired(msg any, log *slog.Logger) {
	switch m := msg.(type) {
	case *webhookDueMsg:
		w.timerAt = 0
	case *webhookDone:
		delete(w.inflight, m.id)
		if m.outcome.Err != nil {
			log.Info("webhook attempt failed", "webhook_id", m.id, "attempt", m.attempt, "status", m.outcome.StatusCode, "error", m.outcome.Err)
		}
	}
}

// busy reports whether an attempt is in flight (its outcome must find the activation).
func (w *webhookState) busy() bool { return len(w.inflight) > 0 }

// stop stops the timer of the next attempt.
func (w *webhookState) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timerAt = 0
}
