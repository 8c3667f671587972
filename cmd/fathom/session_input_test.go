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

// humanModel serves a model whose plan starts with a human_input step "ask" (an object
// {n: integer >= 1}) followed by a research step.
func humanModel(t *testing.T) []string {
	t.Helper()
	script, err := mock.ParseScript([]byte(`{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"ask\",\"type\":\"human_input\",\"description\":\"How many copies?\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":1}},\"required\":[\"n\"]}},{\"id\":\"use\",\"type\":\"custom\",\"description\":\"print them\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","response":"printed (answer #{{.N}})"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	t.Cleanup(model.Close)
	return cleanEnv("OPENAI_BASE_URL="+model.URL+"/v1", "OPENAI_API_KEY=k", "FATHOM_MODEL=mock-model")
}

func eventTypes(evs []map[string]any) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = fmt.Sprint(ev["type"])
	}
	return out
}

// TestSessionInputAndFork: run stops (exit 3) when the session waits for a human;
// `session input` answers it on an in-process node over the data dir (a bad answer is
// refused with the schema's complaint) and runs the session to its end; `session fork`
// branches it after its first step. Both also work through a node (--addr).
func TestSessionInputAndFork(t *testing.T) {
	t.Parallel()
	env := humanModel(t)
	data := filepath.Join(t.TempDir(), "data")
	r := fathom(t, env, "run", "--data-dir", data, "--json", "--session-id", "h1", "print copies")
	evs := jsonEvents(t, r.stdout)
	if r.code != 3 || evs[len(evs)-1]["type"] != "hitl_requested" || !strings.Contains(r.stderr, "fathom session input --data-dir "+data+" h1 ask JSON") {
		t.Fatalf("run: exit %d, events %v\n%s", r.code, eventTypes(evs), r.stderr)
	}
	text := fathom(t, env, "session", "timeline", "--data-dir", data, "h1")
	if !strings.Contains(text.stdout, "? step ask asks a human: How many copies?") || !strings.Contains(text.stdout, "answer with: fathom session input h1 ask JSON") {
		t.Fatalf("timeline text:\n%s", text.stdout)
	}

	bad := fathom(t, env, "session", "input", "--data-dir", data, "h1", "ask", `{"n":0}`)
	if bad.code != 1 || !strings.Contains(bad.stderr, "invalid_argument") || !strings.Contains(bad.stderr, "/n") {
		t.Fatalf("bad input: exit %d\n%s%s", bad.code, bad.stdout, bad.stderr)
	}
	good := fathom(t, env, "session", "input", "--data-dir", data, "h1", "ask", `{"n": 3}`)
	if good.code != 0 || !strings.Contains(good.stdout, `✓ human answered ask (step ask): {"n":3}`) || !strings.Contains(good.stdout, "✓ session completed") {
		t.Fatalf("input: exit %d\n%s%s", good.code, good.stdout, good.stderr)
	}

	fork := fathom(t, env, "session", "fork", "--data-dir", data, "--json", "--at", "1", "--new-id", "h1-fork", "h1")
	var fevs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(fork.stdout), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("fork printed %q: %v\n%s", line, err, fork.stderr)
		}
		fevs = append(fevs, ev)
	}
	if fork.code != 0 || fevs[0]["type"] != "session_forked" || fevs[0]["source_session_id"] != "h1" || fevs[len(fevs)-1]["type"] != "session_completed" {
		t.Fatalf("fork: exit %d, events %v\n%s", fork.code, eventTypes(fevs), fork.stderr)
	}
	if res := fathom(t, env, "session", "fork", "--data-dir", data, "h1"); res.code != 2 {
		t.Fatalf("fork without --at: exit %d", res.code)
	}
	if res := fathom(t, env, "session", "input", "--data-dir", data, "h1", "ask"); res.code != 2 {
		t.Fatalf("input without JSON: exit %d", res.code)
	}

	// Through a node.
	const tok = "hitl-token"
	p := startNode(t, env, "--data-dir", filepath.Join(t.TempDir(), "node"), "--token", tok)
	if code, body := httpJSON(t, "POST", p.url+"/v1/sessions", tok, map[string]any{"goal": "print copies", "session_id": "h2"}); code != 201 {
		t.Fatalf("start: %d %v", code, body)
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		_, st := httpJSON(t, "GET", p.url+"/v1/sessions/h2", tok, nil)
		state, _ := st["state"].(map[string]any)
		return state["status"] == "SESSION_STATUS_AWAITING_HUMAN"
	}, "h2 never waited for a human")
	res := fathom(t, cleanEnv(), "session", "input", "--addr", p.url, "--token", tok, "h2", "ask", `{"n":0}`)
	if res.code != 1 || !strings.Contains(res.stderr, "400") || !strings.Contains(res.stderr, "/n") {
		t.Fatalf("bad input --addr: exit %d %s", res.code, res.stderr)
	}
	res = fathom(t, cleanEnv(), "session", "input", "--addr", p.url, "--token", tok, "h2", "ask", `{"n":2}`)
	var ack map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &ack); err != nil || res.code != 0 || ack["duplicate"] != false {
		t.Fatalf("input --addr: exit %d %v\n%s%s", res.code, err, res.stdout, res.stderr)
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		_, st := httpJSON(t, "GET", p.url+"/v1/sessions/h2", tok, nil)
		state, _ := st["state"].(map[string]any)
		return state["status"] == "SESSION_STATUS_COMPLETED"
	}, "h2 never completed")
	res = fathom(t, cleanEnv(), "session", "fork", "--addr", p.url, "--token", tok, "--at", "1", "h2")
	if err := json.Unmarshal([]byte(res.stdout), &ack); err != nil || res.code != 0 || ack["source_session_id"] != "h2" || ack["session_id"] == "" {
		t.Fatalf("fork --addr: exit %d %v\n%s%s", res.code, err, res.stdout, res.stderr)
	}
	fid := fmt.Sprint(ack["session_id"])
	testenv.Eventually(t, 20*time.Second, func() bool {
		_, st := httpJSON(t, "GET", p.url+"/v1/sessions/"+fid, tok, nil)
		state, _ := st["state"].(map[string]any)
		return state["status"] == "SESSION_STATUS_COMPLETED"
	}, "the fork %s never completed", fid)
	p.stop(t)
}
