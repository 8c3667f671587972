package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/persistence/artifact"
)

// stream reads an event stream route; sse selects text/event-stream.
func (g *gw) stream(t *testing.T, path, tok string, sse bool, hdr map[string]string, until string) (frames []map[string]any, ids []uint64) {
	t.Helper()
	req, _ := http.NewRequest("GET", g.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if sse {
		req.Header.Set("Accept", "text/event-stream")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if sse {
			switch {
			case strings.HasPrefix(line, "id: "):
				n, _ := strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
				ids = append(ids, n)
				continue
			case strings.HasPrefix(line, "data: "):
				line = strings.TrimPrefix(line, "data: ")
			default:
				continue
			}
		}
		var f map[string]any
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		if f["op"] == "delta" {
			continue
		}
		frames = append(frames, f)
		if until != "" && f["type"] == until {
			break
		}
	}
	return frames, ids
}

// TestGatewayHTTPOperations: the protocol's operations and event stream over HTTP.
func TestGatewayHTTPOperations(t *testing.T) {
	g := startGW(t, gwOpts{delayMS: 30})
	status, out := call(t, g.srv, "POST", "/v1/sessions", token, []byte(`{"goal":"write a haiku","session_id":"http-1"}`))
	if status != 201 || out["session_id"] != "http-1" {
		t.Fatalf("start = %d %v", status, out)
	}
	// Follow live as NDJSON until the session completes.
	live, _ := g.stream(t, "/v1/sessions/http-1/events", readToken, false, nil, "session_completed")
	journal := g.journal("http-1")
	sameEvents(t, live, journal, 0)
	// Stored events after a seq, ending at the last one.
	stored, _ := g.stream(t, "/v1/sessions/http-1/events?follow=false&from_seq=3", readToken, false, nil, "")
	sameEvents(t, stored, journal, 3)
	// Server-sent events resume from Last-Event-ID; every event carries its seq as id.
	sse, ids := g.stream(t, "/v1/sessions/http-1/events?follow=false", readToken, true, map[string]string{"Last-Event-ID": "5"}, "")
	sameEvents(t, sse, journal, 5)
	for i, id := range ids {
		if id != uint64(6+i) {
			t.Fatalf("SSE ids %v", ids)
		}
	}

	status, out = call(t, g.srv, "GET", "/v1/sessions/http-1/timeline", readToken, nil)
	if entries, _ := out["entries"].([]any); status != 200 || len(entries) != 4 { // the demo plan's four steps
		t.Fatalf("timeline = %d %v", status, out)
	}
	status, out = call(t, g.srv, "GET", "/v1/sessions/http-1/state?at=2", readToken, nil)
	if status != 200 || out["step_index"] != float64(2) {
		t.Fatalf("state?at=2 = %d %v", status, out)
	}
	status, out = call(t, g.srv, "GET", "/v1/sessions/http-1/state", readToken, nil)
	if st, _ := out["state"].(map[string]any); status != 200 || st["status"] != "SESSION_STATUS_COMPLETED" {
		t.Fatalf("state = %d %v", status, out)
	}
	for _, tc := range []struct {
		name, method, path, tok, body string
		status                        int
		code                          string
	}{
		{"bad at", "GET", "/v1/sessions/http-1/state?at=x", readToken, "", 400, "invalid_argument"},
		{"read token writes", "POST", "/v1/sessions", readToken, `{"goal":"x"}`, 403, "permission_denied"},
		{"read token pauses", "POST", "/v1/sessions/http-1/pause", readToken, "", 403, "permission_denied"},
		{"pause an ended session", "POST", "/v1/sessions/http-1/pause", token, "", 409, "failed_precondition"},
		{"tool breakpoint on an ended session", "POST", "/v1/sessions/http-1/breakpoints", token, `{"tool":"code_execute"}`, 409, "failed_precondition"},
		{"tool breakpoint after", "POST", "/v1/sessions/http-1/breakpoints", token, `{"tool":"code_execute","position":"after"}`, 400, "invalid_argument"},
		{"input to an ended session", "POST", "/v1/sessions/http-1/input", token, `{"step_id":"s","input":{"ok":true}}`, 409, "failed_precondition"},
		{"input without input", "POST", "/v1/sessions/http-1/input", token, `{"step_id":"s"}`, 400, "invalid_argument"},
		{"clear breakpoints of an ended session", "DELETE", "/v1/sessions/http-1/breakpoints", token, "", 409, "failed_precondition"},
		{"fork without step_index", "POST", "/v1/sessions/http-1/fork", token, `{}`, 400, "invalid_argument"},
		{"fork past the plan", "POST", "/v1/sessions/http-1/fork", token, `{"step_index":9}`, 409, "failed_precondition"},
		{"fork of an unknown session", "POST", "/v1/sessions/nope/fork", token, `{"step_index":1}`, 404, "not_found"},
		{"fork with a read token", "POST", "/v1/sessions/http-1/fork", readToken, `{"step_index":1}`, 403, "permission_denied"},
		{"path and body disagree", "POST", "/v1/sessions/http-1/resume", token, `{"session_id":"other"}`, 400, "invalid_argument"},
		{"unknown session timeline", "GET", "/v1/sessions/nope/timeline", readToken, "", 404, "not_found"},
		{"unknown session stored events", "GET", "/v1/sessions/nope/events?follow=false", readToken, "", 404, "not_found"},
		{"bad from_seq", "GET", "/v1/sessions/http-1/events?from_seq=-1", readToken, "", 400, "invalid_argument"},
		{"events without token", "GET", "/v1/sessions/http-1/events", "", "", 401, "unauthenticated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := call(t, g.srv, tc.method, tc.path, tc.tok, []byte(tc.body))
			if status != tc.status || errCode(out) != tc.code {
				t.Fatalf("= %d %v, want %d %s", status, out, tc.status, tc.code)
			}
		})
	}
	// A fork after the first step runs the rest on its own.
	status, out = call(t, g.srv, "POST", "/v1/sessions/http-1/fork", token, []byte(`{"step_index":1,"new_session_id":"http-fork","command_id":"f1"}`))
	if status != 201 || out["session_id"] != "http-fork" || out["source_session_id"] != "http-1" {
		t.Fatalf("fork = %d %v", status, out)
	}
	forked, _ := g.stream(t, "/v1/sessions/http-fork/events", readToken, false, nil, "session_completed")
	sameEvents(t, forked, g.journal("http-fork"), 0)
	// The artifacts the source had by the fork point are the fork's too, under its id,
	// and the copied artifact_written events name the fork's paths.
	ctx := context.Background()
	srcNotes, _, err := g.n.Artifacts().Read(ctx, "default", "http-1/research/notes.md")
	if err != nil {
		t.Fatalf("source notes: %v", err)
	}
	forkNotes, _, err := g.n.Artifacts().Read(ctx, "default", "http-fork/research/notes.md")
	if err != nil || string(forkNotes) != string(srcNotes) {
		t.Fatalf("fork's copy of the research notes = %q, %v; want the source's %q", forkNotes, err, srcNotes)
	}
	written := 0
	for _, ev := range g.journal("http-fork") {
		if ev["type"] == "artifact_written" {
			written++
			if p, _ := ev["path"].(string); !strings.HasPrefix(p, "http-fork/") {
				t.Fatalf("the fork records artifact %q outside its workspace", p)
			}
		}
	}
	if written < 2 { // the copied research notes and what the fork's own steps wrote
		t.Fatalf("%d artifact_written events in the fork", written)
	}
	status, out = call(t, g.srv, "POST", "/v1/sessions/http-1/fork", token, []byte(`{"step_index":1,"new_session_id":"http-fork","command_id":"f1"}`))
	if status != 201 || out["duplicate"] != true {
		t.Fatalf("retried fork = %d %v", status, out)
	}
	// An artifact deleted from the store since is left out of a later fork, which is
	// made anyway (refusing would refuse every retry too).
	if err := g.n.Artifacts().Delete(ctx, "default", "http-1/research/notes.md"); err != nil {
		t.Fatal(err)
	}
	status, out = call(t, g.srv, "POST", "/v1/sessions/http-1/fork", token, []byte(`{"step_index":1,"new_session_id":"http-fork-2","command_id":"f2"}`))
	if status != 201 || out["session_id"] != "http-fork-2" {
		t.Fatalf("fork after an artifact was deleted = %d %v", status, out)
	}
	if _, _, err := g.n.Artifacts().Read(ctx, "default", "http-fork-2/research/notes.md"); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("the deleted artifact in the second fork: err = %v, want not found", err)
	}
}

