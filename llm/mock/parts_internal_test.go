package mock

import (
	"encoding/json"
	"testing"
)

// The plain-string shortcut decodes exactly what encoding/json decodes, and leaves to it
// every string it would change: escapes, invalid UTF-8.
func TestChatContentAgreesWithEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		`""`, `"hello"`, `"naïve — ünïcode ✓ 𝄞"`, `"tab\tand \"quotes\""`, `"\u00e9\n"`,
		"\"bad \xff utf-8\"", "\"half \xe2\x82 rune\"", `"back\\slash"`, `"</script>&"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		got, err := chatContent(json.RawMessage(raw))
		if err != nil || got != want {
			t.Errorf("chatContent(%q) = %q, %v; encoding/json gives %q", raw, got, err, want)
		}
	}
}

func FuzzChatContent(f *testing.F) {
	for _, s := range []string{"hello", "naïve", "a\"b", "\xff", "line\nbreak", `\u0041`} {
		b, _ := json.Marshal(s)
		f.Add(string(b))
		f.Add(`"` + s + `"`)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if len(raw) == 0 || raw[0] != '"' || !json.Valid([]byte(raw)) {
			return // chatContent sees only strings the request's decoding accepted
		}
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			return
		}
		if got, err := chatContent(json.RawMessage(raw)); err != nil || got != want {
			t.Fatalf("chatContent(%q) = %q, %v; encoding/json gives %q", raw, got, err, want)
		}
	})
}
