package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

var payloadJSON = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// MarshalEventJSON renders ev as Fathom's flat JSON event object (see the package doc).
func MarshalEventJSON(ev *Event) ([]byte, error) {
	fields, err := EventJSONFields(ev)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	head := []struct {
		k string
		v any
	}{{"type", ev.Type()}, {"seq", ev.GetSeq()}, {"session_id", ev.GetSessionId()}, {"at", ev.At().Format(time.RFC3339Nano)}}
	if ev.GetCommandId() != "" {
		head = append(head, struct {
			k string
			v any
		}{"command_id", ev.GetCommandId()})
	}
	for i, h := range head {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeKV(&buf, h.k, h.v)
	}
	for _, k := range fields.order {
		buf.WriteByte(',')
		writeKV(&buf, k, fields.values[k])
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func writeKV(buf *bytes.Buffer, k string, v any) {
	kb, _ := json.Marshal(k)
	buf.Write(kb)
	buf.WriteByte(':')
	if raw, ok := v.(json.RawMessage); ok {
		buf.Write(raw)
		return
	}
	vb, _ := json.Marshal(v)
	buf.Write(vb)
}

// PayloadFields is an event payload rendered to JSON values, in proto field order.
type PayloadFields struct {
	order  []string
	values map[string]json.RawMessage
}

// EventJSONFields renders the payload's fields (without the envelope) for callers that
// embed them in their own frames, such as the gateway's event frames.
func EventJSONFields(ev *Event) (PayloadFields, error) {
	msg := ev.PayloadMessage()
	if msg == nil {
		return PayloadFields{}, ErrNoPayload
	}
	b, err := payloadJSON.Marshal(msg)
	if err != nil {
		return PayloadFields{}, fmt.Errorf("marshal %s payload: %w", ev.Type(), err)
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return PayloadFields{}, fmt.Errorf("decode %s payload: %w", ev.Type(), err)
	}
	obj, _ := generic.(map[string]any)
	numberize(msg.ProtoReflect().Descriptor(), obj)
	out := PayloadFields{values: make(map[string]json.RawMessage, len(obj))}
	fds := msg.ProtoReflect().Descriptor().Fields()
	for i := 0; i < fds.Len(); i++ {
		name := string(fds.Get(i).Name())
		v, ok := obj[name]
		if !ok {
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return PayloadFields{}, fmt.Errorf("encode %s.%s: %w", ev.Type(), name, err)
		}
		out.order = append(out.order, name)
		out.values[name] = raw
	}
	return out, nil
}

// Keys returns the payload's field names in proto order.
func (p PayloadFields) Keys() []string { return p.order }

// Get returns the JSON value of field k.
func (p PayloadFields) Get(k string) json.RawMessage { return p.values[k] }

// numberize turns protojson's quoted 64-bit integers back into JSON numbers, walking the
// message descriptor so only genuine int64/uint64 fields change.
func numberize(md protoreflect.MessageDescriptor, obj map[string]any) {
	if obj == nil {
		return
	}
	fds := md.Fields()
	for i := 0; i < fds.Len(); i++ {
		fd := fds.Get(i)
		name := string(fd.Name())
		v, ok := obj[name]
		if !ok {
			continue
		}
		obj[name] = numberizeValue(fd, v)
	}
}

func numberizeValue(fd protoreflect.FieldDescriptor, v any) any {
	switch {
	case fd.IsList():
		if arr, ok := v.([]any); ok {
			for i := range arr {
				arr[i] = numberizeScalar(fd, arr[i])
			}
		}
		return v
	case fd.IsMap():
		if m, ok := v.(map[string]any); ok {
			for k := range m {
				m[k] = numberizeScalar(fd.MapValue(), m[k])
			}
		}
		return v
	default:
		return numberizeScalar(fd, v)
	}
}

func numberizeScalar(fd protoreflect.FieldDescriptor, v any) any {
	switch fd.Kind() {
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if s, ok := v.(string); ok {
			return json.Number(s)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if m, ok := v.(map[string]any); ok {
			numberize(fd.Message(), m)
		}
	}
	return v
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
