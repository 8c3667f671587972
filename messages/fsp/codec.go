package fsp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DefaultMaxFrameBytes bounds the frames Decode accepts (8 MiB): room for an execute
// frame's code and stdin, far above any output chunk.
const DefaultMaxFrameBytes = 8 << 20

// Sentinel errors a *FrameError wraps; compare with errors.Is.
var (
	// ErrMalformed: the frame is not a single JSON object.
	ErrMalformed = errors.New("malformed frame")
	// ErrFrameTooLarge: the frame exceeds the decoder's size bound.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrUnsupportedVersion: the frame's "v" is not Version.
	ErrUnsupportedVersion = errors.New("unsupported protocol version")
	// ErrUnknownType: the frame's "type" is not an FSP v1 message type.
	ErrUnknownType = errors.New("unknown message type")
	// ErrMissingField: a required field is absent (or null).
	ErrMissingField = errors.New("missing field")
	// ErrInvalidField: a field has the wrong JSON type or a value out of range.
	ErrInvalidField = errors.New("invalid field")
)

// Errors of Timestamp.UnmarshalJSON, reported as ErrInvalidField on "ts".
var (
	errNotString    = errors.New("not a string")
	errBadTimestamp = errors.New("not an RFC 3339 timestamp")
)

// FrameError is a frame that failed to decode or encode. It wraps one of the sentinels
// above and says which frame and field were at fault.
type FrameError struct {
	// Op is "decode" or "encode".
	Op string
	// Err is the sentinel: ErrMalformed, ErrFrameTooLarge, ErrUnsupportedVersion,
	// ErrUnknownType, ErrMissingField or ErrInvalidField.
	Err error
	// Type is the frame's type when it could be read.
	Type Type
	// ID is the frame's execution id when it could be read, so a sandbox can bind its
	// INVALID_REQUEST answer to the execution.
	ID string
	// Field is the offending field's JSON path (e.g. "limits.timeout_ms"), if any.
	Field string
	// Detail says more, if anything.
	Detail string
}

