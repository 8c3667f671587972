package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// integerKeys walks a JSON answer and calls check with the path and value of every key
// that holds a 64-bit integer of the protocol: seq, *_seq, *_unix_nano, *_ms, *_tokens
// and size.
func integerKeys(path string, v any, check func(path string, v any)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			p := path + "." + k
			if k == "seq" || k == "size" || strings.HasSuffix(k, "_seq") || strings.HasSuffix(k, "_unix_nano") ||
				strings.HasSuffix(k, "_ms") || strings.HasSuffix(k, "_tokens") {
				check(p, x)
				continue
			}
			integerKeys(p, x, check)
		}
	case []any:
		for _, x := range v {
			integerKeys(path+"[]", x, check)
		}
	}
}

// checkNumbers fails unless answer holds at least one protocol integer and renders every
// one of them as a JSON number.
func checkNumbers(t *testing.T, name string, answer any) {
	t.Helper()
	n, bad := 0, 0
	integerKeys(name, answer, func(path string, v any) {
		n++
		if _, ok := v.(float64); !ok {
			if bad++; bad <= 3 {
				t.Errorf("%s is %#v, want a JSON number", path, v)
			}
		}
	})
	if n == 0 {
		b, _ := json.Marshal(answer)
		t.Errorf("%s: no seq in the answer %s", name, b)
	}
}

// TestEveryAnswerRendersIntegersAsNumbers: one JSON dialect for every answer of the
// gateway. The acks of every WebSocket operation and the HTTP answers render seq (and
// every other 64-bit integer: *_seq, *_unix_nano) as JSON numbers, as event frames do —
// whether the answer is built by the gateway (start, subscribe) or is a grain's
// protobuf answer (state, timeline, state_at, resume, clear_breakpoints).
func TestEveryAnswerRendersIntegersAsNumbers(t *testing.T) {
	g := startGW(t, gwOpts{delayMS: 150})
	c := g.mustDial(token)
	const id = "dialect-1"
	acks := map[string]map[string]any{}
	ack := func(f map[string]any) {
		if f["op"] == "error" {
			t.Fatalf("error frame %v", f)
		}
		if f["op"] == "ack" {
			acks[f["id"].(string)] = f
		}
	}
	// waitFor reads frames, keeping the acks, until an event of type typ (or the ack of
	// that id) arrives.
	waitFor := func(typ string) map[string]any {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			f := c.read(time.Until(deadline))
			ack(f)
			if f["type"] == typ || (f["op"] == "ack" && f["id"] == typ) {
				return f
			}
		}
	}
	c.send(map[string]any{"op": "start", "id": "start", "session_id": id, "goal": "write a haiku"})
	waitFor("start")
	c.send(map[string]any{"op": "subscribe", "id": "sub", "session_id": id, "deltas": false})
	waitFor("sub")
	c.send(map[string]any{"op": "set_breakpoint", "id": "set_breakpoint", "session_id": id, "position": "before", "step_type": "write"})
	waitFor("interrupt_triggered")
	for _, op := range []map[string]any{
		{"op": "state", "id": "state", "session_id": id},
		{"op": "timeline", "id": "timeline", "session_id": id},
		{"op": "state_at", "id": "state_at", "session_id": id, "step_index": 1},
		{"op": "clear_breakpoints", "id": "clear_breakpoints", "session_id": id},
		{"op": "resume", "id": "resume", "session_id": id},
	} {
		c.send(op)
		waitFor(op["id"].(string))
	}
	waitFor("session_completed")
	c.send(map[string]any{"op": "unsubscribe", "id": "unsubscribe", "session_id": id})
	waitFor("unsubscribe")
	for _, name := range []string{"sub", "start", "set_breakpoint", "state", "timeline", "state_at", "clear_breakpoints", "resume", "unsubscribe"} {
		if acks[name] == nil {
			t.Fatalf("no ack for %s", name)
		}
		checkNumbers(t, "ws "+name, acks[name]["result"])
	}

	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/sessions/" + id, ""},
		{"GET", "/v1/sessions/" + id + "/timeline", ""},
		{"GET", "/v1/sessions/" + id + "/state?at=1", ""},
		{"POST", "/v1/sessions/" + id + "/fork", `{"step_index":1,"new_session_id":"dialect-fork"}`},
		{"POST", "/v1/sessions", `{"goal":"write a haiku","session_id":"dialect-2"}`},
	} {
		var body []byte
		if r.body != "" {
			body = []byte(r.body)
		}
		status, out := call(t, g.srv, r.method, r.path, token, body)
		if status/100 != 2 {
			t.Fatalf("%s %s = %d %v", r.method, r.path, status, out)
		}
		checkNumbers(t, "http "+r.method+" "+r.path, out)
	}
}
