package gateway_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/gateway/a2a"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/webhooks"
)

// pushDelivery is one POST an A2A push receiver took.
type pushDelivery struct {
	auth, token, contentType, webhookID string
	body                                map[string]any
}

// a2aCall runs one JSON-RPC method of the A2A binding with bearer tok and returns its
// result and error objects.
func a2aCall(t *testing.T, g *gw, tok, method string, params any) (result, rpcErr map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest("POST", g.srv.URL+a2a.DefaultPath, strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(a2a.VersionHeader, "1.0")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	b, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %d %s", method, res.StatusCode, b)
	}
	return out.Result, out.Error
}

// TestA2APushNotifications: with a webhook secret the agent card says
// pushNotifications; a push config created on a task (CreateTaskPushNotificationConfig,
// with a bearer credential and a token) is read back without its secrets (Get, List),
// and when the task completes the node POSTs the A2A StreamResponse (a statusUpdate,
// TASK_STATE_COMPLETED) to the config's URL with "Authorization: Bearer <credentials>"
// and the token, through the journal-backed webhook delivery (webhook_delivered in the
// task's events, which never hold the credential). Another tenant's task is not found;
// after Delete the task has no config. A read-only credential may not set one, nor may
// anyone set an ftp URL.
func TestA2APushNotifications(t *testing.T) {
	var mu sync.Mutex
	var got []pushDelivery
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("push body %s: %v", b, err)
		}
		mu.Lock()
		got = append(got, pushDelivery{auth: r.Header.Get("Authorization"), token: r.Header.Get("X-A2A-Notification-Token"),
			contentType: r.Header.Get("Content-Type"), webhookID: r.Header.Get(webhooks.HeaderID), body: body})
		mu.Unlock()
	}))
	defer rcv.Close()
	g := startGW(t, gwOpts{script: a2aScript(), cfg: func(c *gateway.Config) { c.Authenticator = tenantTokens{} },
		node: func(c *node.Config) {
			c.Webhooks = webhooks.Config{Secret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("a2a-push-webhook-secret-0123456789"))}
		}})
	a2a.Mount(g.h, a2a.Config{PushNotifications: true})
	_, _, card := fetch(t, g, "GET", a2a.CardPath, "", "")
	if !strings.Contains(string(card), `"pushNotifications":true`) {
		t.Fatalf("card %s: want capabilities.pushNotifications true", card)
	}

	// A task waiting for a human's answer gets a push config.
	res, e := a2aCall(t, g, "acme", "SendMessage", map[string]any{"message": map[string]any{"messageId": "p-1", "role": "ROLE_USER",
		"parts": []any{map[string]any{"text": "Pick a colour for the fence"}}}})
	if e != nil {
		t.Fatalf("send: %v", e)
	}
	task := res["task"].(map[string]any)
	id := task["id"].(string)
	if st := task["status"].(map[string]any)["state"]; st != a2a.StateInputRequired {
		t.Fatalf("task state %v, want input-required", st)
	}
	cfg := map[string]any{"taskId": id, "id": "hook-1", "url": rcv.URL + "/a2a-push", "token": "tok-123",
		"authentication": map[string]any{"scheme": "Bearer", "credentials": "push-cred-xyz"}}
	created, e := a2aCall(t, g, "acme", "CreateTaskPushNotificationConfig", cfg)
	if e != nil || created["id"] != "hook-1" || created["taskId"] != id || created["url"] != cfg["url"] || created["token"] != nil ||
		created["authentication"].(map[string]any)["scheme"] != "Bearer" || created["authentication"].(map[string]any)["credentials"] != nil {
		t.Fatalf("create: %v %v", created, e)
	}
	if c, e := a2aCall(t, g, "acme", "GetTaskPushNotificationConfig", map[string]any{"taskId": id, "id": "hook-1"}); e != nil || c["url"] != cfg["url"] {
		t.Fatalf("get: %v %v", c, e)
	}
	if l, e := a2aCall(t, g, "acme", "ListTaskPushNotificationConfigs", map[string]any{"taskId": id}); e != nil || len(l["configs"].([]any)) != 1 {
		t.Fatalf("list: %v %v", l, e)
	}
	if _, e := a2aCall(t, g, "globex", "CreateTaskPushNotificationConfig", cfg); e == nil || e["code"] != float64(a2a.CodeTaskNotFound) {
		t.Fatalf("another tenant's create: %v, want task not found", e)
	}
	if _, e := a2aCall(t, g, readToken, "CreateTaskPushNotificationConfig", cfg); e == nil || e["code"] != float64(a2a.CodeServerError) {
		t.Fatalf("a read-only credential's create: %v, want -32000", e)
	}
	if _, e := a2aCall(t, g, "acme", "CreateTaskPushNotificationConfig", map[string]any{"taskId": id, "url": "ftp://example.com/x"}); e == nil || e["code"] != float64(a2a.CodeInvalidParams) {
		t.Fatalf("an ftp push url: %v, want -32602", e)
	}
	if _, e := a2aCall(t, g, "acme", "GetTaskPushNotificationConfig", map[string]any{"taskId": id, "id": "nope"}); e == nil || e["code"] != float64(a2a.CodeTaskNotFound) {
		t.Fatalf("get of a missing config: %v", e)
	}

	// The answer completes the task: one push, A2A's shape, with the config's auth.
	if _, e := a2aCall(t, g, "acme", "SendMessage", map[string]any{"message": map[string]any{"messageId": "p-2", "role": "ROLE_USER", "taskId": id,
		"parts": []any{map[string]any{"text": "blue"}}}}); e != nil {
		t.Fatalf("answer: %v", e)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, _, evs := fetch(t, g, "GET", "/v1/sessions/"+id+"/events?follow=false&deltas=false", "acme", "")
		return strings.Contains(string(evs), "webhook_delivered")
	}, "no webhook_delivered in the task's events")
	mu.Lock()
	first := slices.Clone(got)
	mu.Unlock()
	if len(first) != 1 {
		t.Fatalf("receiver got %d pushes, want 1: %+v", len(first), first)
	}
	d := first[0]
	su, _ := d.body["statusUpdate"].(map[string]any)
	if d.auth != "Bearer push-cred-xyz" || d.token != "tok-123" || d.contentType != "application/a2a+json" || d.webhookID == "" ||
		su == nil || su["taskId"] != id || su["contextId"] != id || su["status"].(map[string]any)["state"] != a2a.StateCompleted {
		t.Fatalf("push %+v", d)
	}
	_, _, evs := fetch(t, g, "GET", "/v1/sessions/"+id+"/events?follow=false&deltas=false", "acme", "")
	_, _, state := fetch(t, g, "GET", "/v1/sessions/"+id, "acme", "")
	if strings.Contains(string(evs)+string(state), "push-cred-xyz") || strings.Contains(string(evs)+string(state), "tok-123") ||
		!strings.Contains(string(evs), "push_config_set") {
		t.Fatalf("the task's events or state hold the push config's secrets in the clear (or no push_config_set): %s", evs)
	}

	if _, e := a2aCall(t, g, "acme", "DeleteTaskPushNotificationConfig", map[string]any{"taskId": id, "id": "hook-1"}); e != nil {
		t.Fatalf("delete: %v", e)
	}
	if l, e := a2aCall(t, g, "acme", "ListTaskPushNotificationConfigs", map[string]any{"taskId": id}); e != nil || len(l["configs"].([]any)) != 0 {
		t.Fatalf("list after delete: %v %v", l, e)
	}

	// A config given with the message that starts a task (configuration.
	// taskPushNotificationConfig) gets exactly one push of its completion, whether the
	// session completed before or after the config was recorded.
	res, e = a2aCall(t, g, "acme", "SendMessage", map[string]any{"message": map[string]any{"messageId": "p-3", "role": "ROLE_USER",
		"parts": []any{map[string]any{"text": "Write a haiku about push"}}},
		"configuration": map[string]any{"taskPushNotificationConfig": map[string]any{"url": rcv.URL + "/on-send", "token": "tok-send"}}})
	if e != nil {
		t.Fatalf("send with a push config: %v", e)
	}
	id2 := res["task"].(map[string]any)["id"].(string)
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, _, evs := fetch(t, g, "GET", "/v1/sessions/"+id2+"/events?follow=false&deltas=false", "acme", "")
		return strings.Contains(string(evs), "webhook_delivered")
	}, "no webhook_delivered in the events of the task started with a push config")
	mu.Lock()
	defer mu.Unlock()
	var onSend []pushDelivery
	for _, p := range got[1:] {
		if su, _ := p.body["statusUpdate"].(map[string]any); su != nil && su["taskId"] == id2 {
			onSend = append(onSend, p)
		}
	}
	if len(got) != 2 || len(onSend) != 1 || onSend[0].token != "tok-send" || onSend[0].auth != "" ||
		onSend[0].body["statusUpdate"].(map[string]any)["status"].(map[string]any)["state"] != a2a.StateCompleted {
		t.Fatalf("pushes %+v: want one more, the completion of %s", got, id2)
	}
}
