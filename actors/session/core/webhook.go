package core

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/webhooks"
)

// Webhooks: a session started with a webhook_url (SessionConfig) has its notifications
// due in its own state. The fold adds one to state.webhooks whenever the session's
// status becomes completed, failed, cancelled or awaiting human (its webhook-id derived
// from the session and the event's seq, so every attempt and every activation sends the
// same id); webhook_delivered removes it, webhook_failed records a failed attempt and
// when the next is due, or gives it up (final). The grain delivers what is due
// (actors/session/webhook.go); DueAt wakes a passivated session when the next attempt
// is due, so a delivery outlives the node that made the notification due.

// Notification types: a notification's "type" and the event it follows.
const (
	WebhookCompleted     = "session.completed"
	WebhookFailed        = "session.failed"
	WebhookCancelled     = "session.cancelled"
	WebhookAwaitingHuman = "session.awaiting_human"
)

// webhookType is the notification a session entering status st is due, "" for none.
func webhookType(st messages.SessionStatus) string {
	switch st {
	case messages.SessionStatus_SESSION_STATUS_COMPLETED:
		return WebhookCompleted
	case messages.SessionStatus_SESSION_STATUS_FAILED:
		return WebhookFailed
	case messages.SessionStatus_SESSION_STATUS_CANCELLED:
		return WebhookCancelled
	case messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN:
		return WebhookAwaitingHuman
	}
	return ""
}

// WebhookID is the webhook-id of the notification event seq of session id made due.
func WebhookID(sessionID string, seq uint64) string {
	h := sha256.Sum256([]byte(sessionID))
	return "msg_" + hex.EncodeToString(h[:12]) + "_" + strconv.FormatUint(seq, 10)
}

// noteWebhook follows the application of ev to s, whose status was before: a status
// that calls for a notification adds one when the session names a webhook_url, and one
// for each push config (push.go). A fork starts with none (its copied past notified the
// source's receivers).
func noteWebhook(s *messages.SessionState, before messages.SessionStatus, ev *messages.Event) {
	if ev.GetSessionForked() != nil {
		s.Webhooks, s.PushConfigs = nil, nil
		return
	}
	t := webhookType(s.Status)
	if t == "" || s.Status == before {
		return
	}
	if s.GetConfig().GetWebhookUrl() != "" {
		s.Webhooks = append(s.Webhooks, &messages.PendingWebhook{WebhookId: WebhookID(s.SessionId, ev.GetSeq()), Type: t,
			EventSeq: ev.GetSeq(), AtUnixNano: ev.GetAtUnixNano(), NextAttemptUnixNano: ev.GetAtUnixNano()})
	}
	notePushes(s, t, ev)
}

func webhookIndex(s *messages.SessionState, id string) int {
	return slices.IndexFunc(s.Webhooks, func(w *messages.PendingWebhook) bool { return w.GetWebhookId() == id })
}

// applyWebhookDelivered removes the delivered notification (an id no longer pending, a
// duplicate delivery, changes nothing).
func applyWebhookDelivered(s *messages.SessionState, d *messages.WebhookDelivered) {
	if i := webhookIndex(s, d.GetWebhookId()); i >= 0 {
		s.Webhooks = slices.Concat(s.Webhooks[:i], s.Webhooks[i+1:])
	}
}

// applyWebhookFailed records a failed attempt: the next one's time, or the notification
// given up.
func applyWebhookFailed(s *messages.SessionState, f *messages.WebhookFailed) {
	i := webhookIndex(s, f.GetWebhookId())
	if i < 0 {
		return
	}
	if f.GetFinal() {
		s.Webhooks = slices.Concat(s.Webhooks[:i], s.Webhooks[i+1:])
		return
	}
	w := cloneWebhook(s.Webhooks[i])
	w.Attempts, w.NextAttemptUnixNano = f.GetAttempt(), f.GetNextAttemptUnixNano()
	s.Webhooks[i] = w
}

