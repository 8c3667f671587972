package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestWebhookSurvivesNodeKill: a `fathom node` whose session's receiver is down records
// webhook_failed and is killed (SIGKILL) before the next attempt; a node started on the
// same data directory delivers the notification (same webhook-id, valid signature)
// once the session's lease lapsed and its attempt is due, and records
// webhook_delivered.
func TestWebhookSurvivesNodeKill(t *testing.T) {
	key := []byte("node-kill-webhook-secret-0123456789")
	var mu sync.Mutex
	up := false
	var ids []string // webhook-id of every POST
	var okIDs []string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id + "." + ts + "." + string(body)))
		if want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)); r.Header.Get("webhook-signature") != want {
			t.Errorf("webhook %s: bad signature", id)
		}
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, id)
		if !up {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		okIDs = append(okIDs, id)
	}))
	defer rcv.Close()
	const token = "t"
	dir := t.TempDir()
	env := cleanEnv("FATHOM_WEBHOOK_SECRET=whsec_" + base64.StdEncoding.EncodeToString(key))
	args := []string{"--data-dir", dir, "--token", token, "--lease-ttl", "2s", "--webhook-backoff", "500ms", "--webhook-max-backoff", "500ms"}
	events := func(p *nodeProc, id string) string { return storedEventsText(p, token, id) }
	a := startNode(t, env, args...)
	if code, body := httpJSON(t, "POST", a.url+"/v1/sessions", token, map[string]any{"goal": "say hi", "session_id": "hook-kill", "webhook_url": rcv.URL}); code != 201 {
		t.Fatalf("start: %d %v", code, body)
	}
	testenv.Eventually(t, 60*time.Second, func() bool { return strings.Contains(events(a, "hook-kill"), `"webhook_failed"`) },
		"node A never recorded webhook_failed")
	if err := a.cmd.Process.Kill(); err != nil { // SIGKILL: no lease release, attempts cut off
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	mu.Lock()
	up = true
	mu.Unlock()
	b := startNode(t, env, args...)
	testenv.Eventually(t, 60*time.Second, func() bool { return strings.Contains(events(b, "hook-kill"), `"webhook_delivered"`) },
		"node B never delivered the notification node A could not")
	mu.Lock()
	defer mu.Unlock()
	if len(okIDs) != 1 {
		t.Fatalf("receiver took %d POSTs, want 1: %v", len(okIDs), okIDs)
	}
	for _, id := range ids {
		if id != okIDs[0] {
			t.Fatalf("POSTs of one notification carry ids %v, want one id", ids)
		}
	}
}

// TestA2APushSurvivesNodeKill: an A2A task started on a `fathom node` with a push config
// (configuration.taskPushNotificationConfig, a bearer credential) whose receiver is down
// records webhook_failed; the node is killed (SIGKILL) before the next attempt; a node
// started on the same data directory (the same webhook secret) delivers the push, the
// A2A statusUpdate of the completed task with "Authorization: Bearer <credentials>"
// (sealed in the journal, opened by the second node), and records webhook_delivered.
func TestA2APushSurvivesNodeKill(t *testing.T) {
	var mu sync.Mutex
	up := false
	var auths, okBodies []string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		auths = append(auths, r.Header.Get("Authorization"))
		if !up {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		okBodies = append(okBodies, string(body))
	}))
	defer rcv.Close()
	const token = "t"
	dir := t.TempDir()
	env := cleanEnv("FATHOM_WEBHOOK_SECRET=whsec_" + base64.StdEncoding.EncodeToString([]byte("push-kill-webhook-secret-0123456789")))
	args := []string{"--data-dir", dir, "--token", token, "--lease-ttl", "2s", "--webhook-backoff", "500ms", "--webhook-max-backoff", "500ms"}
	events := func(p *nodeProc, id string) string { return storedEventsText(p, token, id) }
	a := startNode(t, env, args...)
	code, out := httpJSON(t, "POST", a.url+"/a2a", token, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{
		"message": map[string]any{"messageId": "kill-1", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "say hi"}}},
		"configuration": map[string]any{"returnImmediately": true, "taskPushNotificationConfig": map[string]any{"url": rcv.URL + "/push",
			"authentication": map[string]any{"scheme": "Bearer", "credentials": "kill-cred"}}}}})
	res, _ := out["result"].(map[string]any)
	task, _ := res["task"].(map[string]any)
	id, _ := task["id"].(string)
	if code != 200 || id == "" {
		t.Fatalf("send: %d %v", code, out)
	}
	testenv.Eventually(t, 60*time.Second, func() bool { return strings.Contains(events(a, id), `"webhook_failed"`) },
		"node A never recorded webhook_failed")
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	mu.Lock()
	up = true
	mu.Unlock()
	b := startNode(t, env, args...)
	testenv.Eventually(t, 60*time.Second, func() bool { return strings.Contains(events(b, id), `"webhook_delivered"`) },
		"node B never delivered the push node A could not")
	mu.Lock()
	defer mu.Unlock()
	if len(okBodies) != 1 || !strings.Contains(okBodies[0], `"taskId":"`+id+`"`) || !strings.Contains(okBodies[0], `"TASK_STATE_COMPLETED"`) {
		t.Fatalf("receiver took %q, want the one completed statusUpdate of %s", okBodies, id)
	}
	for _, a := range auths {
		if a != "Bearer kill-cred" {
			t.Fatalf("push Authorization headers %q, want Bearer kill-cred on every attempt", auths)
		}
	}
	if strings.Contains(events(b, id), "kill-cred") {
		t.Fatal("the task's events hold the push credential in the clear")
	}
}

// storedEventsText is the NDJSON of session id's stored events as node p serves them to
// token ("" when the request fails: the caller polls).
func storedEventsText(p *nodeProc, token, id string) string {
	req, _ := http.NewRequest("GET", p.url+"/v1/sessions/"+id+"/events?follow=false&deltas=false", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
