package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// threadScript answers a session with one orchestrator step, then three follow-ups. Each
// follow-up rule matches only when the conversation holds the earlier turns' answers
// (context_match), so a model that did not see them answers the default instead.
func threadScript() *mock.Script {
	const follow = `FATHOM-ROLE: orchestrator[\s\S]*FATHOM-FOLLOW-UP`
	return &mock.Script{Rules: []mock.Rule{
		{SystemMatch: follow, Match: `^second question`, ContextMatch: `ANSWER-ONE`, Response: `ANSWER-TWO (after {{find "(ANSWER-ONE)" .All}})`},
		{SystemMatch: follow, Match: `^third question`, ContextMatch: `(?s)ANSWER-ONE.*second question.*ANSWER-TWO`,
			Response: `{"steps":[{"id":"deeper","type":"custom","description":"dig deeper"}]}`},
		{SystemMatch: follow, Match: `^fourth question`, ContextMatch: `(?s)ANSWER-TWO.*ANSWER-THREE`, Response: `ANSWER-FOUR`},
		{SystemMatch: `FATHOM-ROLE: orchestrator`, Response: `{"steps":[{"id":"a","type":"custom","description":"answer the goal"}]}`},
		{SystemMatch: `FATHOM-ROLE: executor`, Match: `Step: answer the goal`, Response: `ANSWER-ONE`},
		{SystemMatch: `FATHOM-ROLE: executor`, Match: `Step: dig deeper`, ContextMatch: `(?s)ANSWER-ONE.*ANSWER-TWO.*third question`, Response: `ANSWER-THREE`},
	}, Default: "UNSCRIPTED"}
}

