package core

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// EncodeEvents turns events into journal records (messages.EncodeEvent's envelopes,
// typed by their snake_case name), each carrying its event's seq: the journal checks it
// against the stream's head (persistence.Record.Seq).
func EncodeEvents(evs []*messages.Event) ([]persistence.Record, error) {
	recs := make([]persistence.Record, len(evs))
	for i, ev := range evs {
		data, err := messages.EncodeEvent(ev)
		if err != nil {
			return nil, err
		}
		recs[i] = persistence.Record{Seq: ev.GetSeq(), Type: ev.Type(), Data: data, At: ev.At()}
	}
	return recs, nil
}

// DecodeRecord decodes one journal record of a session stream into its event and checks
// that the envelope agrees with the record's position (messages.DecodeEvent). Errors
// wrap persistence.ErrCorrupt, or persistence.ErrNewerFormat for an event of a kind this
// binary does not know (messages.ErrUnknownEvent).
func DecodeRecord(r persistence.Record) (*messages.Event, error) {
	ev, err := messages.DecodeEvent(r.Seq, r.Data)
	if err != nil {
		return nil, StoredEventError(err)
	}
	return ev, nil
}

// StoredEventError wraps an error of messages.DecodeEvent with the journal's meaning:
// persistence.ErrNewerFormat for an event written by a newer version, else
// persistence.ErrCorrupt.
func StoredEventError(err error) error {
	if errors.Is(err, messages.ErrUnknownEvent) {
		return fmt.Errorf("%w: %w", persistence.ErrNewerFormat, err)
	}
	return fmt.Errorf("%w: %w", persistence.ErrCorrupt, err)
}

// EncodeState and DecodeState convert a state to and from its snapshot bytes.
func EncodeState(s *messages.SessionState) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode session state: %w", err)
	}
	return b, nil
}

// DecodeState decodes a snapshot made by EncodeState.
func DecodeState(b []byte) (*messages.SessionState, error) {
	s := &messages.SessionState{}
	if err := proto.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("%w: session snapshot: %v", persistence.ErrCorrupt, err)
	}
	if s.Commands == nil {
		s.Commands = map[string]uint64{}
	}
	return s, nil
}
