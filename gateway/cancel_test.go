package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestCancelOverWebSocketAndHTTP: the cancel op ends a running session (its subscriber
// sees session_cancelled with the reason and who), a write token is needed, and
// POST /v1/sessions/{id}/cancel on the ended session answers 409 failed_precondition.
func TestCancelOverWebSocketAndHTTP(t *testing.T) {
	t.Parallel()
	g := startFake(t, gwOpts{}) // the session waits at its planning call until cancelled
	c := g.mustDial(token)
	c.send(map[string]any{"op": "start", "session_id": "cx-1", "goal": "write a haiku", "id": "st"})
	c.next("ack", 10*time.Second)
	c.send(map[string]any{"op": "subscribe", "session_id": "cx-1", "id": "sub"})
	c.next("ack", 10*time.Second)

	ro := g.mustDial(readToken)
	ro.send(map[string]any{"op": "cancel", "session_id": "cx-1", "id": "ro"})
	if f := ro.next("error", 10*time.Second); f["code"] != "permission_denied" {
		t.Fatalf("cancel with the read token: %v", f)
	}

	c.send(map[string]any{"op": "cancel", "session_id": "cx-1", "reason": "changed my mind", "by": "alice", "id": "cn"})
	var ackSeq float64
	var cancelled map[string]any
	deadline := time.Now().Add(20 * time.Second)
	for (ackSeq == 0 || cancelled == nil) && time.Now().Before(deadline) {
		f := c.read(20 * time.Second)
		switch {
		case f["op"] == "ack" && f["id"] == "cn":
			res, _ := f["result"].(map[string]any)
			ackSeq, _ = res["seq"].(float64)
		case f["op"] == "event" && f["type"] == "session_cancelled":
			cancelled = f
		case f["op"] == "event" && (f["type"] == "session_completed" || f["type"] == "session_failed"):
			t.Fatalf("the session ended otherwise: %v", f)
		}
	}
	if ackSeq == 0 || cancelled == nil || cancelled["seq"].(float64) != ackSeq {
		t.Fatalf("ack seq %v, event %v", ackSeq, cancelled)
	}
	if cancelled["reason"] != "changed my mind" || cancelled["by"] != "alice" {
		t.Fatalf("session_cancelled frame %v", cancelled)
	}
	body, _ := json.Marshal(map[string]any{"reason": "again"})
	req, _ := http.NewRequest("POST", g.srv.URL+"/v1/sessions/cx-1/cancel", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusConflict || e.Error.Code != "failed_precondition" {
		t.Fatalf("cancel of an ended session over HTTP: %d %+v", resp.StatusCode, e)
	}
}
