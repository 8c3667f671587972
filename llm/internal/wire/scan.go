package wire

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Scanner decodes the few fields a client reads from a JSON answer without reflection,
// for the common shape of the answer only: anything else (a key that differs from a
// known one only in case, a number that is not a plain integer, a value of an
// unexpected type, invalid JSON) marks it failed, and the caller decodes the document
// with encoding/json instead, which then has the final word, errors included. Whatever
// a Scanner that did not fail returns is what encoding/json would have decoded.
//
// The methods consume one value each; on a failed Scanner they do nothing.
type Scanner struct {
	data  []byte
	pos   int
	depth int
	ok    bool
}

// maxScanDepth bounds nesting; deeper documents are left to encoding/json.
const maxScanDepth = 512

// NewScanner returns a Scanner of data.
func NewScanner(data []byte) *Scanner { return &Scanner{data: data, ok: true} }

// Fail marks the scan failed.
func (s *Scanner) Fail() { s.ok = false }

// End reports whether the whole document was scanned without failing.
func (s *Scanner) End() bool {
	s.ws()
	return s.ok && s.pos == len(s.data)
}

func (s *Scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next value's first byte (0 at the end or once failed).
func (s *Scanner) peek() byte {
	s.ws()
	if !s.ok || s.pos >= len(s.data) {
		s.ok = false
		return 0
	}
	return s.data[s.pos]
}

// Null consumes a null and reports whether there was one.
func (s *Scanner) Null() bool {
	if s.peek() == 'n' {
		if bytes.HasPrefix(s.data[s.pos:], []byte("null")) {
			s.pos += 4
			return true
		}
		s.ok = false
	}
	return false
}

// Object reads an object (or null), calling field for each key: field must consume the
// value, with a method of s or with Skip. A key that is not plain ASCII fails the scan.
func (s *Scanner) Object(field func(key []byte)) {
	if s.Null() || !s.ok {
		return
	}
	if s.data[s.pos] != '{' || s.depth >= maxScanDepth {
		s.ok = false
		return
	}
	s.pos++
	s.depth++
	if s.peek() == '}' {
		s.pos++
		s.depth--
		return
	}
	for s.ok {
		if s.peek() != '"' {
			s.ok = false
			return
		}
		key, plain := s.stringToken()
		if !plain || !s.ok {
			s.ok = false
			return
		}
		if s.peek() != ':' {
			s.ok = false
			return
		}
		s.pos++
		field(key[1 : len(key)-1])
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			s.depth--
			return
		default:
			s.ok = false
		}
	}
}

// Array reads an array (or null), calling elem for each element; elem must consume it.
// It reports whether there was an array (encoding/json makes an empty slice of []).
func (s *Scanner) Array(elem func()) bool {
	if s.Null() || !s.ok {
		return false
	}
	if s.data[s.pos] != '[' || s.depth >= maxScanDepth {
		s.ok = false
		return false
	}
	s.pos++
	s.depth++
	if s.peek() == ']' {
		s.pos++
		s.depth--
		return true
	}
	for s.ok {
		elem()
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.depth--
			return true
		default:
			s.ok = false
		}
	}
	return false
}

// String reads a string; null leaves it "" (as encoding/json leaves a string unset).
func (s *Scanner) String() string {
	if s.Null() || !s.ok {
		return ""
	}
	if s.data[s.pos] != '"' {
		s.ok = false
		return ""
	}
	tok, plain := s.stringToken()
	if !s.ok {
		return ""
	}
	if plain {
		return string(tok[1 : len(tok)-1])
	}
	var v string // escapes or non-ASCII: encoding/json's own rules
	if json.Unmarshal(tok, &v) != nil {
		s.ok = false
	}
	return v
}

