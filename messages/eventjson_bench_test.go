package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// threePassEventJSON is the event rendering before the single pass (protojson, decoded
// into a map, 64-bit integers fixed, json.Marshal again per field): the benchmark's
// baseline and the reference the single pass must agree with.
func threePassEventJSON(ev *Event) ([]byte, error) {
	msg := ev.PayloadMessage()
	if msg == nil {
		return nil, ErrNoPayload
	}
	obj, err := threePassObject(msg)
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
		kb, _ := json.Marshal(h.k)
		vb, _ := json.Marshal(h.v)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(vb)
	}
	fds := msg.ProtoReflect().Descriptor().Fields()
	for i := 0; i < fds.Len(); i++ {
		name := string(fds.Get(i).Name())
		v, ok := obj[name]
		if !ok {
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		kb, _ := json.Marshal(name)
		buf.WriteByte(',')
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(raw)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// threePassJSON is MarshalJSON before the single pass.
func threePassJSON(m proto.Message) ([]byte, error) {
	obj, err := threePassObject(m)
	if err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

func threePassObject(m proto.Message) (map[string]any, error) {
	b, err := payloadJSON.Marshal(m)
	if err != nil {
		return nil, err
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	obj, _ := generic.(map[string]any)
	oldNumberize(m.ProtoReflect().Descriptor(), obj)
	return obj, nil
}

func oldNumberize(md protoreflect.MessageDescriptor, obj map[string]any) {
	fds := md.Fields()
	for i := 0; i < fds.Len(); i++ {
		fd := fds.Get(i)
		name := string(fd.Name())
		v, ok := obj[name]
		if !ok {
			continue
		}
		switch {
		case fd.IsList():
			if arr, ok := v.([]any); ok {
				for i := range arr {
					arr[i] = oldNumberizeScalar(fd, arr[i])
				}
			}
		case fd.IsMap():
			if m, ok := v.(map[string]any); ok {
				for k := range m {
					m[k] = oldNumberizeScalar(fd.MapValue(), m[k])
				}
			}
		default:
			obj[name] = oldNumberizeScalar(fd, v)
		}
	}
}

func oldNumberizeScalar(fd protoreflect.FieldDescriptor, v any) any {
	switch fd.Kind() {
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if s, ok := v.(string); ok {
			return json.Number(s)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if m, ok := v.(map[string]any); ok {
			oldNumberize(fd.Message(), m)
		}
	}
	return v
}

// fill sets every field of m (nested messages to depth 3, two elements per list and
// map) to values that exercise the JSON rendering: escapes, HTML characters, non-ASCII,
// integers beyond 2^53, negative numbers, floats in exponent form.
func fill(m protoreflect.Message, depth int) {
	fds := m.Descriptor().Fields()
	for i := 0; i < fds.Len(); i++ {
		fd := fds.Get(i)
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for j := 0; j < 2; j++ {
				if fd.Message() != nil {
					if depth == 0 {
						break
					}
					e := l.NewElement()
					fill(e.Message(), depth-1)
					l.Append(e)
					continue
				}
				l.Append(scalar(fd, i+j))
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for j := 0; j < 2; j++ {
				k := protoreflect.ValueOfString(fmt.Sprintf(`k"%d`, j)).MapKey()
				if fd.MapValue().Message() != nil {
					if depth == 0 {
						break
					}
					v := mp.NewValue()
					fill(v.Message(), depth-1)
					mp.Set(k, v)
					continue
				}
				mp.Set(k, scalar(fd.MapValue(), i+j))
			}
		case fd.Message() != nil:
			if depth > 0 {
				fill(m.Mutable(fd).Message(), depth-1)
			}
		default:
			m.Set(fd, scalar(fd, i))
		}
	}
}

func scalar(fd protoreflect.FieldDescriptor, i int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("s%d \"q\" \\ </b>&\u2028 é\n\t{\"seq\":\"1\"}", i))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{0, 0xff, byte(i)})
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(vals.Len() - 1).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(-int32(i) - 7)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(i) + 4000000000)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(-(1 << 62) - int64(i))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(1<<63 + uint64(i))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(0.1 + float32(i))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64([]float64{1e21, 0.1, -2.5e-9}[i%3])
	}
	panic("unhandled kind " + fd.Kind().String())
}

// decodeJSON decodes b keeping numbers as written, so 1<<63 and -(1<<62) compare exactly.
func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

// TestEventJSONMatchesTheThreePassRendering: the single pass renders every event type
// (empty, and with every field set) and every message of the package (MarshalJSON) to
// the same JSON value as the three passes did, compact, with no space protojson adds.
func TestEventJSONMatchesTheThreePassRendering(t *testing.T) {
	oneof := payloadOneof()
	for i := 0; i < oneof.Fields().Len(); i++ {
		fd := oneof.Fields().Get(i)
		for _, full := range []bool{false, true} {
			ev := &Event{Seq: 1<<53 + 1, SessionId: "s-1", AtUnixNano: 1764000000123456789}
			if full {
				ev.CommandId = `c"1é`
			}
			payload := ev.ProtoReflect().NewField(fd)
			if full {
				fill(payload.Message(), 3)
			}
			ev.ProtoReflect().Set(fd, payload)
			want, err := threePassEventJSON(ev)
			if err != nil {
				t.Fatal(err)
			}
			got, err := MarshalEventJSON(ev)
			if err != nil {
				t.Fatalf("%s: %v", fd.Name(), err)
			}
			checkSameJSON(t, string(fd.Name()), got, want)
			fields, err := EventJSONFields(ev)
			if err != nil {
				t.Fatal(err)
			}
			obj := decodeJSON(t, want).(map[string]any)
			if n := len(obj) - 4 - boolInt(full); len(fields.Keys()) != n { // the envelope: type, seq, session_id, at (, command_id)
				t.Errorf("%s: %d payload fields, want %d", fd.Name(), len(fields.Keys()), n)
			}
			for _, k := range fields.Keys() {
				if v := decodeJSON(t, fields.Get(k)); !reflect.DeepEqual(v, obj[k]) {
					t.Errorf("%s.%s = %s, want %v", fd.Name(), k, fields.Get(k), obj[k])
				}
			}
		}
	}
	n := 0
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if mt.Descriptor().ParentFile().Package() != (&Event{}).ProtoReflect().Descriptor().ParentFile().Package() {
			return true
		}
		n++
		m := mt.New()
		fill(m, 3)
		want, err := threePassJSON(m.Interface())
		if err != nil {
			t.Fatal(err)
		}
		got, err := MarshalJSON(m.Interface())
		if err != nil {
			t.Fatalf("%s: %v", mt.Descriptor().FullName(), err)
		}
		checkSameJSON(t, string(mt.Descriptor().FullName()), got, want)
		return true
	})
	if n < 50 {
		t.Fatalf("compared %d message types, want them all", n)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func checkSameJSON(t *testing.T, name string, got, want []byte) {
	t.Helper()
	if !reflect.DeepEqual(decodeJSON(t, got), decodeJSON(t, want)) {
		t.Errorf("%s:\n got %s\nwant %s", name, got, want)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, got); err != nil || !bytes.Equal(c.Bytes(), got) {
		t.Errorf("%s: not compact (%v): %s", name, err, got)
	}
	if strings.Contains(string(got), `"seq":"`) {
		t.Errorf("%s: quoted seq in %s", name, got)
	}
}

// benchEvents are a streamed step's typical events: a model answer with a tool call and
// its usage, and the tool's result.
func benchEvents() []*Event {
	return []*Event{
		{Seq: 41, SessionId: "s-bench", AtUnixNano: 1764000000123456789, CommandId: "cmd-1",
			Payload: &Event_LlmResponded{LlmResponded: &LlmResponded{CallId: "step-3/llm-1", StepId: "step-3", Model: "mock",
				Content: "I will read the file and then summarise it.", FinishReason: "tool_calls", DurationMs: 12, CostUsd: 0.0012,
				Usage:     &Usage{InputTokens: 1800, OutputTokens: 42, TotalTokens: 1842},
				ToolCalls: []*ToolCallRequest{{Id: "call-1", Name: "read_file", Arguments: `{"path":"notes/plan.md"}`}}}}},
		{Seq: 42, SessionId: "s-bench", AtUnixNano: 1764000000223456789,
			Payload: &Event_ToolResult{ToolResult: &ToolResult{StepId: "step-3", CallId: "call-1", Tool: "read_file", DurationMs: 3, Tokens: 120, Result: strings.Repeat("a line of the file\n", 20)}}},
	}
}

// BenchmarkEventJSON compares the single pass with the three passes it replaced
// (baseline), per event of benchEvents.
func BenchmarkEventJSON(b *testing.B) {
	evs := benchEvents()
	for _, bc := range []struct {
		name string
		f    func(*Event) ([]byte, error)
	}{{"baseline-three-pass", threePassEventJSON}, {"single-pass", MarshalEventJSON}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := bc.f(evs[i%len(evs)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The encoding alone, into a reused buffer (as the gateway renders frames).
	b.Run("single-pass-append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 4096)
		for i := 0; b.Loop(); i++ {
			var err error
			if buf, err = AppendEventJSON(buf[:0], evs[i%len(evs)]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
