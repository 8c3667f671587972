package core

import (
	"errors"
	"strconv"
	"testing"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/webhooks"
)

// TestPushConfigNotifications drives push configs through the decisions: a config set
// on a completed session is due nothing until the next notifiable status, unless it
// came with the message that started the task (notify_current: the completion it
// missed is due to it); a failed attempt's retry still goes to the config; a config
// deleted drops what is still due to it.
func TestPushConfigNotifications(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Webhooks = true
	set := func(s *messages.SessionState, cmd, id string, current bool) {
		t.Helper()
		evs, err := DecideSetPushConfig(s, &messages.SetPushConfigRequest{CommandId: cmd, NotifyCurrent: current,
			Config: &messages.PushConfig{Id: id, Url: "https://hooks.example.com/" + id, AuthScheme: "Bearer", SealedCredentials: "sealed1:x"}}, cfg, t0)
		if err != nil {
			t.Fatal(err)
		}
		fold(t, s, evs)
	}
	s := completedTurn1(t, nil)
	set(s, "c1", "later", false)
	if len(s.GetWebhooks()) != 0 || len(s.GetPushConfigs()) != 1 {
		t.Fatalf("a config set on a completed session: webhooks %v configs %v", s.GetWebhooks(), s.GetPushConfigs())
	}
	set(s, "c2", "missed", true)
	w := s.GetWebhooks()
	if len(w) != 1 || w[0].GetPushConfigId() != "missed" || w[0].GetType() != WebhookCompleted || w[0].GetEventSeq() != s.GetSeq() {
		t.Fatalf("notify_current on a completed session: %v", w)
	}
	a, ok := WebhookAttempt(s, w[0])
	if !ok || a.URL != "https://hooks.example.com/missed" || a.ContentType != PushContentType || a.SealedHeader["Authorization"] != "sealed1:x" ||
		string(a.Body) != `{"statusUpdate":{"contextId":"`+s.GetSessionId()+`","metadata":{"fathom":{"notification":"session.completed","seq":`+
			strconv.FormatUint(w[0].GetEventSeq(), 10)+`}},"status":{"state":"TASK_STATE_COMPLETED","timestamp":"`+t0.UTC().Format("2006-01-02T15:04:05Z07:00")+`"},"taskId":"`+s.GetSessionId()+`"}}` {
		t.Fatalf("attempt %+v %s", a, a.Body)
	}
	// A failed attempt keeps the notification's push config (the retry goes to it too).
	fold(t, s, DecideWebhookOutcome(s, w[0].GetWebhookId(), 1, webhooks.Outcome{StatusCode: 503, Err: errors.New("down")}, webhooks.DefaultConfig(), t0))
	if w := s.GetWebhooks(); len(w) != 1 || w[0].GetAttempts() != 1 || w[0].GetPushConfigId() != "missed" {
		t.Fatalf("after a failed attempt: %v", w)
	}
	if a, ok := WebhookAttempt(s, s.GetWebhooks()[0]); !ok || a.URL != "https://hooks.example.com/missed" {
		t.Fatalf("the retry goes to %q", a.URL)
	}
	evs, err := DecideSetPushConfig(s, &messages.SetPushConfigRequest{CommandId: "c3", Delete: true, Config: &messages.PushConfig{Id: "missed"}}, cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	fold(t, s, evs)
	if len(s.GetWebhooks()) != 0 || len(s.GetPushConfigs()) != 1 || s.GetPushConfigs()[0].GetId() != "later" {
		t.Fatalf("after delete: webhooks %v configs %v", s.GetWebhooks(), s.GetPushConfigs())
	}
	if _, err := DecideSetPushConfig(s, &messages.SetPushConfigRequest{CommandId: "c4", Config: &messages.PushConfig{Id: "x", Url: "ftp://h/x"}}, cfg, t0); err == nil {
		t.Fatal("an ftp push url was taken")
	}
	cfg.Webhooks = false
	if _, err := DecideSetPushConfig(s, &messages.SetPushConfigRequest{CommandId: "c5", Config: &messages.PushConfig{Id: "x", Url: "https://h/x"}}, cfg, t0); err == nil {
		t.Fatal("a push config was taken by a node without a webhook secret")
	}
}
