package messages

import (
	"fmt"

	"google.golang.org/protobuf/proto"
)

// MarshalJSON renders m in Fathom's one JSON dialect, the one event frames use too:
// fields by their proto names, unpopulated ones included, enums by name, and 64-bit
// integers as JSON numbers (the proto3 JSON mapping would quote them). Map keys stay
// strings, as JSON requires. The gateway renders every grain answer with it.
func MarshalJSON(m proto.Message) ([]byte, error) {
	e := dialectEncoder{b: make([]byte, 0, 256)}
	if err := e.message(m.ProtoReflect(), false); err != nil {
		return nil, fmt.Errorf("render %T json: %w", m, err)
	}
	return e.b, nil
}
