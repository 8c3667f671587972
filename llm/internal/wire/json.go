package wire

import (
	"encoding/json"
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

// AppendCompact appends the JSON value raw to b without insignificant space; ok is
// false (and b unchanged) when raw is not valid JSON.
func AppendCompact(b []byte, raw []byte) ([]byte, bool) {
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