func postJSON(t *testing.T, url, tok string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func getJSON(t *testing.T, url, tok string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestFollowUpMessagesThread: a session completes, then takes three follow-up messages
// (WS op send twice, POST /v1/sessions/{id}/messages once). Each records
// message_received {content, tokens} and ends in session_completed again; the model sees
// every earlier turn (its scripted answers require them); turn 2 is answered directly,
// turn 3 plans and runs a step. A retried send (same command_id) is a duplicate. State
// at a turn-1 seq shows turn 1; a fork from the end of turn 3's step completes turn 3 on
// its own and takes a follow-up of its own.
func TestFollowUpMessagesThread(t *testing.T) {
	g := startGW(t, gwOpts{script: threadScript()})
	c := g.mustDial(token)
	const id = "thread-1"
	c.send(map[string]any{"op": "start", "session_id": id, "goal": "answer me", "id": "st"})
	c.next("ack", 10*time.Second)
	c.send(map[string]any{"op": "subscribe", "session_id": id, "id": "sub"})
	c.next("ack", 10*time.Second)
	evs := followTurn(t, c, id)
	if r := evs[len(evs)-1]["result"]; r != "ANSWER-ONE" {
		t.Fatalf("turn 1 result %v", r)
	}
	turn1End := seqOf(evs[len(evs)-1])

	// Turn 2 over WS: answered directly.
	c.send(map[string]any{"op": "send", "session_id": id, "content": "second question", "command_id": "m-2", "id": "s2"})
	evs = followTurn(t, c, id)
	checkTurn(t, evs, "second question", "ANSWER-TWO (after ANSWER-ONE)")
	// The same command again is a duplicate: nothing new is recorded.
	c.send(map[string]any{"op": "send", "session_id": id, "content": "second question", "command_id": "m-2", "id": "s2b"})
	// A send's ack may come after its turn's events (they go out on another path): each
	// request below takes its own ack (ackOf).
	ack := ackOf(c, "s2b")
	if res, _ := ack["result"].(map[string]any); res["duplicate"] != true {
		t.Fatalf("retried send: %v", ack)
	}

	// Turn 3 over WS: the orchestrator plans a step, which runs.
	c.send(map[string]any{"op": "send", "session_id": id, "content": "third question", "id": "s3"})
	evs = followTurn(t, c, id)
	checkTurn(t, evs, "third question", "ANSWER-THREE")
	var stepEnd uint64
	for _, f := range evs {
		if f["type"] == "plan_created" {
			steps, _ := f["steps"].([]any)
			if len(steps) != 1 || steps[0].(map[string]any)["id"] != "t3-deeper" {
				t.Fatalf("turn 3 plan %v", f)
			}
		}
		if f["type"] == "step_completed" {
			stepEnd = seqOf(f)
		}
	}
	if stepEnd == 0 {
		t.Fatalf("turn 3 ran no step: %v", evs)
	}

	// Turn 4 over HTTP.
	status, body := postJSON(t, g.srv.URL+"/v1/sessions/"+id+"/messages", token, map[string]any{"content": "fourth question"})
	if status != http.StatusAccepted || body["seq"] == nil {
		t.Fatalf("POST messages: %d %v", status, body)
	}
	evs = followTurn(t, c, id)
	checkTurn(t, evs, "fourth question", "ANSWER-FOUR")

	// Time travel into turn 1: the state after its session_completed.
	status, body = getJSON(t, fmt.Sprintf("%s/v1/sessions/%s/state?seq=%d", g.srv.URL, id, turn1End), token)
	st, _ := body["state"].(map[string]any)
	if status != http.StatusOK || st["result"] != "ANSWER-ONE" || st["status"] != "SESSION_STATUS_COMPLETED" ||
		st["turn"] != float64(0) || len(st["thread"].([]any)) != 0 {
		t.Fatalf("state at turn-1 seq %d: %d %v", turn1End, status, body)
	}
	c.send(map[string]any{"op": "state_at", "session_id": id, "seq": turn1End - 1, "id": "sa"})
	ack = ackOf(c, "sa")
	res, _ := ack["result"].(map[string]any)
	if st, _ := res["state"].(map[string]any); st == nil || st["status"] == "SESSION_STATUS_COMPLETED" || st["steps"] == nil {
		t.Fatalf("state_at over WS at seq %d: %v", turn1End-1, ack)
	}

	// Fork from turn 3 (after its step ended): the fork completes turn 3 by itself, with
	// the turns before in its history, and takes a follow-up of its own.
	c.send(map[string]any{"op": "fork", "session_id": id, "seq": stepEnd, "new_session_id": "thread-fork", "id": "fk"})
	ack = ackOf(c, "fk")
	if res, _ := ack["result"].(map[string]any); res["session_id"] != "thread-fork" || res["source_seq"] != float64(stepEnd) {
		t.Fatalf("fork ack %v", ack)
	}
	waitStatus(t, g, "thread-fork", "SESSION_STATUS_COMPLETED", "ANSWER-THREE")
	status, body = postJSON(t, g.srv.URL+"/v1/sessions/thread-fork/messages", token, map[string]any{"content": "fourth question"})
	if status != http.StatusAccepted {
		t.Fatalf("send to the fork: %d %v", status, body)
	}
	waitStatus(t, g, "thread-fork", "SESSION_STATUS_COMPLETED", "ANSWER-FOUR")
	// A seq inside a step is no fork point.
	c.send(map[string]any{"op": "fork", "session_id": id, "seq": stepEnd - 1, "new_session_id": "thread-fork-2", "id": "fk2"})
	if f := c.next("error", 10*time.Second); f["code"] != "failed_precondition" || !strings.Contains(fmt.Sprint(f["message"]), "not a point a fork can go on from") {
		t.Fatalf("fork inside a step: %v", f)
	}
}

// checkTurn checks one turn's events: message_received first, with the content and a
// token count, and session_completed last, with result.
func checkTurn(t *testing.T, evs []map[string]any, content, result string) {
	t.Helper()
	var got map[string]any
	for _, f := range evs {
		if f["type"] == "message_received" {
			got = f
			break
		}
	}
	if got == nil || got["content"] != content {
		t.Fatalf("no message_received %q in %v", content, evs)
	}
	if n, _ := got["tokens"].(float64); n <= 0 {
		t.Fatalf("message_received without tokens: %v", got)
	}
	if r := evs[len(evs)-1]["result"]; r != result {
		t.Fatalf("turn after %q ended with %v, want %q", content, r, result)
	}
}

// waitStatus polls GET /v1/sessions/{id} until the session has status and result.
func waitStatus(t *testing.T, g *gw, id, status, result string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, body := getJSON(t, g.srv.URL+"/v1/sessions/"+id, token)
		st, _ := body["state"].(map[string]any)
		return st["status"] == status && st["result"] == result
	}, "session %s never reached %s with result %q", id, status, result)
}

// ackOf reads c's frames until the ack of request id, skipping the acks of earlier
// requests and events.
func ackOf(c *wsc, id string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ack := c.next("ack", time.Until(deadline)); ack["id"] == id {
			return ack
		}
	}
}

