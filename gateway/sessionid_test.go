package gateway_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestSessionIDUnicodeRules: a session id with a Unicode format or bidi character (Cf),
// a control character (Cc), a line or paragraph separator (Zl, Zp), or one that is not in
// NFC is refused with 400 invalid_argument naming the rule, over HTTP (start, fork's
// new_session_id, and every route that addresses a session) and over the WebSocket;
// nothing is started.
func TestSessionIDUnicodeRules(t *testing.T) {
	t.Parallel()
	g := startFake(t, gwOpts{})
	for _, tc := range []struct {
		name, id, rule string
	}{
		{"bidi override", "\u202eevil", "U+202E, a format character (Unicode category Cf"},
		{"zero width space", "a\u200bb", "U+200B, a format character (Unicode category Cf"},
		{"control", "a\x07b", "U+0007, a control character (Unicode category Cc)"},
		{"line separator", "a\u2028b", "U+2028, a line separator (Unicode category Zl)"},
		{"paragraph separator", "a\u2029b", "U+2029, a paragraph separator (Unicode category Zp)"},
		{"not NFC", "cafe\u0301", "not in Unicode normalization form NFC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"goal": "write a haiku", "session_id": tc.id})
			status, out := call(t, g.srv, "POST", "/v1/sessions", token, body)
			if status != 400 || errCode(out) != "invalid_argument" || !strings.Contains(errMessage(out), tc.rule) {
				t.Fatalf("start %q = %d %v, want 400 invalid_argument naming %q", tc.id, status, out, tc.rule)
			}
			path := "/v1/sessions/" + url.PathEscape(tc.id)
			for _, p := range []string{path, path + "/timeline", path + "/events"} {
				if status, out := call(t, g.srv, "GET", p, token, nil); status != 400 || !strings.Contains(errMessage(out), tc.rule) {
					t.Fatalf("GET %s = %d %v, want 400 naming %q", p, status, out, tc.rule)
				}
			}
			fork, _ := json.Marshal(map[string]any{"step_index": 0, "new_session_id": tc.id})
			if status, out := call(t, g.srv, "POST", "/v1/sessions/src/fork", token, fork); status != 400 ||
				!strings.Contains(errMessage(out), "new_session_id") || !strings.Contains(errMessage(out), tc.rule) {
				t.Fatalf("fork to %q = %d %v, want 400 naming new_session_id and %q", tc.id, status, out, tc.rule)
			}
			c := g.mustDial(token)
			c.send(map[string]any{"op": "start", "id": 1, "goal": "write a haiku", "session_id": tc.id})
			if f := c.next("error", 5*time.Second); f["code"] != "invalid_argument" || !strings.Contains(f["message"].(string), tc.rule) {
				t.Fatalf("ws start %q: %v", tc.id, f)
			}
			if n := len(g.journal(tc.id)); n != 0 {
				t.Fatalf("session %q has %d events", tc.id, n)
			}
		})
	}
	// The NFC form of the same name is a fine id.
	body, _ := json.Marshal(map[string]any{"goal": "write a haiku", "session_id": "caf\u00e9"})
	if status, out := call(t, g.srv, "POST", "/v1/sessions", token, body); status != 201 {
		t.Fatalf("start café (NFC) = %d %v", status, out)
	}
}

func errMessage(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["message"].(string)
	return s
}
