package messages

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ErrNoPayload is returned for an event envelope without a typed payload.
var ErrNoPayload = errors.New("event has no payload")

// payloadOneof is resolved lazily: package variables initialise before the generated
// init functions register the file descriptors.
var payloadOneof = sync.OnceValue(func() protoreflect.OneofDescriptor {
	return (&Event{}).ProtoReflect().Descriptor().Oneofs().ByName("payload")
})

// Type returns the event's public snake_case type name ("session_started", ...), or ""
// when the envelope has no payload.
func (e *Event) Type() string {
	if name, _ := e.payloadDialect(); name != "" {
		return name
	}
	fd := e.payloadField()
	if fd == nil {
		return ""
	}
	return string(fd.Name())
}

// PayloadMessage returns the typed payload (e.g. *SessionStarted), or nil.
func (e *Event) PayloadMessage() proto.Message {
	fd := e.payloadField()
	if fd == nil {
		return nil
	}
	return e.ProtoReflect().Get(fd).Message().Interface()
}

// At returns the event's time.
func (e *Event) At() time.Time { return time.Unix(0, e.GetAtUnixNano()).UTC() }

func (e *Event) payloadField() protoreflect.FieldDescriptor {
	if e == nil {
		return nil
	}
	return e.ProtoReflect().WhichOneof(payloadOneof())
}

// payloadJSON is the proto3 JSON mapping of the dialect: proto names, unpopulated fields
// included, enums by name. protojson quotes 64-bit integers and may put a space after a
// comma; dialect64 undoes both in the same buffer.
var payloadJSON = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// MarshalEventJSON renders ev as Fathom's flat JSON event object (see the package doc).
func MarshalEventJSON(ev *Event) ([]byte, error) {
	return AppendEventJSON(make([]byte, 0, 512), ev)
}

// AppendEventJSON appends ev's flat JSON object (MarshalEventJSON's rendering) to dst and
// returns the extended buffer. The payload is encoded once, straight into dst, after the
// envelope fields, by its generated marshaller.
func AppendEventJSON(dst []byte, ev *Event) ([]byte, error) {
	out, _, err := appendEvent(dst, ev, false)
	return out, err
}

// dialectMessage is a message with a generated marshaller for the dialect
// (events_eventjson.pb.go, protoc-gen-go-eventjson): every event payload.
type dialectMessage interface {
	// appendDialectJSON appends the message's object; s, when not nil, gets the span of
	// each of its members.
	appendDialectJSON(b []byte, s *[]fieldSpan) ([]byte, error)
}

// addSpan records in s, when not nil, the span of the member of n-byte name whose value
// is at [vs, ve) (the name ends 2 bytes before its value: `":`).
func addSpan(s *[]fieldSpan, vs, n, ve int) {
	if s != nil {
		*s = append(*s, fieldSpan{key: [2]int{vs - 2 - n, vs - 2}, value: [2]int{vs, ve}})
	}
}

// appendEvent appends ev's flat JSON object to dst; with spans it also returns where
// each payload field's name and value are in the result. The payload is rendered by its
// generated marshaller (dialectEncoder's rendering, without reflection); a payload
// without one (a stale generated file) by dialectEncoder.
func appendEvent(dst []byte, ev *Event, spans bool) ([]byte, []fieldSpan, error) {
	typ, payload := ev.payloadDialect()
	var msg proto.Message
	if payload == nil {
		if msg = ev.PayloadMessage(); msg == nil {
			return dst, nil, ErrNoPayload
		}
		typ = ev.Type()
	}
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typ...) // a proto field name: [a-z0-9_]
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendUint(dst, ev.GetSeq(), 10)
	dst = append(dst, `,"session_id":`...)
	dst = appendJSONString(dst, ev.GetSessionId())
	dst = append(dst, `,"at":"`...)
	dst = ev.At().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, '"')
	if id := ev.GetCommandId(); id != "" {
		dst = append(dst, `,"command_id":`...)
		dst = appendJSONString(dst, id)
	}
	start := len(dst)
	var fields []fieldSpan
	var err error
	if payload != nil {
		var s *[]fieldSpan
		if spans {
			s = new([]fieldSpan) // not &fields: that would move fields to the heap for every event
		}
		dst, err = payload.appendDialectJSON(dst, s)
		if s != nil {
			fields = *s
		}
	} else {
		e := dialectEncoder{b: dst, spans: spans}
		err = e.message(msg.ProtoReflect(), true)
		dst, fields = e.b, e.fields
	}
	if err != nil {
		return dst[:start], nil, fmt.Errorf("render %s payload: %w", typ, err)
	}
	// Splice the payload's members into the envelope object: its '{' becomes the
	// separator after the envelope, or goes when the payload has no fields.
	if len(dst)-start == 2 {
		dst = append(dst[:start], '}')
	} else {
		dst[start] = ','
	}
	return dst, fields, nil
}

