package agui

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// appendJSON appends v as json.Marshal renders it, byte for byte, without reflection
// for the values AG-UI events are made of (strings, maps with string keys, lists of
// them, raw JSON); any other value is left to json.Marshal. Every subscriber of a run
// renders each of its events, so this is the cost of an event per subscriber.
func appendJSON(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return appendJSONString(dst, v), nil
	case map[string]any:
		return appendJSONMap(dst, v)
	case []map[string]any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, m := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendJSONMap(dst, m); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case json.RawMessage:
		if v == nil {
			return append(dst, "null"...), nil
		}
		// json.Marshal compacts a RawMessage (rejecting an invalid one) and escapes the
		// HTML characters and U+2028, U+2029 in its strings.
		var compact, escaped bytes.Buffer
		if err := json.Compact(&compact, v); err != nil {
			return dst, err
		}
		json.HTMLEscape(&escaped, compact.Bytes())
		return append(dst, escaped.Bytes()...), nil
	}
	b, err := json.Marshal(v)
	return append(dst, b...), err
}

// appendTextContent appends TEXT_MESSAGE_CONTENT of message msgID with text delta, as
// json.Marshal renders its map {"type", "messageId", "delta"}.
func appendTextContent(dst []byte, msgID, delta string) []byte {
	dst = appendJSONString(append(dst, `{"delta":`...), delta)
	dst = appendJSONString(append(dst, `,"messageId":`...), msgID)
	return append(dst, `,"type":"`+evTextContent+`"}`...)
}

// appendJSONMap appends m with its keys sorted, as json.Marshal does.
func appendJSONMap(dst []byte, m map[string]any) ([]byte, error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	var arr [8]string
	keys := arr[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(appendJSONString(dst, k), ':')
		var err error
		if dst, err = appendJSON(dst, m[k]); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// appendJSONString appends s quoted as json.Marshal quotes it: printable ASCII other
// than '"', '\\' and the HTML characters '<', '>', '&' as itself; anything else (escapes,
// non-ASCII text, invalid UTF-8) is left to json.Marshal.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
