package messages

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// MarshalJSON renders m in Fathom's one JSON dialect, the one event frames use too:
// fields by their proto names, unpopulated ones included, enums by name, and 64-bit
// integers as JSON numbers (the proto3 JSON mapping would quote them). Map keys stay
// strings, as JSON requires. The gateway renders every grain answer with it.
func MarshalJSON(m proto.Message) ([]byte, error) {
	b, err := payloadJSON.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("marshal %T: %w", m, err)
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return nil, fmt.Errorf("decode %T json: %w", m, err)
	}
	obj, ok := generic.(map[string]any)
	if !ok { // a well-known type with a scalar JSON form: nothing to rewrite
		return b, nil
	}
	numberize(m.ProtoReflect().Descriptor(), obj)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, fmt.Errorf("encode %T json: %w", m, err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}
