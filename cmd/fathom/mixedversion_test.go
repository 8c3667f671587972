package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestNewerEventNeverAnswers500: a member whose build cannot decode an event of a
// session's journal (written by a newer build, as during a rolling upgrade or after a
// roll-back) answers every route of the session with a clear 4xx error naming the cause,
// never a 500, and its log says once, plainly, that the session needs a newer member.
func TestNewerEventNeverAnswers500(t *testing.T) {
	t.Parallel()
	data, id := sessionWithFutureEvent(t)
	const tok = "newer-token"
	p := startNode(t, cleanEnv(), "--data-dir", data, "--token", tok)
	s := "/v1/sessions/" + id
	for _, c := range []struct{ method, path string }{
		{"GET", s}, {"GET", s + "/timeline"}, {"GET", s + "/state?at=1"}, {"GET", s + "/state?seq=2"},
		{"GET", s + "/gantt"}, {"GET", s + "/transcript"}, {"GET", s + "/events/1"},
		{"GET", s + "/events?follow=false"}, {"POST", s + "/messages"}, {"POST", s + "/pause"},
		{"POST", s + "/cancel"}, {"POST", s + "/fork"}, {"GET", "/v1/sessions"},
	} {
		var body any
		switch {
		case strings.HasSuffix(c.path, "/messages"):
			body = map[string]any{"content": "and then?"}
		case strings.HasSuffix(c.path, "/fork"):
			body = map[string]any{"step_index": 1}
		case c.method == "POST":
			body = map[string]any{}
		}
		code, raw := httpRaw(t, c.method, p.url+c.path, tok, body)
		if code >= 500 {
			t.Errorf("%s %s = %d %s, want a 4xx naming the newer version", c.method, c.path, code, raw)
		}
		t.Logf("%s %s = %d %.160s", c.method, c.path, code, raw)
	}
	p.stop(t)
	if n := strings.Count(p.stderr.String(), "cannot host this session: its journal holds an event written by a newer Fathom"); n != 1 {
		t.Errorf("the node's log says %d times that it cannot host the session, want once:\n%s", n, p.stderr)
	}
}

// httpRaw sends method url with token (none when empty) and body as JSON (none when
// nil) and returns the status and the body's first KiB.
func httpRaw(t *testing.T, method, url, token string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return resp.StatusCode, string(raw)
}
