package core

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/webhooks"
)

// Push configs (A2A push notifications): a session's push configs are receivers beside
// its webhook_url. Each notification the session becomes due (webhook.go: completed,
// failed, cancelled, awaiting human) is also due to every push config set at that time,
// as its own pending webhook (push_config_id set), delivered, retried and recorded
// exactly as the webhook_url's are (webhook_delivered, webhook_failed); its body is an
// A2A StreamResponse (a statusUpdate of the task) and it carries the config's
// authentication, whose secrets stay sealed in the journal (webhooks.Sender.Seal).

// MaxPushConfigs bounds the push configs of one session.
const MaxPushConfigs = 10

// validPushConfigID is what a push config id looks like.
var validPushConfigID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$`)

func pushConfigIndex(s *messages.SessionState, id string) int {
	return slices.IndexFunc(s.GetPushConfigs(), func(c *messages.PushConfig) bool { return c.GetId() == id })
}

// PushConfigOf returns the session's push config id, nil when it has none.
func PushConfigOf(s *messages.SessionState, id string) *messages.PushConfig {
	if i := pushConfigIndex(s, id); i >= 0 {
		return s.PushConfigs[i]
	}
	return nil
}

// DecideSetPushConfig decides a SetPushConfig command whose token and credentials the
// grain has sealed into req.Config: push_config_set, or with delete push_config_deleted
// (also for a config the session does not have: deleting is idempotent). A push config
// may be set on a session in any state (a completed task may take a follow-up turn); it
// needs an http(s) URL and a node that sends webhooks.
func DecideSetPushConfig(s *messages.SessionState, req *messages.SetPushConfigRequest, cfg Config, now time.Time) ([]*messages.Event, error) {
	if err := validateCommandID(req.GetCommandId()); err != nil {
		return nil, err
	}
	if s.GetSeq() == 0 {
		return nil, refuse(messages.ErrorReason_NOT_FOUND, "session %q not found", s.GetSessionId())
	}
	c := req.GetConfig()
	if !validPushConfigID.MatchString(c.GetId()) {
		return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "push config id %q: want 1 to 64 letters, digits, '.', '_', ':' or '-'", truncateText(c.GetId(), 80))
	}
	b := NewEvents(s, req.GetCommandId(), now)
	if req.GetDelete() {
		b.Add(func(e *messages.Event) {
			e.Payload = &messages.Event_PushConfigDeleted{PushConfigDeleted: &messages.PushConfigDeleted{ConfigId: c.GetId()}}
		})
		return b.Evs, nil
	}
	if err := webhooks.ValidateURL(c.GetUrl()); err != nil {
		return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "push config url: %v", err)
	}
	if !cfg.Webhooks {
		return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "push notifications: this node has no webhook secret (env FATHOM_WEBHOOK_SECRET or the config file's webhook_secret), so it sends none")
	}
	if pushConfigIndex(s, c.GetId()) < 0 && len(s.GetPushConfigs()) >= MaxPushConfigs {
		return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "session %s has %d push configs, the limit", s.GetSessionId(), MaxPushConfigs)
	}
	set := &messages.PushConfig{Id: c.GetId(), Url: c.GetUrl(), SealedToken: c.GetSealedToken(), AuthScheme: c.GetAuthScheme(),
		SealedCredentials: c.GetSealedCredentials()}
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_PushConfigSet{PushConfigSet: &messages.PushConfigSet{Config: set, NotifyCurrent: req.GetNotifyCurrent()}}
	})
	return b.Evs, nil
}

// applyPushConfigSet sets the config (replacing the one of its id); with notify_current
// it is also due the notification of the session's current status, if that calls for one.
func applyPushConfigSet(s *messages.SessionState, p *messages.PushConfigSet, ev *messages.Event) {
	c := p.GetConfig()
	if i := pushConfigIndex(s, c.GetId()); i >= 0 {
		s.PushConfigs = slices.Clone(s.PushConfigs)
		s.PushConfigs[i] = c
	} else {
		s.PushConfigs = append(slices.Clip(s.PushConfigs), c)
	}
	if t := webhookType(s.GetStatus()); p.GetNotifyCurrent() && t != "" {
		s.Webhooks = append(slices.Clip(s.Webhooks), pendingPush(s, c, t, ev))
	}
}

// pendingPush is the notification of type t, made due by ev, to push config c.
func pendingPush(s *messages.SessionState, c *messages.PushConfig, t string, ev *messages.Event) *messages.PendingWebhook {
	return &messages.PendingWebhook{WebhookId: WebhookID(s.GetSessionId(), ev.GetSeq()) + "_" + c.GetId(), Type: t,
		EventSeq: ev.GetSeq(), AtUnixNano: ev.GetAtUnixNano(), NextAttemptUnixNano: ev.GetAtUnixNano(), PushConfigId: c.GetId()}
}

// applyPushConfigDeleted removes the config and the notifications still due to it.
func applyPushConfigDeleted(s *messages.SessionState, p *messages.PushConfigDeleted) {
	id := p.GetConfigId()
	s.PushConfigs = slices.DeleteFunc(slices.Clone(s.PushConfigs), func(c *messages.PushConfig) bool { return c.GetId() == id })
	s.Webhooks = slices.DeleteFunc(slices.Clone(s.Webhooks), func(w *messages.PendingWebhook) bool { return w.GetPushConfigId() == id })
}

// notePushes adds the notification of type t, made due by ev, for every push config.
func notePushes(s *messages.SessionState, t string, ev *messages.Event) {
	for _, c := range s.GetPushConfigs() {
		s.Webhooks = append(s.Webhooks, pendingPush(s, c, t, ev))
	}
}

// a2aStates are the A2A task states of the notification types.
var a2aStates = map[string]string{
	WebhookCompleted: "TASK_STATE_COMPLETED", WebhookFailed: "TASK_STATE_FAILED",
	WebhookCancelled: "TASK_STATE_CANCELED", WebhookAwaitingHuman: "TASK_STATE_INPUT_REQUIRED",
}

// PushContentType is the media type of a push notification's body (A2A §4.3.3).
const PushContentType = "application/a2a+json"

// pushBody is push notification w of session id: an A2A StreamResponse carrying the
// task's status update (the task id and context id are the session id), the same bytes
// on every attempt. metadata.fathom names the event's seq and the notification type.
func pushBody(sessionID string, w *messages.PendingWebhook) []byte {
	b, err := json.Marshal(map[string]any{"statusUpdate": map[string]any{
		"taskId": sessionID, "contextId": sessionID,
		"status":   map[string]any{"state": a2aStates[w.GetType()], "timestamp": time.Unix(0, w.GetAtUnixNano()).UTC().Format(time.RFC3339Nano)},
		"metadata": map[string]any{"fathom": map[string]any{"seq": w.GetEventSeq(), "notification": w.GetType()}},
	}})
	if err != nil { // maps of strings and numbers always encode
		panic(fmt.Sprintf("encode push body: %v", err))
	}
	return b
}

// WebhookAttempt is the next attempt of pending notification w of session s: to the
// session's webhook_url (WebhookBody), or for a push, to its config's url with the A2A
// body and the config's authentication (Authorization, X-A2A-Notification-Token, both
// sealed). ok is false for a push whose config is gone.
func WebhookAttempt(s *messages.SessionState, w *messages.PendingWebhook) (a webhooks.Attempt, ok bool) {
	if w.GetPushConfigId() == "" {
		return webhooks.Attempt{URL: s.GetConfig().GetWebhookUrl(), ID: w.GetWebhookId(), Body: WebhookBody(s.GetSessionId(), w)}, true
	}
	c := PushConfigOf(s, w.GetPushConfigId())
	if c == nil {
		return webhooks.Attempt{}, false
	}
	a = webhooks.Attempt{URL: c.GetUrl(), ID: w.GetWebhookId(), Body: pushBody(s.GetSessionId(), w), ContentType: PushContentType,
		SealedHeader: map[string]string{}}
	if c.GetSealedCredentials() != "" {
		a.SealedHeader["Authorization"] = c.GetSealedCredentials()
	}
	if c.GetSealedToken() != "" {
		a.SealedHeader["X-A2A-Notification-Token"] = c.GetSealedToken()
	}
	return a, true
}
