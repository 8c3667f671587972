// Package fsp holds the Go types of the Fathom Sandbox Protocol v1.0 (FSP v1): the JSON
// frames a client and a sandbox exchange over one WebSocket, their statuses and error
// codes, the upgrade headers, a strict frame decoder and the encoder.
//
// The protocol reference is docs/fsp-v1.md ("Fathom Sandbox Protocol v1"); names here
// follow it exactly: field names are the JSON keys, constants carry the wire values.
//
// # Frames
//
// Every frame is one JSON object with the envelope fields "v" (always [Version]), "type",
// "id" (the execution id, where the message belongs to an execution) and "ts" (ISO 8601
// with milliseconds). Each message type is a Go struct embedding [Header]:
//
//	client → sandbox   [Execute] (execute), [Cancel] (cancel), [Ping] (ping)
//	sandbox → client   [Ack] (ack), [StatusUpdate] (status), [Output] (stdout, stderr),
//	                   [Result] (result), [Error] (error), [Pong] (pong)
//
// # Decoding
//
// [Decode] (or a [Decoder] with another frame bound) is strict: a frame that is not a
// JSON object, is larger than the bound, carries another version, an unknown type, lacks
// a required field or has a field of the wrong type or range fails with a [*FrameError]
// that wraps one of the sentinels ([ErrMalformed], [ErrFrameTooLarge],
// [ErrUnsupportedVersion], [ErrUnknownType], [ErrMissingField], [ErrInvalidField]) and
// carries the execution id when the frame had a readable one, so a sandbox can answer
// with an INVALID_REQUEST [Error] bound to that execution. Unknown extra fields are
// ignored: within v1 the protocol may only grow by adding fields.
//
// The language of an execute frame and the code of an error frame are not checked against
// the known sets: a sandbox answers an unknown language with LANGUAGE_NOT_SUPPORTED rather
// than a decoding failure, and a client maps an unknown code by its retryable flag.
//
// # Encoding
//
// [Encode] validates a message with the same rules and renders it; it fills in "v" and
// "type" (except for [Output], whose type says which stream it is) when they are zero.
//
//	b, err := fsp.Encode(&fsp.Ack{Header: fsp.NewHeader(fsp.TypeAck, "exec_1", time.Now())})
//	...
//	msg, err := fsp.Decode(frame)
//	switch m := msg.(type) {
//	case *fsp.Output:
//		fmt.Print(m.Data)
//	case *fsp.Error:
//		if m.Retryable { ... }
//	}
//
// # Sequences
//
// What one execute produces, as Fathom's sandbox (internal/sandboxd) sends it, all frames
// carrying the execute's id, in this order:
//
//	rejected outright    error (LANGUAGE_NOT_SUPPORTED, INVALID_REQUEST, SANDBOX_OVERLOADED); no ack
//	ran                  ack, status running, stdout/stderr*, status <terminal>, result
//	output over limit    ack, status running, stdout/stderr*, error OUTPUT_LIMIT, status failed, result
//	sandbox failure      ack, [status running], error INTERNAL_ERROR; no result
//	cancelled queued     ack, status cancelled, result (exit_code null, duration 0)
//
// A client can therefore end an execution at its first error frame or at its result, and
// ignore later frames for an id it no longer tracks. A cancel for an id the connection
// does not know (never seen, or already finished) is answered with UNKNOWN_EXECUTION
// bearing that id.
//
// # Upgrade
//
// A client authenticates and names its version on the WebSocket upgrade request with
// [HeaderAuthorization] ("Bearer " + token, see [BearerToken]) and [HeaderProtocolVersion]
// ("1"); the endpoint is [Path].
//
// This package imports nothing else of Fathom's.
package fsp
