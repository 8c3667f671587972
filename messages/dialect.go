package messages

import (
	"cmp"
	"encoding/base64"
	"errors"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// errInvalidUTF8 is a string field that is not UTF-8, which the proto3 JSON mapping
// refuses (as protojson does).
var errInvalidUTF8 = errors.New("string field contains invalid UTF-8")

// dialectEncoder renders a message in the dialect in one pass, straight from its
// fields: what protojson (payloadJSON) renders, with 64-bit integers as numbers and no
// spaces (dialect64's rewriting), without the intermediate text, protojson's field
// sorting and its allocations. Well-known types (opaque), whose JSON form is their own,
// are left to protojson and dialect64. TestDialectEncoderMatchesProtojson holds it to
// byte equality with the two-step rendering, and the event payloads' generated
// marshallers (dialectMessage) to byte equality with it.
type dialectEncoder struct {
	b      []byte
	spans  bool // record the top-level members in fields
	fields []fieldSpan
}

// message appends m's object; with top it records each member's span.
func (e *dialectEncoder) message(m protoreflect.Message, top bool) error {
	md := m.Descriptor()
	if opaque(md) {
		return e.wellKnown(m)
	}
	e.b = append(e.b, '{')
	fds := md.Fields()
	first := true
	for i := range fds.Len() {
		fd := fds.Get(i)
		has := m.Has(fd)
		if !has && fd.ContainingOneof() != nil {
			continue // an unset oneof member (or proto3 optional) is not rendered
		}
		if !first {
			e.b = append(e.b, ',')
		}
		first = false
		e.b = append(e.b, '"')
		ks := len(e.b)
		e.b = append(e.b, fd.Name()...) // a proto name: [A-Za-z0-9_]
		ke := len(e.b)
		e.b = append(e.b, '"', ':')
		vs := len(e.b)
		var err error
		switch {
		case !has && fd.HasPresence(): // an unset message field
			e.b = append(e.b, "null"...)
		case fd.IsList():
			err = e.list(fd, m.Get(fd).List())
		case fd.IsMap():
			err = e.mapValue(fd, m.Get(fd).Map())
		default:
			err = e.single(fd, m.Get(fd))
		}
		if err != nil {
			return err
		}
		if top && e.spans {
			e.fields = append(e.fields, fieldSpan{key: [2]int{ks, ke}, value: [2]int{vs, len(e.b)}})
		}
	}
	e.b = append(e.b, '}')
	return nil
}

// wellKnown appends a well-known type as protojson renders it, without its spaces.
func (e *dialectEncoder) wellKnown(m protoreflect.Message) error {
	start := len(e.b)
	b, err := payloadJSON.MarshalAppend(e.b, m.Interface())
	if err != nil {
		return err
	}
	d := dialect64{b: b, r: start, w: start}
	if err := d.rewrite(m.Descriptor()); err != nil {
		return err
	}
	e.b = b[:d.w]
	return nil
}

func (e *dialectEncoder) list(fd protoreflect.FieldDescriptor, l protoreflect.List) error {
	e.b = append(e.b, '[')
	for i := range l.Len() {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		if err := e.single(fd, l.Get(i)); err != nil {
			return err
		}
	}
	e.b = append(e.b, ']')
	return nil
}

// mapValue appends a map's entries in protojson's key order: false before true,
// numbers ascending, strings by their bytes (UTF-8 code point order).
func (e *dialectEncoder) mapValue(fd protoreflect.FieldDescriptor, mp protoreflect.Map) error {
	keys := make([]protoreflect.MapKey, 0, mp.Len())
	mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k)
		return true
	})
	slices.SortFunc(keys, compareMapKeys)
	e.b = append(e.b, '{')
	vfd := fd.MapValue()
	for i, k := range keys {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		var err error
		if e.b, err = appendProtoString(e.b, k.String()); err != nil {
			return err
		}
		e.b = append(e.b, ':')
		if err := e.single(vfd, mp.Get(k)); err != nil {
			return err
		}
	}
	e.b = append(e.b, '}')
	return nil
}

