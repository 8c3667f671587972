package core

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
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

// FoldVersion is the version of the fold (Apply): it grows whenever a release folds
// some stored events into a state other than the previous release did (an event's
// effect changed or a new field is derived). A snapshot records the FoldVersion that
// made it (EncodeState); Load trusts only a snapshot of this binary's FoldVersion and
// rebuilds any other from the events, which every version folds its own way.
const FoldVersion = 1

// snapshotStampField is the protobuf field number of a snapshot's stamp: (fold version,
// seq), appended after the state's own fields. SessionState must never define it. A
// build from before stamps keeps it as an unknown field: when it re-encodes a state it
// loaded from a stamped snapshot, the stamp names the seq it was loaded at, not the
// new snapshot's, and the snapshot counts as unstamped.
const snapshotStampField protowire.Number = 524287

// EncodeState converts a state to its snapshot bytes, stamped with FoldVersion and the
// state's seq.
func EncodeState(s *messages.SessionState) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode session state: %w", err)
	}
	stamp := protowire.AppendVarint(protowire.AppendVarint(nil, FoldVersion), s.GetSeq())
	b = protowire.AppendTag(b, snapshotStampField, protowire.BytesType)
	return protowire.AppendBytes(b, stamp), nil
}

// DecodeState decodes a snapshot made by EncodeState (or by an earlier build).
func DecodeState(b []byte) (*messages.SessionState, error) {
	s, _, err := decodeSnapshot(b)
	return s, err
}

// decodeSnapshot decodes a snapshot and returns the FoldVersion that made it: 0 for a
// snapshot without a stamp, or whose stamp names another seq than the state's (a build
// from before stamps re-encoded it).
func decodeSnapshot(b []byte) (*messages.SessionState, uint64, error) {
	s := &messages.SessionState{}
	if err := proto.Unmarshal(b, s); err != nil {
		return nil, 0, fmt.Errorf("%w: session snapshot: %v", persistence.ErrCorrupt, err)
	}
	if s.Commands == nil {
		s.Commands = map[string]uint64{}
	}
	var version uint64
	unknown := s.ProtoReflect().GetUnknown()
	var kept []byte
	for len(unknown) > 0 {
		num, typ, n := protowire.ConsumeField(unknown)
		if n < 0 {
			return nil, 0, fmt.Errorf("%w: session snapshot: %v", persistence.ErrCorrupt, protowire.ParseError(n))
		}
		field := unknown[:n]
		unknown = unknown[n:]
		if num != snapshotStampField || typ != protowire.BytesType {
			kept = append(kept, field...)
			continue
		}
		_, _, tn := protowire.ConsumeTag(field)
		stamp, _ := protowire.ConsumeBytes(field[tn:])
		v, vn := protowire.ConsumeVarint(stamp)
		seq, sn := protowire.ConsumeVarint(stamp[max(vn, 0):])
		if vn > 0 && sn > 0 && seq == s.GetSeq() {
			version = v
		}
	}
	s.ProtoReflect().SetUnknown(kept)
	return s, version, nil
}
