package gateway_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/webhooks"
)

// TestHTTPStartWebhook: POST /v1/sessions with webhook_url makes the node POST the
// session's session.completed notification there, signed with the node's secret
// (checked with crypto/hmac as a receiver would), and GET .../events shows its
// webhook_delivered. A URL that is not http(s) is 400 invalid_argument; a node with no
// secret refuses a webhook_url with 409 failed_precondition.
func TestHTTPStartWebhook(t *testing.T) {
	key := []byte("gateway-webhook-secret-0123456789")
	var mu sync.Mutex
	var got []string // "id type"
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id + "." + ts + "." + string(body)))
		if want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)); r.Header.Get("webhook-signature") != want {
			t.Errorf("webhook %s: signature %q, want %q", id, r.Header.Get("webhook-signature"), want)
		}
		var n struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(body, &n)
		mu.Lock()
		got = append(got, id+" "+n.Type)
		mu.Unlock()
	}))
	defer rcv.Close()
	g := startGW(t, gwOpts{node: func(c *node.Config) {
		c.Webhooks = webhooks.Config{Secret: "whsec_" + base64.StdEncoding.EncodeToString(key)}
	}})
	status, _, body := fetch(t, g, "POST", "/v1/sessions", token, `{"goal":"say hi","session_id":"gw-hook","webhook_url":"`+rcv.URL+`/in"}`)
	if status != 201 {
		t.Fatalf("start = %d %s", status, body)
	}
	waitSessionStatus(t, g, "gw-hook", "SESSION_STATUS_COMPLETED")
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, _, evs := fetch(t, g, "GET", "/v1/sessions/gw-hook/events?follow=false&deltas=false", readToken, "")
		return strings.Contains(string(evs), "webhook_delivered")
	}, "no webhook_delivered in the session's events")
	mu.Lock()
	if len(got) != 1 || !strings.HasSuffix(got[0], " session.completed") || !strings.HasPrefix(got[0], "msg_") {
		t.Errorf("receiver got %q, want one session.completed", got)
	}
	mu.Unlock()

	if status, _, body := fetch(t, g, "POST", "/v1/sessions", token, `{"goal":"say hi","webhook_url":"ftp://example.com/x"}`); status != 400 || !strings.Contains(string(body), "invalid_argument") {
		t.Fatalf("start with an ftp webhook_url = %d %s", status, body)
	}
}

// TestHTTPStartWebhookNeedsASecret: a node without a webhook secret refuses a start that
// names a webhook_url (409), rather than accept notifications it cannot sign. (A test of
// its own: two live nodes in one process trip Proto.Actor's grpclog race under -race; the
// fakes decide with the session core as a node without a secret does, in parallel.)
func TestHTTPStartWebhookNeedsASecret(t *testing.T) {
	t.Parallel()
	plain := startFake(t, gwOpts{})
	if status, _, body := fetch(t, plain, "POST", "/v1/sessions", token, `{"goal":"say hi","webhook_url":"http://127.0.0.1:9/in"}`); status != 409 || !strings.Contains(string(body), "webhook secret") {
		t.Fatalf("start with a webhook_url on a node without a secret = %d %s", status, body)
	}
}
