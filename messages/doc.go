// Package messages holds Fathom's wire formats: the protobuf sources and generated Go for
// the Session grain service (session.proto), the event envelope and its typed events
// (events.proto), and the folded session state that doubles as the snapshot (state.proto).
//
// Regenerate with `make proto`; the generated files are committed and CI fails when they
// are stale.
//
// # Events
//
// Every change to a session is an [Event]: an envelope (seq, session_id, at, command_id)
// around exactly one typed payload. The payload's oneof field name is the event's public
// type, e.g. "session_started" or "llm_responded"; [Event.Type] returns it.
//
// # JSON
//
// [MarshalEventJSON] is the one JSON rendering of events used everywhere (CLI --json,
// gateway frames, HTTP): a flat object with "type", "seq", "session_id", "at" (RFC 3339,
// UTC, nanoseconds), "command_id" when set, then the payload's fields by their proto names.
// It follows the proto3 JSON mapping as protojson renders it (proto field names,
// unpopulated fields included, enums by name), except that 64-bit integers are JSON
// numbers; it is rendered in one pass from the message's fields, straight into the
// output buffer. Event payloads have generated marshallers (events_eventjson.pb.go, by
// protoc-gen-go-eventjson in internal/, run by `make proto`) that read the Go fields
// without reflection; other messages (MarshalJSON) go through the reflective
// dialectEncoder, which the tests hold byte-equal to protojson, and the generated code
// to it (well-known types are protojson's).
//
//	{"type":"llm_responded","seq":7,"session_id":"s-…","at":"2026-11-22T10:00:00.1Z",
//	 "call_id":"step-1/llm-1","step_id":"step-1","content":"…","usage":{"input_tokens":120,…},…}
//
// This package imports nothing else of Fathom's.
package messages
