package gateway_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestEventStreamOfUnknownSessionIsNotFound: GET /v1/sessions/{id}/events of a session
// that does not exist answers 404 not_found at once (NDJSON, SSE, follow=false), as
// every other route does, instead of 200 and a stream that waits forever; so does the
// WebSocket subscribe. A session that exists streams as before.
func TestEventStreamOfUnknownSessionIsNotFound(t *testing.T) {
	t.Parallel()
	g := startFake(t, gwOpts{})
	client := &http.Client{Timeout: 5 * time.Second} // a hanging stream fails the test
	get := func(path string, hdr map[string]string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest("GET", g.srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+readToken)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		_ = json.Unmarshal(raw, &out)
		return resp.StatusCode, out
	}
	for _, tc := range []struct {
		name, query string
		hdr         map[string]string
	}{
		{"ndjson", "", nil},
		{"sse", "", map[string]string{"Accept": "text/event-stream"}},
		{"from a seq", "?from_seq=3&deltas=false", nil},
		{"not following", "?follow=false", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := get("/v1/sessions/never-started/events"+tc.query, tc.hdr)
			if status != http.StatusNotFound || errCode(out) != "not_found" {
				t.Fatalf("= %d %v, want 404 not_found", status, out)
			}
		})
	}
	c := g.mustDial(readToken)
	c.send(map[string]any{"op": "subscribe", "id": "s", "session_id": "never-started"})
	if f := c.next("error", 5*time.Second); f["code"] != "not_found" || f["id"] != "s" {
		t.Fatalf("ws subscribe to an unknown session: %v", f)
	}

	if status, out := call(t, g.srv, "POST", "/v1/sessions", token, []byte(`{"goal":"write a haiku","session_id":"known"}`)); status != 201 {
		t.Fatalf("start = %d %v", status, out)
	}
	g.completeAsync("known")
	frames, _ := g.stream(t, "/v1/sessions/known/events?deltas=false", readToken, false, nil, "session_completed")
	sameEvents(t, frames, g.journal("known"), 0)
}

// TestErrorBodiesHideInternals cuts a node off its real PostgreSQL journal: a request
// that needs the journal answers 503 unavailable with the plain message "the journal is
// unavailable; retry" and a request_id (in the body and the X-Request-Id header; a
// client's own valid X-Request-Id is kept), never the database's user, name or address;
// the node's log has the cause under that request id. The WebSocket's error frames do
// the same, and so does the event stream.
func TestErrorBodiesHideInternals(t *testing.T) {
	proxy, cutDSN := testenv.CutPostgres(t)
	var log testenv.Buffer
	g := startGW(t, gwOpts{postgres: cutDSN, log: &log})
	if status, out := call(t, g.srv, "POST", "/v1/sessions", token, []byte(`{"goal":"write a haiku","session_id":"before"}`)); status != 201 {
		t.Fatalf("start = %d %v", status, out)
	}

	proxy.SetCut(true)
	_, port, _ := net.SplitHostPort(proxy.Addr())
	u, err := url.Parse(cutDSN)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{port, "user=", "database=", u.User.Username() + "@", strings.TrimPrefix(u.Path, "/"), "127.0.0.1", "failed to connect", "load snapshot"}
	checkHidden := func(what, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Fatalf("%s exposes %q: %s", what, s, text)
			}
		}
	}
	// inLog waits for the log line of request id rid and checks it carries the cause (the
	// store's error, which the body hides), told once (no operation named twice). The
	// cause depends on where the cut caught the connection (refused, reset, timed out),
	// so the line is recognised by its request id and an error attribute.
	inLog := func(t *testing.T, rid string) {
		t.Helper()
		var found string
		testenv.Eventually(t, 20*time.Second, func() bool {
			for _, line := range strings.Split(log.String(), "\n") {
				if strings.Contains(line, "request_id="+rid) && strings.Contains(line, "error=") {
					found = line
					return true
				}
			}
			return false
		}, "no log line with request_id=%s and the error", rid)
		if strings.Count(found, "load snapshot of") > 1 {
			t.Fatalf("the cause repeats itself: %s", found)
		}
	}

	for _, tc := range []struct {
		name, method, path, body, rid string
	}{
		{"state", "GET", "/v1/sessions/after", "", ""},
		{"start", "POST", "/v1/sessions", `{"goal":"x","session_id":"during"}`, "client-req.42"},
		{"events", "GET", "/v1/sessions/before/events", "", ""},
		{"bad client id replaced", "GET", "/v1/sessions/after/timeline", "", "no spaces allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, g.srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			if tc.rid != "" {
				req.Header.Set(gateway.RequestIDHeader, tc.rid)
			}
			resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var out struct {
				Error struct{ Code, Message, RequestID string }
			}
			_ = json.Unmarshal(raw, &out)
			out.Error.RequestID = jsonField(raw, "request_id")
			if resp.StatusCode != 503 || out.Error.Code != "unavailable" || out.Error.Message != "the journal is unavailable; retry" {
				t.Fatalf("= %d %s, want 503 unavailable, the journal is unavailable; retry", resp.StatusCode, raw)
			}
			checkHidden("the body", string(raw))
			rid := resp.Header.Get(gateway.RequestIDHeader)
			switch {
			case rid == "" || out.Error.RequestID != rid:
				t.Fatalf("request id: header %q, body %q", rid, out.Error.RequestID)
			case tc.rid == "client-req.42" && rid != tc.rid:
				t.Fatalf("the client's request id %q was replaced by %q", tc.rid, rid)
			case tc.rid == "no spaces allowed" && rid == tc.rid:
				t.Fatalf("an invalid client request id was kept")
			}
			inLog(t, rid)
		})
	}

	c := g.mustDial(token)
	c.send(map[string]any{"op": "state", "id": 1, "session_id": "ws-after"})
	f := c.next("error", 30*time.Second)
	rid, _ := f["request_id"].(string)
	if f["code"] != "unavailable" || f["message"] != "the journal is unavailable; retry" || rid == "" {
		t.Fatalf("ws error frame %v", f)
	}
	raw, _ := json.Marshal(f)
	checkHidden("the ws error frame", string(raw))
	inLog(t, rid)
}

// jsonField returns the string field name of the body's error object.
func jsonField(raw []byte, name string) string {
	var out map[string]map[string]any
	_ = json.Unmarshal(raw, &out)
	s, _ := out["error"][name].(string)
	return s
}

// TestTimeoutBodyIsPlain: a grain call that runs out of time answers 504 timeout with
// the plain "the session did not answer in time; retry" and a request id, not
// Proto.Actor's "request to Session/X failed: future: timeout".
func TestTimeoutBodyIsPlain(t *testing.T) {
	g := startGW(t, gwOpts{cfg: func(c *gateway.Config) { c.RequestTimeout = time.Nanosecond }})
	status, out := call(t, g.srv, "GET", "/v1/sessions/slow-1", token, nil)
	raw, _ := json.Marshal(out)
	if status != http.StatusGatewayTimeout || errCode(out) != "timeout" || errMessage(out) != "the session did not answer in time; retry" ||
		jsonField(raw, "request_id") == "" {
		t.Fatalf("= %d %s, want 504 timeout with a plain message and a request_id", status, raw)
	}
	for _, s := range []string{"future", "Session/", "request to"} {
		if strings.Contains(string(raw), s) {
			t.Fatalf("the body exposes %q: %s", s, raw)
		}
	}
}