// stringToken consumes a string and returns it with its quotes; plain reports that it
// is ASCII without escapes (its bytes are its value). A control character fails the scan.
func (s *Scanner) stringToken() (tok []byte, plain bool) {
	start := s.pos
	s.pos++
	plain = true
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return s.data[start:s.pos], plain
		case c < 0x20:
			s.ok = false
			return nil, false
		case c == '\\':
			plain = false
			if s.pos+1 >= len(s.data) {
				s.ok = false
				return nil, false
			}
			switch s.data[s.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos += 2
			case 'u':
				if s.pos+6 > len(s.data) || !isHex4(s.data[s.pos+2:s.pos+6]) {
					s.ok = false
					return nil, false
				}
				s.pos += 6
			default:
				s.ok = false
				return nil, false
			}
		case c >= utf8.RuneSelf:
			plain = false
			s.pos++
		default:
			s.pos++
		}
	}
	s.ok = false
	return nil, false
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// Int reads an integer written as one (no fraction, no exponent) that fits an int64;
// null leaves it 0.
func (s *Scanner) Int() int64 {
	if s.Null() || !s.ok {
		return 0
	}
	neg := s.data[s.pos] == '-'
	if neg {
		s.pos++
	}
	start := s.pos
	var v int64
	for s.pos < len(s.data) && '0' <= s.data[s.pos] && s.data[s.pos] <= '9' {
		if v > (1<<63-1-9)/10 { // keep clear of overflow: longer numbers go to encoding/json
			s.ok = false
			return 0
		}
		v = v*10 + int64(s.data[s.pos]-'0')
		s.pos++
	}
	n := s.pos - start
	if n == 0 || (n > 1 && s.data[start] == '0') {
		s.ok = false
		return 0
	}
	if s.pos < len(s.data) {
		switch s.data[s.pos] {
		case '.', 'e', 'E':
			s.ok = false
			return 0
		}
	}
	if neg {
		return -v
	}
	return v
}

// Skip consumes any value, checking that it is JSON.
func (s *Scanner) Skip() {
	switch c := s.peek(); {
	case c == '{':
		s.Object(func([]byte) { s.Skip() })
	case c == '[':
		s.Array(s.Skip)
	case c == '"':
		s.stringToken()
	case c == 't':
		s.literal("true")
	case c == 'f':
		s.literal("false")
	case c == 'n':
		s.Null()
	case c == '-' || '0' <= c && c <= '9':
		s.number()
	default:
		s.ok = false
	}
}

func (s *Scanner) literal(lit string) {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		s.ok = false
		return
	}
	s.pos += len(lit)
}

// number consumes a number of JSON's grammar.
func (s *Scanner) number() {
	d := s.data
	if s.pos < len(d) && d[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(d) && d[s.pos] == '0':
		s.pos++
	case s.pos < len(d) && '1' <= d[s.pos] && d[s.pos] <= '9':
		s.digits()
	default:
		s.ok = false
		return
	}
	if s.pos < len(d) && d[s.pos] == '.' {
		s.pos++
		if s.digits() == 0 {
			s.ok = false
			return
		}
	}
	if s.pos < len(d) && (d[s.pos] == 'e' || d[s.pos] == 'E') {
		s.pos++
		if s.pos < len(d) && (d[s.pos] == '+' || d[s.pos] == '-') {
			s.pos++
		}
		if s.digits() == 0 {
			s.ok = false
		}
	}
}

func (s *Scanner) digits() int {
	start := s.pos
	for s.pos < len(s.data) && '0' <= s.data[s.pos] && s.data[s.pos] <= '9' {
		s.pos++
	}
	return s.pos - start
}

// Once fails the scan when bit is already set in seen, and sets it: a repeated key,
// which encoding/json decodes over what the first one left, is left to it.
func (s *Scanner) Once(seen *uint32, bit uint32) {
	if *seen&bit != 0 {
		s.ok = false
	}
	*seen |= bit
}

// Key reports whether key is name; a key that differs from name only in ASCII case
// fails the scan (encoding/json matches keys case-insensitively).
func (s *Scanner) Key(key []byte, name string) bool {
	if string(key) == name {
		return true
	}
	if len(key) == len(name) && bytes.EqualFold(key, []byte(name)) {
		s.ok = false
	}
	return false
}
