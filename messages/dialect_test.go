package messages

import (
	"bytes"
	"math"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// protojsonDialect is the dialect's rendering in two steps, as the events were rendered
// before dialectEncoder: protojson, then dialect64 rewriting its output in place.
func protojsonDialect(m proto.Message, spans bool) ([]byte, []fieldSpan, error) {
	b, err := payloadJSON.MarshalAppend(nil, m)
	if err != nil {
		return nil, nil, err
	}
	d := dialect64{b: b, spans: spans}
	if err := d.rewrite(m.ProtoReflect().Descriptor()); err != nil {
		return nil, nil, err
	}
	return b[:d.w], d.fields, nil
}

// checkDialect compares dialectEncoder's rendering of m with protojsonDialect's: the
// same bytes, the same member spans, or both an error; and, for a message with a
// generated marshaller (an event payload), the generated marshaller's with them.
func checkDialect(t *testing.T, m proto.Message) {
	t.Helper()
	want, wantSpans, wantErr := protojsonDialect(m, true)
	e := dialectEncoder{spans: true}
	err := e.message(m.ProtoReflect(), true)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%s: error %v, protojson's %v", m.ProtoReflect().Descriptor().FullName(), err, wantErr)
	}
	if err != nil {
		if dm, ok := m.(dialectMessage); ok {
			if _, gerr := dm.appendDialectJSON(nil, nil); gerr == nil {
				t.Fatalf("%s: the generated marshaller renders what dialectEncoder refuses (%v)", m.ProtoReflect().Descriptor().FullName(), err)
			}
		}
		return
	}
	if !bytes.Equal(e.b, want) {
		t.Fatalf("%s:\n got %s\nwant %s", m.ProtoReflect().Descriptor().FullName(), e.b, want)
	}
	if !reflect.DeepEqual(e.fields, wantSpans) {
		t.Fatalf("%s: spans %v, want %v", m.ProtoReflect().Descriptor().FullName(), e.fields, wantSpans)
	}
	if dm, ok := m.(dialectMessage); ok {
		var spans []fieldSpan
		got, err := dm.appendDialectJSON([]byte("prefix"), &spans)
		if err != nil {
			t.Fatalf("%s: generated marshaller: %v", m.ProtoReflect().Descriptor().FullName(), err)
		}
		for i := range spans { // offsets in e.b, which has no prefix
			for j := range 2 {
				spans[i].key[j] -= len("prefix")
				spans[i].value[j] -= len("prefix")
			}
		}
		if string(got) != "prefix"+string(e.b) || !reflect.DeepEqual(spans, e.fields) {
			t.Fatalf("%s: generated marshaller:\n got %s %v\nwant prefix%s %v", m.ProtoReflect().Descriptor().FullName(), got, spans, e.b, e.fields)
		}
	}
}

// packageTypes are the message types of the package.
func packageTypes() []protoreflect.MessageType {
	var out []protoreflect.MessageType
	pkg := (&Event{}).ProtoReflect().Descriptor().ParentFile().Package()
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if mt.Descriptor().ParentFile().Package() == pkg {
			out = append(out, mt)
		}
		return true
	})
	return out
}

// TestDialectEncoderMatchesProtojson: the one-pass encoder renders every message type
// of the package (events and their payloads included), empty, filled, and with the
// values JSON renderings get wrong (control characters, invalid UTF-8, NaN, infinities,
// tiny and huge floats, negative zero), byte for byte as protojson and dialect64 did.
func TestDialectEncoderMatchesProtojson(t *testing.T) {
	types := packageTypes()
	if len(types) < 50 {
		t.Fatalf("%d message types, want them all", len(types))
	}
	odd := []string{"", "\x00\x01\x08\x0c\x1f\x7f", "tab\tnl\ncr\r\"q\"\\", "é \u2028 \U0001F600 </b>&", "bad \xff utf8", "\xc3"}
	floats := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e-7, 1e21, 123456789.125, math.Copysign(0, -1), 0.1, float64(math.MaxFloat32), 1e-45}
	generated := 0
	for _, mt := range types {
		if _, ok := mt.Zero().Interface().(dialectMessage); ok {
			generated++
		}
		checkDialect(t, mt.Zero().Interface()) // a typed nil
		checkDialect(t, mt.New().Interface())
		m := mt.New()
		fill(m, 3)
		checkDialect(t, m.Interface())
		for i := range max(len(odd), len(floats)) {
			m := mt.New()
			fill(m, 1)
			setScalars(m, odd[i%len(odd)], floats[i%len(floats)])
			checkDialect(t, m.Interface())
		}
	}
	if generated < 48 {
		t.Fatalf("%d message types with a generated marshaller, want every message of events.proto but Event", generated)
	}
}

