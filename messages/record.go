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

// ErrUnknownEvent means a stored event's payload is of a kind this binary does not know:
// it was written by a newer version of Fathom (a payload field added after this binary
// was built). It is not corruption: the remedy is to upgrade. Callers that know the
// journal wrap it with persistence.ErrNewerFormat.
var ErrUnknownEvent = errors.New("event of a kind this binary does not know")

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
// the grain's recovery and by the live feed's catch-up. Errors wrap ErrBadRecord, or
// ErrUnknownEvent for an envelope whose payload is not one this binary knows (it holds
// the payload only as an unknown field).
func DecodeEvent(seq uint64, data []byte) (*Event, error) {
	ev := &Event{}
	if err := proto.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("%w: record %d: %v", ErrBadRecord, seq, err)
	}
	if ev.GetSeq() != seq {
		return nil, fmt.Errorf("%w: record %d holds event seq %d", ErrBadRecord, seq, ev.GetSeq())
	}
	if ev.payloadField() == nil && len(ev.ProtoReflect().GetUnknown()) > 0 {
		return nil, fmt.Errorf("%w: seq %d (upgrade this binary to read it)", ErrUnknownEvent, seq)
	}
	return ev, nil
}
