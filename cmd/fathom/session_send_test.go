package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// threadModel serves a model that answers the goal in one step and each follow-up
// directly, citing the earlier answers it was shown (context_match).
func threadModel(t *testing.T) []string {
	t.Helper()
	script, err := mock.ParseScript([]byte(`{"rules":[
		{"system_match":"FATHOM-FOLLOW-UP","match":"^in French","context_match":"ANSWER-ONE","response":"REPONSE-DEUX (after {{find \"(ANSWER-ONE)\" .All}})"},
		{"system_match":"FATHOM-FOLLOW-UP","match":"^and again","context_match":"(?s)ANSWER-ONE.*REPONSE-DEUX","response":"ANSWER-THREE"},
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"a\",\"type\":\"custom\",\"description\":\"answer\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","response":"ANSWER-ONE"}],"default":"UNSCRIPTED"}`))
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	t.Cleanup(model.Close)
	return cleanEnv("OPENAI_BASE_URL="+model.URL+"/v1", "OPENAI_API_KEY=k", "FATHOM_MODEL=mock-model")
}

// TestSessionSend: `fathom session send ID TEXT` continues a completed session on an
// in-process node over the data dir, printing the turn from its message_received to its
// session_completed; it refuses an empty message (usage) and a session that does not
// exist; through a node (--addr) it posts to /v1/sessions/{id}/messages.
func TestSessionSend(t *testing.T) {
	t.Parallel()
	env := threadModel(t)
	data := filepath.Join(t.TempDir(), "data")
	r := fathom(t, env, "run", "--data-dir", data, "--json", "--session-id", "t1", "say something")
	evs := jsonEvents(t, r.stdout)
	if r.code != 0 || evs[len(evs)-1]["type"] != "session_completed" || evs[len(evs)-1]["result"] != "ANSWER-ONE" {
		t.Fatalf("run: exit %d, events %v\n%s", r.code, eventTypes(evs), r.stderr)
	}
	turn1End := fmt.Sprint(evs[len(evs)-1]["seq"])
	r = fathom(t, env, "session", "send", "--data-dir", data, "t1", "in French, please")
	if r.code != 0 || !strings.Contains(r.stdout, "» follow-up message (turn 2): in French, please") ||
		!strings.Contains(r.stdout, "REPONSE-DEUX (after ANSWER-ONE)") || !strings.Contains(r.stdout, "✓ session completed") {
		t.Fatalf("send: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = fathom(t, env, "session", "send", "--data-dir", data, "--json", "t1", "and again")
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("send --json printed %q: %v", line, err)
		}
		types = append(types, ev["type"].(string))
		if ev["type"] == "session_completed" && ev["result"] != "ANSWER-THREE" {
			t.Fatalf("turn 3 result %v", ev["result"])
		}
	}
	if r.code != 0 || len(types) == 0 || types[0] != "message_received" || types[len(types)-1] != "session_completed" {
		t.Fatalf("send --json: exit %d, events %v\n%s", r.code, types, r.stderr)
	}
	// A fork at turn 1's end is a completed session of its own, which takes the same
	// follow-up and answers it from turn 1 alone.
	r = fathom(t, env, "session", "fork", "--data-dir", data, "--at-seq", turn1End, "--new-id", "t1-fork", "t1")
	if r.code != 0 || !strings.Contains(r.stdout, "the fork is completed") {
		t.Fatalf("fork --at-seq: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = fathom(t, env, "session", "send", "--data-dir", data, "t1-fork", "in French")
	if r.code != 0 || !strings.Contains(r.stdout, "REPONSE-DEUX (after ANSWER-ONE)") {
		t.Fatalf("send to the fork: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := fathom(t, env, "session", "send", "--data-dir", data, "t1", "  "); r.code != 2 {
		t.Fatalf("empty message: exit %d\n%s", r.code, r.stderr)
	}
	if r := fathom(t, env, "session", "send", "--data-dir", data, "nope", "hello"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("unknown session: exit %d\n%s", r.code, r.stderr)
	}

	const tok = "send-token"
	p := startNode(t, env, "--data-dir", filepath.Join(t.TempDir(), "node"), "--token", tok)
	if code, body := httpJSON(t, "POST", p.url+"/v1/sessions", tok, map[string]any{"goal": "say something", "session_id": "t2"}); code != 201 {
		t.Fatalf("start: %d %v", code, body)
	}
	completedWith := func(result string) func() bool {
		return func() bool {
			_, st := httpJSON(t, "GET", p.url+"/v1/sessions/t2", tok, nil)
			state, _ := st["state"].(map[string]any)
			return state["status"] == "SESSION_STATUS_COMPLETED" && state["result"] == result
		}
	}
	testenv.Eventually(t, 20*time.Second, completedWith("ANSWER-ONE"), "t2 never completed")
	r = fathom(t, cleanEnv(), "session", "send", "--addr", p.url, "--token", tok, "--command-id", "c-1", "t2", "in French")
	var ack map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &ack); err != nil || r.code != 0 || ack["duplicate"] != false || ack["command_id"] != "c-1" {
		t.Fatalf("send --addr: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	testenv.Eventually(t, 20*time.Second, completedWith("REPONSE-DEUX (after ANSWER-ONE)"), "t2's follow-up never completed")
	r = fathom(t, cleanEnv(), "session", "send", "--addr", p.url, "--token", tok, "--command-id", "c-1", "t2", "in French")
	if err := json.Unmarshal([]byte(r.stdout), &ack); err != nil || r.code != 0 || ack["duplicate"] != true {
		t.Fatalf("retried send --addr: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	p.stop(t)
}
