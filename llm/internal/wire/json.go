package wire

import (
	"bytes"
	"encoding/json"
	"sync"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// AppendString appends s to b as a JSON string, escaped as encoding/json escapes it with
// HTML escaping off: quote, backslash and control characters, U+2028 and U+2029, and
// invalid UTF-8 as U+FFFD. It lets a client write a request body without reflection.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs a look: ASCII text without quotes,
		// backslashes or control characters, most of a conversation, is copied in runs.
		for i+8 <= len(s) && plain8(s[i:i+8]) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// plain8 reports whether none of the 8 bytes of s is a control character, a quote, a
// backslash or non-ASCII (the usual SWAR tests: a byte below n sets its high bit in
// x-n*0x01… where x's own high bit is clear; a zero byte after XOR marks an equal one).
func plain8(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	_ = s[7] // one bounds check
	x := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	q := x ^ ('"' * ones)
	bs := x ^ ('\\' * ones)
	special := (x - 0x20*ones) | (q - ones) | (bs - ones)
	return (special|x)&highs == 0
}

// compacted remembers AppendCompact's recent results by input: a tool's parameters
// schema goes out unchanged on every call of a session, and validating it again each
// time was a tenth of encoding a request. The map is emptied when its entries exceed
// maxCompacted bytes.
var compacted struct {
	sync.RWMutex
	m     map[string][]byte
	bytes int
}

const (
	maxCompacted      = 1 << 20
	maxCompactedEntry = 64 << 10
)

// AppendCompact appends the JSON value raw to b without insignificant space; ok is
// false (and b unchanged) when raw is not valid JSON.
func AppendCompact(b []byte, raw []byte) ([]byte, bool) {
	compacted.RLock()
	c, ok := compacted.m[string(raw)]
	compacted.RUnlock()
	if ok {
		return append(b, c...), true
	}
	n := len(b)
	if b, ok = appendCompact(b, raw); ok && len(raw) <= maxCompactedEntry {
		out := bytes.Clone(b[n:])
		compacted.Lock()
		if compacted.m == nil || compacted.bytes+len(raw)+len(out) > maxCompacted {
			compacted.m, compacted.bytes = map[string][]byte{}, 0
		}
		compacted.m[string(raw)] = out
		compacted.bytes += len(raw) + len(out)
		compacted.Unlock()
	}
	return b, ok
}

// appendCompact is AppendCompact without the memory.
func appendCompact(b []byte, raw []byte) ([]byte, bool) {
	if !json.Valid(raw) {
		return b, false
	}
	inString, escaped := false, false
	for _, c := range raw {
		if inString {
			b = append(b, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			inString = true
		}
		b = append(b, c)
	}
	return b, true
}
