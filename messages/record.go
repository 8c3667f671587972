package messages

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// ErrBadRecord means the bytes of a journal record are not the event the record's
// position says they are: they do not decode, or they hold another seq. Callers that
// know the journal wrap it with the journal's own corruption error.
var ErrBadRecord = errors.New("bad event record")

// EncodeEvent returns the bytes a journal record of a session stream holds for ev: the
// protobuf encoding of the whole envelope. It is the one encoder of event records
// (the grain's appends); DecodeEvent is its inverse.
func EncodeEvent(ev *Event) ([]byte, error) {
	data, err := proto.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode event %d (%s): %w", ev.GetSeq(), ev.Type(), err)
	}
	return data, nil
}

// DecodeEvent decodes the bytes of the journal record at seq and checks that the
// envelope agrees with that position. It is the one decoder of event records, used by
// the grain's recovery and by the live feed's catch-up. Errors wrap ErrBadRecord.
func DecodeEvent(seq uint64, data []byte) (*Event, error) {
	ev := &Event{}
	if err := proto.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("%w: record %d: %v", ErrBadRecord, seq, err)
	}
	if ev.GetSeq() != seq {
		return nil, fmt.Errorf("%w: record %d holds event seq %d", ErrBadRecord, seq, ev.GetSeq())
	}
	return ev, nil
}