// Error implements error.
func (e *FrameError) Error() string {
	var b strings.Builder
	b.WriteString("fsp: ")
	b.WriteString(e.Op)
	if e.Type != "" {
		b.WriteString(" " + strconv.Quote(string(e.Type)))
	}
	b.WriteString(" frame")
	if e.ID != "" {
		b.WriteString(" " + strconv.Quote(e.ID))
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	if e.Field != "" {
		b.WriteString(" " + strconv.Quote(e.Field))
	}
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	return b.String()
}

// Unwrap returns the sentinel.
func (e *FrameError) Unwrap() error { return e.Err }

// Decoder decodes frames with a size bound.
type Decoder struct {
	// MaxFrameBytes bounds a frame's size; 0 means DefaultMaxFrameBytes.
	MaxFrameBytes int
}

// Decode decodes one frame with DefaultMaxFrameBytes. See Decoder.Decode.
func Decode(frame []byte) (Message, error) {
	return Decoder{}.Decode(frame)
}

// Decode parses one frame strictly and returns the typed message (*Execute, *Cancel,
// *Ping, *Ack, *StatusUpdate, *Output, *Result, *Error or *Pong). Any failure is a
// *FrameError.
func (d Decoder) Decode(frame []byte) (Message, error) {
	max := d.MaxFrameBytes
	if max <= 0 {
		max = DefaultMaxFrameBytes
	}
	if len(frame) > max {
		return nil, &FrameError{Op: "decode", Err: ErrFrameTooLarge, Detail: fmt.Sprintf("%d bytes, limit %d", len(frame), max)}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(frame, &raw); err != nil || raw == nil {
		detail := "not a JSON object"
		if err != nil {
			detail = err.Error()
		}
		return nil, &FrameError{Op: "decode", Err: ErrMalformed, Detail: detail}
	}
	fe := &FrameError{Op: "decode"}
	// The id first (best effort), so every later error can name the execution.
	if v, ok := raw["id"]; ok {
		_ = json.Unmarshal(v, &fe.ID)
	}
	if err := decodeEnvelope(raw, fe); err != nil {
		return nil, err
	}
	msg := newMessage(fe.Type)
	if err := checkRequired(raw, fe); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(frame, msg); err != nil {
		fe.Err, fe.Field, fe.Detail = ErrInvalidField, "", err.Error()
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			fe.Field, fe.Detail = te.Field, "want "+te.Type.String()+", got JSON "+te.Value
		}
		return nil, fe
	}
	if err := msg.validate(); err != nil {
		return nil, asFrameError(err, fe)
	}
	return msg, nil
}

// decodeEnvelope checks v, type, ts and id, and sets fe.Type.
func decodeEnvelope(raw map[string]json.RawMessage, fe *FrameError) error {
	vRaw, ok := present(raw, "v")
	if !ok {
		return fe.with(ErrMissingField, "v", "")
	}
	var v int
	if err := json.Unmarshal(vRaw, &v); err != nil {
		return fe.with(ErrInvalidField, "v", "want an integer")
	}
	if v != Version {
		return fe.with(ErrUnsupportedVersion, "v", fmt.Sprintf("got %d, speak %d", v, Version))
	}
	tRaw, ok := present(raw, "type")
	if !ok {
		return fe.with(ErrMissingField, "type", "")
	}
	var t string
	if err := json.Unmarshal(tRaw, &t); err != nil {
		return fe.with(ErrInvalidField, "type", "want a string")
	}
	if !Type(t).Known() {
		return fe.with(ErrUnknownType, "type", strconv.Quote(t))
	}
	fe.Type = Type(t)
	tsRaw, ok := present(raw, "ts")
	if !ok {
		return fe.with(ErrMissingField, "ts", "")
	}
	var ts Timestamp
	if err := json.Unmarshal(tsRaw, &ts); err != nil {
		return fe.with(ErrInvalidField, "ts", err.Error())
	}
	if idRaw, ok := present(raw, "id"); ok {
		var id string
		if err := json.Unmarshal(idRaw, &id); err != nil {
			return fe.with(ErrInvalidField, "id", "want a string")
		}
	}
	return nil
}

// required lists, per type, the fields that must be present and not null (beyond the
// envelope); "" entries name fields that may be null but must be present.
var required = map[Type][]string{
	TypeExecute: {"language", "code", "limits"},
	TypeStatus:  {"status"},
	TypeStdout:  {"data"},
	TypeStderr:  {"data"},
	TypeResult:  {"duration_ms"},
	TypeError:   {"code", "message", "retryable"},
}

// checkRequired reports the first absent required field.
func checkRequired(raw map[string]json.RawMessage, fe *FrameError) error {
	for _, f := range required[fe.Type] {
		if _, ok := present(raw, f); !ok {
			return fe.with(ErrMissingField, f, "")
		}
	}
	switch fe.Type {
	case TypeResult:
		// exit_code is null when the process was killed by a signal, but never absent.
		if _, ok := raw["exit_code"]; !ok {
			return fe.with(ErrMissingField, "exit_code", "")
		}
	case TypeExecute:
		var limits map[string]json.RawMessage
		if err := json.Unmarshal(raw["limits"], &limits); err != nil {
			return fe.with(ErrInvalidField, "limits", "want an object")
		}
		for _, f := range []string{"timeout_ms", "memory_mb"} {
			if _, ok := present(limits, f); !ok {
				return fe.with(ErrMissingField, "limits."+f, "")
			}
		}
	}
	return nil
}

// present returns raw[key] when it is there and not null.
func present(raw map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	v, ok := raw[key]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil, false
	}
	return v, true
}

func (fe *FrameError) with(err error, field, detail string) *FrameError {
	fe.Err, fe.Field, fe.Detail = err, field, detail
	return fe
}

// fieldError is a validation failure of one field.
type fieldError struct {
	err    error
	field  string
	detail string
}

func (e *fieldError) Error() string { return e.err.Error() + " " + e.field + ": " + e.detail }

func invalid(field, format string, args ...any) error {
	return &fieldError{err: ErrInvalidField, field: field, detail: fmt.Sprintf(format, args...)}
}

func missing(field string) error {
	return &fieldError{err: ErrMissingField, field: field}
}

func asFrameError(err error, fe *FrameError) *FrameError {
	var f *fieldError
	if errors.As(err, &f) {
		return fe.with(f.err, f.field, f.detail)
	}
	return fe.with(ErrInvalidField, "", err.Error())
}

func newMessage(t Type) Message {
	switch t {
	case TypeExecute:
		return &Execute{}
	case TypeCancel:
		return &Cancel{}
	case TypePing:
		return &Ping{}
	case TypeAck:
		return &Ack{}
	case TypeStatus:
		return &StatusUpdate{}
	case TypeStdout, TypeStderr:
		return &Output{}
	case TypeResult:
		return &Result{}
	case TypeError:
		return &Error{}
	case TypePong:
		return &Pong{}
	}
	return nil
}