// followTurn reads the frames of session id until its session_completed and returns its
// events; acks (of the ops that started the turn) and deltas are skipped, an error frame
// or a failed session fails the test.
func followTurn(t *testing.T, c *wsc, id string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for {
		f := c.read(time.Until(deadline))
		switch f["op"] {
		case "ack", "delta":
			continue
		case "event":
		default:
			t.Fatalf("unexpected frame while following %s: %v", id, f)
		}
		if f["session_id"] != id {
			t.Fatalf("event of %v on the subscription to %s", f["session_id"], id)
		}
		evs = append(evs, f)
		switch f["type"] {
		case "session_completed":
			return evs
		case "session_failed", "session_cancelled":
			t.Fatalf("session %s ended: %v", id, f)
		}
	}
}

// TestSendRefusals: a send to a running session (waiting for a human) is refused with
// 409 failed_precondition and a clear message, as is a send to a cancelled session; an
// unknown session answers the same not_found as other ops; empty and oversize content
// are 400 invalid_argument. Nothing is recorded for a refused send.
func TestSendRefusals(t *testing.T) {
	t.Parallel()
	g := startFake(t, gwOpts{})
	const id = "refuse-1"
	if status, body := postJSON(t, g.srv.URL+"/v1/sessions", token, map[string]any{"session_id": id, "goal": "pick a colour"}); status != http.StatusCreated {
		t.Fatalf("start: %d %v", status, body)
	}
	// The model's plan: one step that asks a human.
	if err := g.fake.answer(id, `{"steps":[{"id":"ask","type":"human_input","description":"which colour?"}]}`); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		_, body := getJSON(t, g.srv.URL+"/v1/sessions/"+id, token)
		st, _ := body["state"].(map[string]any)
		return st["status"] == "SESSION_STATUS_AWAITING_HUMAN"
	}, "session %s never waited for a human", id)
	before := len(g.journal(id))
	errOf := func(body map[string]any) (string, string) {
		e, _ := body["error"].(map[string]any)
		return fmt.Sprint(e["code"]), fmt.Sprint(e["message"])
	}
	url := g.srv.URL + "/v1/sessions/" + id + "/messages"
	for _, c := range []struct {
		name, url, content string
		status             int
		code, msg          string
	}{
		{"running", url, "hello", http.StatusConflict, "failed_precondition", "is running (SESSION_STATUS_AWAITING_HUMAN); send when it has completed"},
		{"empty", url, "   ", http.StatusBadRequest, "invalid_argument", "content is required"},
		{"oversize", url, strings.Repeat("x", 64<<10+1), http.StatusBadRequest, "invalid_argument", "the limit is 65536"},
		{"unknown", g.srv.URL + "/v1/sessions/no-such-session/messages", "hello", http.StatusNotFound, "not_found", `session "no-such-session" not found`},
	} {
		status, body := postJSON(t, c.url, token, map[string]any{"content": c.content})
		code, msg := errOf(body)
		if status != c.status || code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: %d %s %q; want %d %s containing %q", c.name, status, code, msg, c.status, c.code, c.msg)
		}
	}
	// The same refusals over WS, with the op's error frame.
	ws := g.mustDial(token)
	ws.send(map[string]any{"op": "send", "session_id": id, "content": "hello", "id": "w1"})
	if f := ws.next("error", 10*time.Second); f["code"] != "failed_precondition" || f["id"] != "w1" {
		t.Fatalf("WS send to a running session: %v", f)
	}
	ws.send(map[string]any{"op": "send", "session_id": "no-such-session", "content": "hello", "id": "w2"})
	if f := ws.next("error", 10*time.Second); f["code"] != "not_found" {
		t.Fatalf("WS send to an unknown session: %v", f)
	}
	if after := len(g.journal(id)); after != before {
		t.Fatalf("refused sends recorded %d events", after-before)
	}
	if status, body := postJSON(t, g.srv.URL+"/v1/sessions/"+id+"/cancel", token, map[string]any{}); status != http.StatusOK {
		t.Fatalf("cancel: %d %v", status, body)
	}
	status, body := postJSON(t, url, token, map[string]any{"content": "hello"})
	if code, msg := errOf(body); status != http.StatusConflict || code != "failed_precondition" || !strings.Contains(msg, "only a completed session takes a follow-up message") {
		t.Fatalf("send to a cancelled session: %d %v", status, body)
	}
}