// appendJSONString appends s as a JSON string. Envelope strings (session and command
// ids) are plain ASCII; anything else is left to encoding/json.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// PayloadFields is an event payload rendered to JSON values, in proto field order.
type PayloadFields struct {
	order  []string
	values map[string]json.RawMessage
}

// EventJSONFields renders the payload's fields (without the envelope) for callers that
// embed them in their own frames, such as the gateway's event frames.
func EventJSONFields(ev *Event) (PayloadFields, error) {
	b, spans, err := appendEvent(nil, ev, true)
	if err != nil {
		return PayloadFields{}, err
	}
	out := PayloadFields{order: make([]string, 0, len(spans)), values: make(map[string]json.RawMessage, len(spans))}
	for _, s := range spans {
		k := string(b[s.key[0]:s.key[1]])
		out.order = append(out.order, k)
		out.values[k] = json.RawMessage(b[s.value[0]:s.value[1]])
	}
	return out, nil
}

// Keys returns the payload's field names in proto order.
func (p PayloadFields) Keys() []string { return p.order }

// Get returns the JSON value of field k.
func (p PayloadFields) Get(k string) json.RawMessage { return p.values[k] }

// fieldSpan locates one top-level member of a rewritten message: its name (without the
// quotes) and its value, as [start, end) offsets.
type fieldSpan struct{ key, value [2]int }

// errBadJSON reports protojson output that dialect64 does not recognise (it never should).
var errBadJSON = errors.New("unexpected protojson output")

// dialect64 turns protojson's rendering of a message into the dialect's, in place, in one
// pass and without allocating: 64-bit integer fields (quoted strings in the proto3 JSON
// mapping) become JSON numbers, guided by the message descriptor, and the insignificant
// spaces protojson adds at random are dropped. It encodes nothing: every value is
// protojson's, so it only tells names, strings and structure apart. It reads at r and
// writes at w <= r in the same buffer, since it only ever removes bytes.
type dialect64 struct {
	b      []byte
	r, w   int
	spans  bool // record the top-level members in fields
	fields []fieldSpan
	err    error
}

// rewrite rewrites the message of type md at r, the whole rest of the buffer.
func (d *dialect64) rewrite(md protoreflect.MessageDescriptor) error {
	d.space()
	if d.peek() == '{' && !opaque(md) {
		d.object(md, nil, d.spans)
	} else {
		d.value(nil)
	}
	d.space()
	if d.err == nil && d.r != len(d.b) {
		d.err = errBadJSON
	}
	return d.err
}

// opaque reports a well-known type, whose JSON form is its own (a Timestamp is a string,
// a Struct any object): copied as protojson renders it.
func opaque(md protoreflect.MessageDescriptor) bool {
	return md.FullName().Parent() == "google.protobuf"
}

// peek returns the byte at r; at the end of the buffer it records errBadJSON and
// returns 0 (a byte protojson never writes).
func (d *dialect64) peek() byte {
	if d.r < len(d.b) {
		return d.b[d.r]
	}
	if d.err == nil {
		d.err = errBadJSON
	}
	return 0
}

func (d *dialect64) copy1() {
	d.b[d.w] = d.b[d.r]
	d.w++
	d.r++
}

func (d *dialect64) space() {
	for d.r < len(d.b) {
		switch d.b[d.r] {
		case ' ', '\t', '\n', '\r':
			d.r++
		default:
			return
		}
	}
}

// str copies the string at r (quotes included unless unquote), and returns where its
// content landed.
func (d *dialect64) str(unquote bool) (start, end int) {
	if unquote {
		d.r++
	} else {
		d.copy1()
	}
	start = d.w
	for {
		c := d.peek()
		if d.err != nil {
			return start, d.w
		}
		switch c {
		case '"':
			end = d.w
			if unquote {
				d.r++
			} else {
				d.copy1()
			}
			return start, end
		case '\\': // copy the escaped byte with it: it may be a quote
			d.copy1()
			if d.peek(); d.err != nil {
				return start, d.w
			}
		}
		d.copy1()
	}
}