// Encode validates m with the decoder's rules and renders it as one frame. A zero
// Header.V becomes Version and an empty Header.Type the message's type (an *Output must
// name its stream); m's header is filled in place. Any failure is a *FrameError.
func Encode(m Message) ([]byte, error) {
	h := m.MessageHeader()
	if h.V == 0 {
		h.V = Version
	}
	if h.Type == "" {
		h.Type = m.defaultType()
	}
	fe := &FrameError{Op: "encode", Type: h.Type, ID: h.ID}
	if want := newMessage(h.Type); want == nil || want.defaultType() != m.defaultType() {
		return nil, fe.with(ErrUnknownType, "type", fmt.Sprintf("%q does not fit %T", h.Type, m))
	}
	if err := m.validate(); err != nil {
		return nil, asFrameError(err, fe)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fe.with(ErrInvalidField, "", err.Error())
	}
	return b, nil
}

// validateHeader checks the envelope: version, a known type, the id where required, a
// timestamp.
func (h *Header) validateHeader() error {
	if h.V != Version {
		return &fieldError{err: ErrUnsupportedVersion, field: "v", detail: fmt.Sprintf("got %d, speak %d", h.V, Version)}
	}
	if !h.Type.Known() {
		return &fieldError{err: ErrUnknownType, field: "type", detail: strconv.Quote(string(h.Type))}
	}
	if h.Type.needsID() && h.ID == "" {
		return missing("id")
	}
	if h.TS.IsZero() {
		return missing("ts")
	}
	return nil
}

func (m *Execute) defaultType() Type      { return TypeExecute }
func (m *Cancel) defaultType() Type       { return TypeCancel }
func (m *Ping) defaultType() Type         { return TypePing }
func (m *Ack) defaultType() Type          { return TypeAck }
func (m *StatusUpdate) defaultType() Type { return TypeStatus }
func (m *Output) defaultType() Type       { return TypeStdout }
func (m *Result) defaultType() Type       { return TypeResult }
func (m *Error) defaultType() Type        { return TypeError }
func (m *Pong) defaultType() Type         { return TypePong }

func (m *Execute) validate() error {
	if err := m.validateHeader(); err != nil {
		return err
	}
	if m.Language == "" {
		return missing("language")
	}
	l := m.Limits
	switch {
	case l.TimeoutMS <= 0:
		return invalid("limits.timeout_ms", "must be > 0, got %d", l.TimeoutMS)
	case l.MemoryMB <= 0:
		return invalid("limits.memory_mb", "must be > 0, got %d", l.MemoryMB)
	case l.CPUShares < 0:
		return invalid("limits.cpu_shares", "must be >= 0, got %d", l.CPUShares)
	case l.MaxOutputBytes < 0:
		return invalid("limits.max_output_bytes", "must be >= 0, got %d", l.MaxOutputBytes)
	}
	for k, v := range m.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			// Neither names nor values are echoed: env is not for logs.
			return invalid("env", "keys must be non-empty, without '=' or NUL")
		}
		if strings.ContainsRune(v, 0) {
			return invalid("env", "values must not contain NUL")
		}
	}
	return nil
}

func (m *Cancel) validate() error { return m.validateHeader() }
func (m *Ping) validate() error   { return m.validateHeader() }
func (m *Ack) validate() error    { return m.validateHeader() }

func (m *StatusUpdate) validate() error {
	if err := m.validateHeader(); err != nil {
		return err
	}
	if !m.Status.Known() {
		return invalid("status", "unknown status %q", m.Status)
	}
	return nil
}

func (m *Output) validate() error {
	if err := m.validateHeader(); err != nil {
		return err
	}
	if m.Type != TypeStdout && m.Type != TypeStderr {
		return invalid("type", "output must be stdout or stderr, got %q", m.Type)
	}
	return nil
}

func (m *Result) validate() error {
	if err := m.validateHeader(); err != nil {
		return err
	}
	if m.DurationMS < 0 {
		return invalid("duration_ms", "must be >= 0, got %d", m.DurationMS)
	}
	if u := m.ResourceUsage; u != nil && (u.PeakMemoryMB < 0 || u.CPUTimeMS < 0) {
		return invalid("resource_usage", "must be >= 0")
	}
	return nil
}

func (m *Error) validate() error {
	if err := m.validateHeader(); err != nil {
		return err
	}
	if m.Code == "" {
		return missing("code")
	}
	return nil
}

func (m *Pong) validate() error {
	if err := m.validateHeader(); err != nil {
		return err
	}
	if l := m.Load; l != nil && (l.ActiveExecutions < 0 || l.QueueDepth < 0) {
		return invalid("load", "must be >= 0")
	}
	return nil
}
