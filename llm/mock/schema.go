package mock

import (
	"encoding/json"
	"math"
	"strings"
)

// What an unscripted structured-output call answers: a model asked for JSON against a
// schema (response_format json_schema) answers JSON valid against it, never prose, so
// the mock's default answer for such a call is the smallest instance of the schema
// (minimalInstance) rather than the script's default text.

// maxSchemaDepth bounds how deep minimalInstance follows a schema (a required property
// that refers back to its own schema would not end).
const maxSchemaDepth = 32

// minimalInstance returns the JSON text of the smallest value valid against schema (a
// JSON Schema object): required properties only, minItems items, the first enum or
// const value, null or else the first branch of anyOf/oneOf, allOf merged, #-local $refs followed,
// strings of minLength (or of a sample of their format), numbers at their minimum
// (or 0). An empty or unreadable schema gets {}.
func minimalInstance(schema json.RawMessage) string {
	var root any
	if err := json.Unmarshal(schema, &root); err != nil || root == nil {
		return "{}"
	}
	b, err := json.Marshal(instanceOf(root, root, 0))
	if err != nil {
		return "{}"
	}
	return string(b)
}

// formatSamples are values of the string formats structured outputs support.
var formatSamples = map[string]string{
	"date-time": "1970-01-01T00:00:00Z", "date": "1970-01-01", "time": "00:00:00Z", "duration": "P0D",
	"email": "a@example.com", "hostname": "example.com", "ipv4": "0.0.0.0", "ipv6": "::",
	"uuid": "00000000-0000-0000-0000-000000000000", "uri": "https://example.com",
}

// instanceOf is minimalInstance on decoded JSON: s is the (sub)schema, root the whole
// schema $refs resolve in.
func instanceOf(s, root any, depth int) any {
	m, ok := s.(map[string]any)
	if !ok || depth > maxSchemaDepth {
		return nil // true, false or nonsense: null is as good as anything
	}
	if ref, ok := m["$ref"].(string); ok {
		if target, ok := resolveRef(root, ref); ok {
			return instanceOf(target, root, depth+1)
		}
	}
	if v, ok := m["const"]; ok {
		return v
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if bs, ok := m[k].([]any); ok && len(bs) > 0 {
			for _, b := range bs { // null, when a branch allows it: it never recurses
				if bm, ok := b.(map[string]any); ok && bm["type"] == "null" {
					return nil
				}
			}
			return instanceOf(bs[0], root, depth+1)
		}
	}
	if bs, ok := m["allOf"].([]any); ok && len(bs) > 0 {
		merged := map[string]any{}
		var other any
		for _, b := range bs {
			switch v := instanceOf(b, root, depth+1).(type) {
			case map[string]any:
				for k, x := range v {
					merged[k] = x
				}
			default:
				if other == nil {
					other = v
				}
			}
		}
		if other != nil && len(merged) == 0 {
			return other
		}
		return merged
	}
	switch schemaType(m) {
	case "object":
		obj := map[string]any{}
		props, _ := m["properties"].(map[string]any)
		req, _ := m["required"].([]any)
		for _, r := range req {
			if name, ok := r.(string); ok {
				obj[name] = instanceOf(props[name], root, depth+1)
			}
		}
		return obj
	case "array":
		n := int(number(m, "minItems", 0))
		arr := make([]any, 0, n)
		prefix, _ := m["prefixItems"].([]any)
		for i := range n {
			if i < len(prefix) {
				arr = append(arr, instanceOf(prefix[i], root, depth+1))
			} else {
				arr = append(arr, instanceOf(m["items"], root, depth+1))
			}
		}
		return arr
	case "string":
		if f, ok := m["format"].(string); ok && formatSamples[f] != "" {
			return formatSamples[f]
		}
		return strings.Repeat("a", int(number(m, "minLength", 0)))
	case "integer", "number":
		return minimalNumber(m, schemaType(m) == "integer")
	case "boolean":
		return false
	}
	return nil
}

// schemaType is a schema's type: its "type" (the first of a list that is not "null"),
// else what its keywords imply; "" for none.
func schemaType(m map[string]any) string {
	switch t := m["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && s != "null" {
				return s
			}
		}
		return "null"
	}
	switch {
	case m["properties"] != nil || m["required"] != nil:
		return "object"
	case m["items"] != nil || m["prefixItems"] != nil:
		return "array"
	}
	return ""
}

// minimalNumber is the number nearest 0 within the schema's bounds (and a multiple of
// multipleOf, an integer for integer).
func minimalNumber(m map[string]any, integer bool) any {
	v := 0.0
	if lo, ok := m["minimum"].(float64); ok && v < lo {
		v = lo
	}
	if lo, ok := m["exclusiveMinimum"].(float64); ok && v <= lo {
		v = lo + 1
		if hi, ok := m["maximum"].(float64); ok && v > hi && !integer {
			v = (lo + hi) / 2
		}
	}
	if hi, ok := m["maximum"].(float64); ok && v > hi {
		v = hi
	}
	if hi, ok := m["exclusiveMaximum"].(float64); ok && v >= hi {
		v = hi - 1
	}
	if mul, ok := m["multipleOf"].(float64); ok && mul > 0 {
		v = math.Ceil(v/mul) * mul
	}
	if integer {
		return int64(math.Ceil(v))
	}
	return v
}

// number is m[key] as a float64, def when absent.
func number(m map[string]any, key string, def float64) float64 {
	if v, ok := m[key].(float64); ok {
		return v
	}
	return def
}

// resolveRef follows a local reference ("#", "#/$defs/x", "#/definitions/x/...") in root.
func resolveRef(root any, ref string) (any, bool) {
	path, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	cur := root
	for _, part := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if part == "" {
			continue
		}
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}