// TestPayloadDialectIsThePayload: for every event type, the generated payload switch
// names the payload as its oneof field (Type) and returns the payload message itself,
// an unset one too (a payload wrapper around nil renders as the empty message).
func TestPayloadDialectIsThePayload(t *testing.T) {
	oneof := payloadOneof()
	if name, m := (&Event{}).payloadDialect(); name != "" || m != nil {
		t.Fatalf("no payload: %q, %v", name, m)
	}
	for i := range oneof.Fields().Len() {
		fd := oneof.Fields().Get(i)
		ev := &Event{}
		ev.ProtoReflect().Set(fd, ev.ProtoReflect().NewField(fd))
		name, m := ev.payloadDialect()
		if name != string(fd.Name()) || ev.Type() != name || m == nil || m.(proto.Message) != ev.PayloadMessage() {
			t.Fatalf("%s: payloadDialect = %q, %v; Type %q, payload %v", fd.Name(), name, m, ev.Type(), ev.PayloadMessage())
		}
		// The payload wrapper around nil: the reflective encoder renders the default message.
		reflect.ValueOf(ev.GetPayload()).Elem().Field(0).SetZero()
		e := dialectEncoder{}
		if err := e.message(ev.PayloadMessage().ProtoReflect(), false); err != nil {
			t.Fatal(err)
		}
		name, m = ev.payloadDialect()
		got, err := m.appendDialectJSON(nil, nil)
		if err != nil || name != string(fd.Name()) || string(got) != string(e.b) {
			t.Fatalf("%s around nil: %q %s, %v; want %s", fd.Name(), name, got, err, e.b)
		}
	}
}

// setScalars sets m's string and float fields (lists' elements and maps' values and
// keys too, nested messages to any depth) to s and f.
func setScalars(m protoreflect.Message, s string, f float64) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				if fd.Message() != nil {
					setScalars(l.Get(i).Message(), s, f)
				} else if nv, ok := scalarValue(fd, s, f); ok {
					l.Set(i, nv)
				}
			}
		case fd.IsMap():
			mp := v.Map()
			var keys []protoreflect.MapKey
			mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool { keys = append(keys, k); return true })
			for i, k := range keys {
				val := mp.Get(k)
				if fd.MapValue().Message() != nil {
					setScalars(val.Message(), s, f)
				} else if nv, ok := scalarValue(fd.MapValue(), s, f); ok {
					val = nv
				}
				if fd.MapKey().Kind() == protoreflect.StringKind {
					mp.Clear(k)
					k = protoreflect.ValueOfString(s + string(rune('a'+i))).MapKey()
				}
				mp.Set(k, val)
			}
		case fd.Message() != nil:
			setScalars(v.Message(), s, f)
		default:
			if nv, ok := scalarValue(fd, s, f); ok {
				m.Set(fd, nv)
			}
		}
		return true
	})
}

func scalarValue(fd protoreflect.FieldDescriptor, s string, f float64) (protoreflect.Value, bool) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(s), true
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(f), true
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(f)), true
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(len(s) + 1000)), true // a number without a name
	}
	return protoreflect.Value{}, false
}

// FuzzDialectEncoder: for any message of the package decoded from arbitrary protobuf
// bytes, the one-pass encoder and protojson with dialect64 agree.
func FuzzDialectEncoder(f *testing.F) {
	types := packageTypes()
	for i, mt := range types {
		m := mt.New()
		fill(m, 2)
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m.Interface())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint16(i), b)
	}
	f.Fuzz(func(t *testing.T, which uint16, data []byte) {
		m := types[int(which)%len(types)].New().Interface()
		if proto.Unmarshal(data, m) != nil {
			return
		}
		checkDialect(t, m)
	})
}

// TestEventJSONAllocatesNothing: rendering an event into a buffer with room allocates
// nothing (the generated marshallers read the Go fields; the reflective encoder
// allocated views of list fields, protojson ~20 times per event: its field sorting, its
// encoder state, its output).
func TestEventJSONAllocatesNothing(t *testing.T) {
	buf := make([]byte, 0, 64<<10)
	for _, ev := range benchEvents() {
		got := testing.AllocsPerRun(50, func() {
			if _, err := AppendEventJSON(buf[:0], ev); err != nil {
				t.Fatal(err)
			}
		})
		if got != 0 {
			t.Errorf("%s: %.0f allocations per event into a buffer with room, want none", ev.Type(), got)
		}
	}
}