func compareMapKeys(a, b protoreflect.MapKey) int {
	switch x := a.Interface().(type) {
	case bool:
		y := b.Bool()
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case int32, int64:
		return cmp.Compare(a.Int(), b.Int())
	case uint32, uint64:
		return cmp.Compare(a.Uint(), b.Uint())
	}
	return cmp.Compare(a.String(), b.String())
}

// single appends one value of field fd (a list element or map value included).
func (e *dialectEncoder) single(fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		e.b = strconv.AppendBool(e.b, v.Bool())
	case protoreflect.StringKind:
		var err error
		e.b, err = appendProtoString(e.b, v.String())
		return err
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		e.b = strconv.AppendInt(e.b, v.Int(), 10)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		e.b = strconv.AppendUint(e.b, v.Uint(), 10)
	case protoreflect.FloatKind:
		e.b = appendProtoFloat(e.b, v.Float(), 32)
	case protoreflect.DoubleKind:
		e.b = appendProtoFloat(e.b, v.Float(), 64)
	case protoreflect.BytesKind:
		e.b = append(e.b, '"')
		e.b = base64.StdEncoding.AppendEncode(e.b, v.Bytes())
		e.b = append(e.b, '"')
	case protoreflect.EnumKind:
		if fd.Enum().FullName() == "google.protobuf.NullValue" {
			e.b = append(e.b, "null"...)
			break
		}
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			e.b = append(e.b, '"')
			e.b = append(e.b, ev.Name()...)
			e.b = append(e.b, '"')
		} else {
			e.b = strconv.AppendInt(e.b, int64(v.Enum()), 10)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return e.message(v.Message(), false)
	default:
		return errBadJSON
	}
	return nil
}

// appendProtoFloat appends a float as protojson does: NaN and the infinities as
// strings, otherwise encoding/json's number format.
func appendProtoFloat(b []byte, n float64, bitSize int) []byte {
	switch {
	case math.IsNaN(n):
		return append(b, `"NaN"`...)
	case math.IsInf(n, +1):
		return append(b, `"Infinity"`...)
	case math.IsInf(n, -1):
		return append(b, `"-Infinity"`...)
	}
	f := byte('f')
	if abs := math.Abs(n); abs != 0 {
		if bitSize == 64 && (abs < 1e-6 || abs >= 1e21) ||
			bitSize == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			f = 'e'
		}
	}
	b = strconv.AppendFloat(b, n, f, -1, bitSize)
	if f == 'e' { // e-07 → e-7
		if l := len(b); l >= 4 && b[l-4] == 'e' && b[l-3] == '-' && b[l-2] == '0' {
			b[l-2] = b[l-1]
			b = b[:l-1]
		}
	}
	return b
}

// appendProtoString appends s as a JSON string as protojson escapes it: '"', '\\' and
// control characters only; invalid UTF-8 is an error.
func appendProtoString(b []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) { // word at a time over ASCII
		return b, errInvalidUTF8
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !mustEscape[c] {
			continue
		}
		b = append(b, s[start:i]...)
		b = append(b, '\\')
		switch c {
		case '"', '\\':
			b = append(b, c)
		case '\b':
			b = append(b, 'b')
		case '\f':
			b = append(b, 'f')
		case '\n':
			b = append(b, 'n')
		case '\r':
			b = append(b, 'r')
		case '\t':
			b = append(b, 't')
		default:
			b = append(b, 'u')
			b = append(b, "0000"[1+(bits.Len32(uint32(c))-1)/4:]...)
			b = strconv.AppendUint(b, uint64(c), 16)
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"'), nil
}

// mustEscape marks the bytes protojson escapes in a string: '"', '\\' and the control
// characters (bytes of multi-byte UTF-8 sequences are all >= 0x80, never escaped).
var mustEscape = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()