// TestGatewayForkWithAModifiedStep: POST /v1/sessions/{id}/fork with modified_step runs
// the fork's edited step (the writer's brief has the new description) and records the
// merged step in session_forked; a step that already ran at the fork point is 409, an
// id the plan lacks or a malformed step 400.
func TestGatewayForkWithAModifiedStep(t *testing.T) {
	g := startGW(t, gwOpts{})
	status, out := call(t, g.srv, "POST", "/v1/sessions", token, []byte(`{"goal":"write a haiku","session_id":"fm-1"}`))
	if status != 201 {
		t.Fatalf("start = %d %v", status, out)
	}
	g.stream(t, "/v1/sessions/fm-1/events", readToken, false, nil, "session_completed")
	for body, want := range map[string]string{
		`{"step_index":1,"modified_step":{"id":"s1","description":"again"}}`: "409 failed_precondition",
		`{"step_index":1,"modified_step":{"id":"s9","description":"x"}}`:     "400 invalid_argument",
		`{"step_index":1,"modified_step":{"id":5}}`:                          "400 invalid_argument",
	} {
		status, out := call(t, g.srv, "POST", "/v1/sessions/fm-1/fork", token, []byte(body))
		if got := fmt.Sprintf("%d %s", status, errCode(out)); got != want {
			t.Fatalf("fork %s = %s %v, want %s", body, got, out, want)
		}
	}
	status, out = call(t, g.srv, "POST", "/v1/sessions/fm-1/fork", token,
		[]byte(`{"step_index":1,"new_session_id":"fm-edit","modified_step":{"id":"s3","description":"Write it as a limerick instead"}}`))
	if status != 201 || out["session_id"] != "fm-edit" {
		t.Fatalf("fork = %d %v", status, out)
	}
	g.stream(t, "/v1/sessions/fm-edit/events", readToken, false, nil, "session_completed")
	var recorded, briefed bool
	for _, ev := range g.journal("fm-edit") {
		switch ev["type"] {
		case "session_forked":
			m, _ := ev["modified_step"].(map[string]any)
			recorded = m["id"] == "s3" && m["description"] == "Write it as a limerick instead" && m["type"] == "write"
		case "subagent_started":
			if task, _ := ev["task"].(string); ev["step_id"] == "s3" {
				briefed = strings.Contains(task, "Write it as a limerick instead")
			}
		}
	}
	if !recorded || !briefed {
		t.Fatalf("the fork's edit: recorded in session_forked %v, in the writer's brief %v", recorded, briefed)
	}
}
