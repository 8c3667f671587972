package fathom_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/gateway/mcpserver"
	"github.com/fathom-agents/fathom/internal/fathomtest"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// testWebhookKey is the receiver's copy of the node's webhook secret.
var testWebhookKey = []byte("0123456789abcdef0123456789abcdef")

var testWebhookSecret = "whsec_" + base64.StdEncoding.EncodeToString(testWebhookKey)

// delivery is one POST a test receiver took.
type delivery struct {
	id, typ, sessionID string
	seq                uint64
	status             int
}

// receiver is a webhook receiver that checks every POST's Standard Webhooks signature
// (crypto/hmac over "id.timestamp.body", as a receiver would) and answers 500 while
// failing says so.
type receiver struct {
	t       *testing.T
	mu      sync.Mutex
	got     []delivery
	failing func(n int) bool // n: the POSTs taken so far, this one excluded
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id, ts, sig := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature")
	m := hmac.New(sha256.New, testWebhookKey)
	m.Write([]byte(id + "." + ts + "." + string(body)))
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	sec, err := strconv.ParseInt(ts, 10, 64)
	if !hmac.Equal([]byte(sig), []byte(want)) || err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute || id == "" {
		rc.t.Errorf("webhook %q: bad signature %q (want %q) or timestamp %q", id, sig, want, ts)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var n struct {
		Type string `json:"type"`
		Data struct {
			SessionID string `json:"session_id"`
			Seq       uint64 `json:"seq"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &n); err != nil {
		rc.t.Errorf("webhook body %s: %v", body, err)
	}
	rc.mu.Lock()
	status := http.StatusOK
	if rc.failing(len(rc.got)) {
		status = http.StatusInternalServerError
	}
	rc.got = append(rc.got, delivery{id: id, typ: n.Type, sessionID: n.Data.SessionID, seq: n.Data.Seq, status: status})
	rc.mu.Unlock()
	w.WriteHeader(status)
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

// webhookEvents reads session id's webhook_delivered and webhook_failed events.
func webhookEvents(ctx context.Context, t *testing.T, n *fathom.Node, id string) (delivered []*messages.WebhookDelivered, failed []*messages.WebhookFailed) {
	t.Helper()
	st, err := n.State(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	sub := n.Follow(id, 0)
	defer sub.Close()
	var evs []*messages.Event
	for uint64(len(evs)) < st.GetSeq() {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			t.Fatalf("follow %s: %v", id, err)
		}
		if !u.IsDelta {
			evs = append(evs, u.Event)
		}
	}
	for _, ev := range evs {
		if d := ev.GetWebhookDelivered(); d != nil {
			delivered = append(delivered, d)
		}
		if f := ev.GetWebhookFailed(); f != nil {
			failed = append(failed, f)
		}
	}
	return delivered, failed
}

// TestWebhookRetriedUntilDelivered: a session waiting for an approval and then
// completed owes its receiver two notifications (session.awaiting_human,
// session.completed). The receiver fails the first 3 POSTs: each is retried with the
// same webhook-id until it is taken, every POST carries a valid signature, exactly the
// two notifications arrive (no other id), and the session's events record the 3
// failures (webhook_failed, attempts 1..) and the 2 deliveries (webhook_delivered).
func TestWebhookRetriedUntilDelivered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rc := &receiver{t: t, failing: func(n int) bool { return n < 3 }}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	n := fathomtest.StartNode(t, fathomtest.Options{Rules: `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s\",\"type\":\"custom\",\"description\":\"refund it\"}]}"},
		{"tool_match":".","response":"done: {{.Tool}}"},
		{"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"refund","arguments":"{\"order\":\"42\"}"}]}]}`, Edit: func(c *fathom.Config) {
		c.Tools = []tools.Tool{tools.MustNew("refund", "Refunds an order.", tools.SandboxNone, func(_ context.Context, a struct {
			Order string `json:"order"`
		}) (any, error) {
			return "refunded " + a.Order, nil
		})}
		c.ApprovalTools = []string{"refund"}
		c.Webhooks = fathom.Webhooks{Secret: testWebhookSecret, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	}})
	const id = "hook-1"
	if _, err := n.StartSession(ctx, fathom.SessionRequest{ID: id, Goal: "refund order 42", WebhookURL: srv.URL + "/hooks"}); err != nil {
		t.Fatal(err)
	}
	fathomtest.WaitStatus(ctx, t, n, id, messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN)
	if err := n.Approve(ctx, id, "s"); err != nil {
		t.Fatal(err)
	}
	fathomtest.WaitStatus(ctx, t, n, id, messages.SessionStatus_SESSION_STATUS_COMPLETED)
	testenv.Eventually(t, 30*time.Second, func() bool {
		d, _ := webhookEvents(ctx, t, n, id)
		return len(d) == 2
	}, "the session never recorded two webhook_delivered events")
	delivered, failed := webhookEvents(ctx, t, n, id)
	if len(failed) != 3 {
		t.Fatalf("webhook_failed events %v, want 3", failed)
	}
	for i, f := range failed {
		if f.GetFinal() || f.GetStatusCode() != 500 || f.GetNextAttemptUnixNano() == 0 {
			t.Fatalf("webhook_failed %d: %v", i, f)
		}
	}
	types := map[string]string{} // webhook-id -> type
	for _, d := range rc.deliveries() {
		if d.sessionID != id {
			t.Fatalf("delivery for session %q", d.sessionID)
		}
		if prev, ok := types[d.id]; ok && prev != d.typ {
			t.Fatalf("webhook-id %s sent as %s and %s", d.id, prev, d.typ)
		}
		types[d.id] = d.typ
	}
	got := rc.deliveries()
	if len(got) != 5 || len(types) != 2 {
		t.Fatalf("deliveries %+v: want 5 POSTs (3 failed, 2 taken) of 2 notifications", got)
	}
	taken := map[string]bool{}
	for _, d := range got {
		if d.status == http.StatusOK {
			if taken[d.typ] {
				t.Fatalf("%s taken twice: %+v", d.typ, got)
			}
			taken[d.typ] = true
		}
	}
	if !taken["session.awaiting_human"] || !taken["session.completed"] {
		t.Fatalf("notifications taken %v, want session.awaiting_human and session.completed", taken)
	}
	for _, d := range delivered {
		if types[d.GetWebhookId()] != d.GetNotification() {
			t.Fatalf("webhook_delivered %v names no notification the receiver took", d)
		}
	}
	if st, err := n.State(ctx, id); err != nil || len(st.GetWebhooks()) != 0 {
		t.Fatalf("pending webhooks after delivery: %v, %v", st.GetWebhooks(), err)
	}
}

// TestWebhookDeliveredAfterRestart: a node stopped while its receiver is down leaves
// the session's notification pending in the journal (webhook_failed, the next attempt
// due); a node started on the same journal delivers it, with the same webhook-id, and
// records webhook_delivered.
func TestWebhookDeliveredAfterRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var down sync.Mutex // held while the receiver is down
	var up bool
	rc := &receiver{t: t, failing: func(int) bool { down.Lock(); defer down.Unlock(); return !up }}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Webhooks = fathom.Webhooks{Secret: testWebhookSecret, InitialBackoff: 300 * time.Millisecond, MaxBackoff: 300 * time.Millisecond}
	a, err := fathom.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const id = "hook-restart"
	if _, err := a.StartSession(ctx, fathom.SessionRequest{ID: id, Goal: "Explain event sourcing in one sentence", WebhookURL: srv.URL}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, f := webhookEvents(ctx, t, a, id)
		return len(f) > 0
	}, "no webhook_failed while the receiver is down")
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	down.Lock()
	up = true
	down.Unlock()
	b, err := fathom.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	// Only the journal is read (Follow activates nothing): the session must come back
	// by itself, as the reactivator brings back a session whose next attempt is due.
	var delivered []*messages.WebhookDelivered
	var failed []*messages.WebhookFailed
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	for _, ev := range waitEvent(wctx, t, b, id, 0, "webhook_delivered") {
		if d := ev.GetWebhookDelivered(); d != nil {
			delivered = append(delivered, d)
		}
		if f := ev.GetWebhookFailed(); f != nil {
			failed = append(failed, f)
		}
	}
	d := delivered[0]
	if d.GetNotification() != "session.completed" || d.GetAttempt() != failed[len(failed)-1].GetAttempt()+1 || d.GetWebhookId() != failed[0].GetWebhookId() {
		t.Fatalf("webhook_delivered %v after failures %v", d, failed)
	}
	for _, r := range rc.deliveries() {
		if r.id != d.GetWebhookId() || r.typ != "session.completed" {
			t.Fatalf("receiver got %+v, want only %s", r, d.GetWebhookId())
		}
	}
}

// TestAgentWebhookURL: an agent's WebhookURL (the config file's agents[].webhook_url)
// is the webhook_url of the sessions its tool on the node's MCP server starts: one call
// of the tool makes the node POST that session's signed session.completed notification
// there, while a session started without the agent (and with no webhook_url) notifies
// nobody.
func TestAgentWebhookURL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rc := &receiver{t: t, failing: func(int) bool { return false }}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	n := fathomtest.StartNode(t, fathomtest.Options{Rules: `{"rules":[
		{"system_match":"FATHOM-PHASE: synthesize","response":"audited"},
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"a\",\"type\":\"auditor\",\"description\":\"audit the totals\"}]}"}]}`,
		Edit: func(c *fathom.Config) {
			c.Agents = []fathom.Agent{{Name: "auditor", Description: "Audits totals", WebhookURL: srv.URL + "/auditor",
				Run: func(context.Context, fathom.Brief) (*fathom.Handoff, error) {
					return &fathom.Handoff{Summary: "totals match", Confidence: 0.9}, nil
				}}}
			c.Webhooks = fathom.Webhooks{Secret: testWebhookSecret}
		}})
	h, err := n.Gateway(ctx, gateway.Config{})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	defer gw.Close()
	defer h.Shutdown(context.Background())
	mc, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gw.URL + mcpserver.Path}, nil)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	defer mc.Close()
	res, err := mc.CallTool(ctx, &mcp.CallToolParams{Name: "auditor", Arguments: map[string]any{"goal": "Audit the totals", "session_id": "agent-hook"}})
	if err != nil || res.IsError {
		t.Fatalf("call the auditor tool: %v %+v", err, res)
	}
	if _, err := n.StartSession(ctx, fathom.SessionRequest{ID: "no-hook", Goal: "Audit the totals"}); err != nil {
		t.Fatal(err)
	}
	fathomtest.WaitStatus(ctx, t, n, "no-hook", messages.SessionStatus_SESSION_STATUS_COMPLETED)
	testenv.Eventually(t, 30*time.Second, func() bool {
		d, _ := webhookEvents(ctx, t, n, "agent-hook")
		return len(d) == 1
	}, "the agent's session never recorded webhook_delivered")
	got := rc.deliveries()
	if len(got) != 1 || got[0].sessionID != "agent-hook" || got[0].typ != "session.completed" || got[0].status != http.StatusOK {
		t.Fatalf("deliveries %+v: want agent-hook's session.completed only", got)
	}
	if st, err := n.State(ctx, "no-hook"); err != nil || st.GetConfig().GetWebhookUrl() != "" {
		t.Fatalf("the session started without the agent has webhook_url %q (%v)", st.GetConfig().GetWebhookUrl(), err)
	}
}
