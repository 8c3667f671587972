package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// encodingJSON is encoding/json's encoding of s with HTML escaping off.
func encodingJSON(t testing.TB, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// TestAppendStringMatchesEncodingJSON: AppendString writes what encoding/json writes.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uo\te`, "tab\tnl\ncr\r\b\f\x00\x1f\x7f", "<html> & co", "é ü 日本 🙂",
		"bad \xff utf8 \xc3", "line\u2028para\u2029end", "\u2027\u202a"} {
		if got, want := AppendString(nil, s), encodingJSON(t, s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
	// Each byte that needs a look, at every offset of the 8-byte runs, among plain text.
	for _, special := range []string{"\"", "\\", "\x00", "\n", "\x1f", " ", "\x7f", "é", "\xff", "\u2028", "~"} {
		for at := range 20 {
			s := strings.Repeat("abcdefgh", 3)[:at] + special + strings.Repeat("ijklmnop", 3)[at:]
			if got, want := AppendString(nil, s), encodingJSON(t, s); !bytes.Equal(got, want) {
				t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
			}
		}
	}
}

// FuzzAppendString: for any input, AppendString agrees with encoding/json.
func FuzzAppendString(f *testing.F) {
	f.Add("a\"b\\c\n\x01\u2028\xff")
	f.Add("plain text, sixteen+ bytes long\x1f and then \"more\" of it é")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := AppendString(nil, s), encodingJSON(t, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}

// TestAppendCompactMatchesCompact: AppendCompact writes what json.Compact writes and
// refuses what is not JSON.
func TestAppendCompactMatchesCompact(t *testing.T) {
	for _, raw := range []string{`{"a": [1, 2 ,3],` + "\n\t" + `"b" : "x \" y\\", "c":{ }}`, ` "s p a c e" `, `[ ]`, `{"k":"\\"}`} {
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(raw)); err != nil {
			t.Fatal(err)
		}
		for pass := range 2 { // the second from memory
			got, ok := AppendCompact([]byte("x"), []byte(raw))
			if !ok || string(got) != "x"+want.String() {
				t.Errorf("pass %d: AppendCompact(%q) = %q, %v; want %q", pass, raw, got, ok, want.String())
			}
		}
	}
	for _, bad := range []string{``, `{`, `{"a":}`, `oops`, `{"a":}`} {
		if got, ok := AppendCompact([]byte("x"), []byte(bad)); ok || string(got) != "x" {
			t.Errorf("AppendCompact(%q) = %q, %v; want a refusal", bad, got, ok)
		}
	}
	// The memory stays bounded: entries past maxCompacted bytes start it afresh.
	for i := range 3 * maxCompacted / 1000 {
		raw := fmt.Sprintf(`{"n":%d,"pad":"%0900d"}`, i, 0)
		if got, ok := AppendCompact(nil, []byte(raw)); !ok || string(got) != raw {
			t.Fatalf("AppendCompact(%q) = %q, %v", raw, got, ok)
		}
	}
	compacted.RLock()
	defer compacted.RUnlock()
	if compacted.bytes > maxCompacted {
		t.Fatalf("AppendCompact keeps %d bytes, more than %d", compacted.bytes, maxCompacted)
	}
}

// BenchmarkAppendString appends a conversation's worth of plain text with a few escapes.
func BenchmarkAppendString(b *testing.B) {
	s := strings.Repeat("You are a careful research agent. ", 40) + "line\n\"quoted\"\tend é"
	buf := make([]byte, 0, 4*len(s))
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = AppendString(buf[:0], s)
	}
}