// object copies the object at r: a message of type md (field names looked up in it), the
// entries of a map whose values are mapValue, or, with both nil, any object. With top it
// records each member's span.
func (d *dialect64) object(md protoreflect.MessageDescriptor, mapValue protoreflect.FieldDescriptor, top bool) {
	d.copy1() // {
	next := 0
	for d.err == nil {
		d.space()
		switch d.peek() {
		case '}':
			d.copy1()
			return
		case ',':
			d.copy1()
			continue
		case '"':
		default:
			d.err = errBadJSON
			return
		}
		ks, ke := d.str(false)
		d.space()
		if d.peek() != ':' {
			d.err = errBadJSON
			return
		}
		d.copy1()
		d.space()
		fd := mapValue
		if md != nil {
			fd, next = fieldNamed(md.Fields(), d.b[ks:ke], next)
		}
		vs := d.w
		d.value(fd)
		if top {
			d.fields = append(d.fields, fieldSpan{key: [2]int{ks, ke}, value: [2]int{vs, d.w}})
		}
	}
}

// value copies the value at r of field fd (nil: any JSON value).
func (d *dialect64) value(fd protoreflect.FieldDescriptor) {
	switch d.peek() {
	case '{':
		switch {
		case fd == nil:
			d.object(nil, nil, false)
		case fd.IsMap():
			d.object(nil, fd.MapValue(), false)
		case fd.Message() != nil && !opaque(fd.Message()):
			d.object(fd.Message(), nil, false)
		default:
			d.object(nil, nil, false)
		}
	case '[':
		elem := fd
		if fd != nil && !fd.IsList() {
			elem = nil
		}
		d.copy1()
		for d.err == nil {
			d.space()
			switch d.peek() {
			case ']':
				d.copy1()
				return
			case ',':
				d.copy1()
			default:
				d.value(elem)
			}
		}
	case '"':
		d.str(fd != nil && is64(fd))
	case 0:
	default: // a number, true, false or null
		for d.r < len(d.b) {
			switch d.b[d.r] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			d.copy1()
		}
	}
}

// is64 reports a 64-bit integer field (or list element or map value), which protojson
// quotes.
func is64(fd protoreflect.FieldDescriptor) bool {
	switch fd.Kind() {
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return true
	}
	return false
}

// fieldNamed returns the field called name, searching from index next on (protojson
// writes fields in declaration order), and the index after it; nil for a name that is
// no field (an extension).
func fieldNamed(fds protoreflect.FieldDescriptors, name []byte, next int) (protoreflect.FieldDescriptor, int) {
	n := fds.Len()
	for i := 0; i < n; i++ {
		j := (next + i) % n
		if fd := fds.Get(j); string(fd.Name()) == string(name) {
			return fd, j + 1
		}
	}
	return nil, next
}

// envelopeKeys are the keys of the flat JSON event object that are not payload fields
// ("op" is the gateway's frame marker).
var envelopeKeys = map[string]bool{"type": true, "seq": true, "session_id": true, "at": true, "command_id": true, "op": true}

// UnmarshalEventJSON parses Fathom's flat JSON event object (MarshalEventJSON's output,
// or a gateway event frame) back into an Event: the envelope keys, and the payload named
// by "type" from the remaining keys. Unknown payload keys are an error.
func UnmarshalEventJSON(b []byte) (*Event, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("event json: %w", err)
	}
	var head struct {
		Type      string    `json:"type"`
		Seq       uint64    `json:"seq"`
		SessionID string    `json:"session_id"`
		At        time.Time `json:"at"`
		CommandID string    `json:"command_id"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("event json envelope: %w", err)
	}
	ev := &Event{Seq: head.Seq, SessionId: head.SessionID, CommandId: head.CommandID}
	if !head.At.IsZero() {
		ev.AtUnixNano = head.At.UnixNano()
	}
	od := payloadOneof()
	var fd protoreflect.FieldDescriptor
	for i := 0; i < od.Fields().Len(); i++ {
		if f := od.Fields().Get(i); string(f.Name()) == head.Type {
			fd = f
		}
	}
	if fd == nil {
		return nil, fmt.Errorf("event json: unknown event type %q", head.Type)
	}
	payload := map[string]json.RawMessage{}
	for k, v := range obj {
		if !envelopeKeys[k] {
			payload[k] = v
		}
	}
	pb, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	msg := ev.ProtoReflect().NewField(fd).Message()
	if err := protojson.Unmarshal(pb, msg.Interface()); err != nil {
		return nil, fmt.Errorf("event json %s payload: %w", head.Type, err)
	}
	ev.ProtoReflect().Set(fd, protoreflect.ValueOfMessage(msg))
	return ev, nil
}
