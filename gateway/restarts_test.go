package gateway_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/persistence/journaltest"
)

// TestRestartsAreServedAndFollowed: a session grain that crashes shows up in
// GET /v1/restarts (NDJSON) and in a ?follow=1 stream opened before the crash, with its
// kind, session and reason; GET /metrics counts it.
func TestRestartsAreServedAndFollowed(t *testing.T) {
	var cj *journaltest.Faulty // its next append panics once armed: the session grain crashes mid-command
	g := startGW(t, gwOpts{journal: crashOnce(&cj)})
	getAs := func(tok, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", g.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	get := func(path string) *http.Response { return getAs(token, path) } // the feed is an admin's
	// The restarts feed is node-wide: a viewer (the read token) may not follow it.
	if r := getAs(readToken, "/v1/restarts"); r.StatusCode != 403 {
		r.Body.Close()
		t.Fatalf("restarts with the read token = %d, want 403", r.StatusCode)
	} else {
		r.Body.Close()
	}
	ro := g.mustDial(readToken)
	ro.send(map[string]any{"op": "subscribe_restarts", "id": "ro"})
	if f := ro.next("error", 10*time.Second); f["code"] != "permission_denied" {
		t.Fatalf("subscribe_restarts with the read token: %v", f)
	}
	follow := get("/v1/restarts?follow=1")
	defer follow.Body.Close()
	if follow.StatusCode != 200 || follow.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("follow: %d %s", follow.StatusCode, follow.Header.Get("Content-Type"))
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(follow.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	ws := g.mustDial(token)
	ws.send(map[string]any{"op": "subscribe_restarts", "id": "rs"})
	if f := ws.next("ack", 10*time.Second); f["id"] != "rs" {
		t.Fatalf("subscribe_restarts: %v", f)
	}
	ws.send(map[string]any{"op": "subscribe_restarts", "id": "rs2"})
	if f := ws.next("error", 10*time.Second); f["code"] != "failed_precondition" {
		t.Fatalf("a second subscribe_restarts: %v", f)
	}

	cj.PanicNextAppend()
	c := g.mustDial(token)
	c.send(map[string]any{"op": "start", "session_id": "crash-1", "goal": "write a haiku", "id": "r1"})
	if f := c.next("error", 20*time.Second); f["code"] != "internal" {
		t.Fatalf("start on a crashing grain: %v", f)
	}

	var r live.Restart
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatal("follow stream ended without a record")
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no restart record on the followed stream")
	}
	if r.Kind != "session" || r.SessionID != "crash-1" || !strings.Contains(r.Reason, "injected journal panic") ||
		r.Directive != "restart" || r.Seq != 1 || r.Node == "" || r.At.IsZero() {
		t.Fatalf("restart record %+v", r)
	}
	// The same record as a restart frame on the WebSocket.
	if f := ws.next("restart", 20*time.Second); f["kind"] != "session" || f["session_id"] != "crash-1" || f["node"] != r.Node ||
		f["seq"] != float64(1) || f["at"] == nil || !strings.Contains(f["reason"].(string), "injected journal panic") {
		t.Fatalf("restart frame %v", f)
	}
	// The same record in the plain listing.
	list := get("/v1/restarts")
	defer list.Body.Close()
	var got []live.Restart
	dec := json.NewDecoder(list.Body)
	for dec.More() {
		var x live.Restart
		if err := dec.Decode(&x); err != nil {
			t.Fatal(err)
		}
		got = append(got, x)
	}
	if len(got) != 1 || got[0].Seq != 1 || got[0].SessionID != "crash-1" {
		t.Fatalf("GET /v1/restarts = %+v", got)
	}
	// Counted in the gateway's /metrics, which needs no token.
	resp, err := http.Get(g.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := new(strings.Builder)
	_, _ = bufio.NewReader(resp.Body).WriteTo(body)
	if resp.StatusCode != 200 || !strings.Contains(body.String(), `fathom_actor_restarts_total{kind="session"} 1`) {
		t.Fatalf("GET /metrics: %d\n%s", resp.StatusCode, body)
	}
	// Without a token the list is refused like every /v1 route.
	if resp, err := http.Get(g.srv.URL + "/v1/restarts"); err != nil || resp.StatusCode != 401 {
		t.Fatalf("no token: %v %v", resp, err)
	}
}
