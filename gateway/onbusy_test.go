package gateway_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestHTTPSendOnBusy: double texting through POST /v1/sessions/{id}/messages. While a
// turn runs, a send is refused by default (409, as before) and an unknown on_busy is
// 400; on_busy "queue" records message_queued and the message runs as the next turn
// after the current one completes with its own result; on_busy "interrupt" ends the
// current turn at its next step boundary ("Interrupted by a new message ...") and runs
// the message as the next turn.
func TestHTTPSendOnBusy(t *testing.T) {
	g := startGW(t, gwOpts{delayMS: 150}) // every model answer takes 150ms: the turn runs for seconds
	start := func(id string) {
		t.Helper()
		if status, _, body := fetch(t, g, "POST", "/v1/sessions", token, `{"goal":"write a haiku","session_id":"`+id+`"}`); status != 201 {
			t.Fatalf("start %s = %d %s", id, status, body)
		}
	}
	send := func(id, body string) (int, string) {
		t.Helper()
		status, _, out := fetch(t, g, "POST", "/v1/sessions/"+id+"/messages", token, body)
		return status, string(out)
	}
	// turn2 waits for the session's second turn to complete and returns its events.
	turn2 := func(id string) string {
		t.Helper()
		testenv.Eventually(t, 60*time.Second, func() bool {
			status, _, body := fetch(t, g, "GET", "/v1/sessions/"+id, readToken, "")
			return status == 200 && bytes.Contains(body, []byte(`"turn":2`)) && bytes.Contains(body, []byte(`"status":"SESSION_STATUS_COMPLETED"`))
		}, "session %s never completed a second turn", id)
		_, _, evs := fetch(t, g, "GET", "/v1/sessions/"+id+"/events?follow=false&deltas=false", readToken, "")
		return string(evs)
	}
	// inOrder checks that each of subs follows the previous one in s.
	inOrder := func(s string, subs ...string) {
		t.Helper()
		at := 0
		for _, sub := range subs {
			i := strings.Index(s[at:], sub)
			if i < 0 {
				t.Fatalf("%q missing (or out of order) after offset %d in the events:\n%.3000s", sub, at, s)
			}
			at += i + len(sub)
		}
	}

	start("busy-q")
	if status, body := send("busy-q", `{"content":"too early"}`); status != 409 || !strings.Contains(body, "on_busy") {
		t.Fatalf("send to a running session = %d %s, want 409", status, body)
	}
	if status, body := send("busy-q", `{"content":"x","on_busy":"later"}`); status != 400 {
		t.Fatalf("send with on_busy later = %d %s, want 400", status, body)
	}
	if status, body := send("busy-q", `{"content":"and a limerick?","on_busy":"queue"}`); status != 202 {
		t.Fatalf("queued send = %d %s", status, body)
	}
	evs := turn2("busy-q")
	inOrder(evs, `"message_queued"`, `"and a limerick?"`, `"session_completed"`, `"message_received"`, `"and a limerick?"`, `"from_queue":true`, `"session_completed"`)
	if strings.Contains(evs, "Interrupted by a new message") {
		t.Fatalf("a queued message interrupted the turn:\n%.3000s", evs)
	}
	if strings.Count(evs, `"step_completed"`) < 2 {
		t.Fatalf("the first turn did not run its steps before the queued message:\n%.3000s", evs)
	}

	start("busy-i")
	if status, body := send("busy-i", `{"content":"stop, just say hi","on_busy":"interrupt"}`); status != 202 {
		t.Fatalf("interrupting send = %d %s", status, body)
	}
	evs = turn2("busy-i")
	inOrder(evs, `"message_queued"`, `"Interrupted by a new message`, `"message_received"`, `"stop, just say hi"`, `"from_queue":true`, `"session_completed"`)
}