// cloneWebhook copies w: the fold never mutates a message a cloned state may share.
func cloneWebhook(w *messages.PendingWebhook) *messages.PendingWebhook {
	return &messages.PendingWebhook{WebhookId: w.GetWebhookId(), Type: w.GetType(), EventSeq: w.GetEventSeq(),
		AtUnixNano: w.GetAtUnixNano(), Attempts: w.GetAttempts(), NextAttemptUnixNano: w.GetNextAttemptUnixNano(),
		PushConfigId: w.GetPushConfigId()}
}

// NextWebhookAt is when the session's earliest pending notification is due (Unix
// nanoseconds), 0 when none is pending.
func NextWebhookAt(s *messages.SessionState) int64 {
	var at int64
	for _, w := range s.GetWebhooks() {
		if n := w.GetNextAttemptUnixNano(); at == 0 || n < at {
			at = n
		}
	}
	return at
}

// webhookBody is a notification's JSON (Standard Webhooks: type, timestamp, data).
type webhookBody struct {
	Type      string      `json:"type"`
	Timestamp string      `json:"timestamp"`
	Data      webhookData `json:"data"`
}

type webhookData struct {
	SessionID string `json:"session_id"`
	Seq       uint64 `json:"seq"`
	Status    string `json:"status"`
}

// WebhookBody is the body of notification w of session id: the same bytes on every
// attempt. It names the session, the event's seq and the status the session entered;
// the session's state and events are read from the gateway.
func WebhookBody(sessionID string, w *messages.PendingWebhook) []byte {
	status := w.GetType()[len("session."):]
	b, err := json.Marshal(webhookBody{Type: w.GetType(), Timestamp: time.Unix(0, w.GetAtUnixNano()).UTC().Format(time.RFC3339Nano),
		Data: webhookData{SessionID: sessionID, Seq: w.GetEventSeq(), Status: status}})
	if err != nil { // a struct of strings and numbers always encodes
		panic(fmt.Sprintf("encode webhook body: %v", err))
	}
	return b
}

// DecideWebhookOutcome records the outcome of attempt number attempt (from 1) of pending
// notification id: webhook_delivered when o has no error, else webhook_failed with the
// next attempt after cfg.Backoff, or final after cfg.MaxAttempts attempts. An outcome
// for a notification no longer pending, or for an attempt already recorded, decides
// nothing.
func DecideWebhookOutcome(s *messages.SessionState, id string, attempt uint32, o webhooks.Outcome, cfg webhooks.Config, now time.Time) []*messages.Event {
	i := webhookIndex(s, id)
	if i < 0 || s.Webhooks[i].GetAttempts()+1 != attempt {
		return nil
	}
	w := s.Webhooks[i]
	b := NewEvents(s, "", now)
	if o.Err == nil {
		b.Add(func(e *messages.Event) {
			e.Payload = &messages.Event_WebhookDelivered{WebhookDelivered: &messages.WebhookDelivered{WebhookId: id, Notification: w.GetType(),
				EventSeq: w.GetEventSeq(), Attempt: attempt, StatusCode: int32(o.StatusCode)}}
		})
		return b.Evs
	}
	f := &messages.WebhookFailed{WebhookId: id, Notification: w.GetType(), EventSeq: w.GetEventSeq(), Attempt: attempt,
		StatusCode: int32(o.StatusCode), Error: truncateText(o.Err.Error(), 500)}
	if int(attempt) >= cfg.MaxAttempts {
		f.Final = true
	} else {
		f.NextAttemptUnixNano = now.Add(cfg.Backoff(int(attempt))).UnixNano()
	}
	b.Add(func(e *messages.Event) { e.Payload = &messages.Event_WebhookFailed{WebhookFailed: f} })
	return b.Evs
}

// validWebhook checks a start's webhook URL: an http(s) URL on a node that can sign
// (Config.Webhooks).
func validWebhook(url string, cfg Config) error {
	if url == "" {
		return nil
	}
	if err := webhooks.ValidateURL(url); err != nil {
		return refuse(messages.ErrorReason_INVALID_ARGUMENT, "config.webhook_url: %v", err)
	}
	if !cfg.Webhooks {
		return refuse(messages.ErrorReason_FAILED_PRECONDITION, "config.webhook_url: this node has no webhook secret (env FATHOM_WEBHOOK_SECRET or the config file's webhook_secret), so it sends no webhooks")
	}
	return nil
}
