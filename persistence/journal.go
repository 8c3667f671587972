package persistence

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors returned by every Journal implementation. Compare with errors.Is.
var (
	// ErrConflict means the stream's last sequence number was not the expected one:
	// another writer appended first. Nothing of the failed append was stored.
	ErrConflict = errors.New("journal: expected sequence conflict")
	// ErrClosed is returned by calls made after Close.
	ErrClosed = errors.New("journal: closed")
	// ErrCorrupt means stored data could not be read back. The store is left untouched.
	ErrCorrupt = errors.New("journal: corrupt data")
	// ErrInvalid means the caller passed arguments the journal cannot store
	// (empty stream id, no records, a record without a type, a record over MaxEventBytes).
	ErrInvalid = errors.New("journal: invalid argument")
	// ErrNewerFormat means the journal, its schema or one of its records was written by
	// a newer version of Fathom than this binary: the journal is refused at start
	// (FormatError) and a record this binary cannot decode is reported as "written by a
	// newer version", never as corruption. The remedy is to upgrade the binary.
	ErrNewerFormat = errors.New("written by a newer version")
	// ErrEventTooLarge means a record's encoded event is over MaxEventBytes (an
	// *EventTooLargeError says which record). Nothing of the failed append was stored.
	ErrEventTooLarge = errors.New("journal: event too large")
)

// Format is the journal format this binary writes and the newest it reads. Both
// journals record the format of the newest binary that opened them for writing; a
// journal without a record is format 1.
//
//	1: records without checksums (Fathom before format versions).
//	2: every event and snapshot record carries a CRC-32C checksum, verified on read.
//	3: the events push_config_set and push_config_deleted (A2A push notifications);
//	   records are stored as in format 2.
const Format = 3

// FormatError is the error of opening a journal written by a newer format than Format.
// It wraps ErrNewerFormat.
type FormatError struct {
	// Journal names the journal (a file path, or "postgres").
	Journal string
	// Found is the format (or, for PostgreSQL, the schema migration) the journal holds.
	Found int
	// Known is the newest this binary reads.
	Known int
	// What is "format" or "schema migration".
	What string
}

func (e *FormatError) Error() string {
	if e.What == "schema migration" {
		return fmt.Sprintf("journal %s: written by a newer Fathom (schema migration %d is applied); this binary knows migrations up to %d: upgrade", e.Journal, e.Found, e.Known)
	}
	return fmt.Sprintf("journal %s: written by Fathom format %d; this binary reads up to %d: upgrade", e.Journal, e.Found, e.Known)
}

// Unwrap returns ErrNewerFormat.
func (e *FormatError) Unwrap() error { return ErrNewerFormat }

// MaxEventBytes bounds one record's Data (an encoded event): 1 MiB. Every
// implementation refuses a larger record with an *EventTooLargeError (ValidateAppend), so
// no event the journal holds is larger. What can be larger is kept elsewhere and named
// in the event: a tool result over the session's cap is stored as an artifact.
const MaxEventBytes = 1 << 20

// EventTooLargeError is the error of an append with a record over MaxEventBytes. It
// matches both ErrEventTooLarge and ErrInvalid with errors.Is.
type EventTooLargeError struct {
	// Stream is the stream appended to.
	Stream string
	// Index is the record's position in the append; Type its event type.
	Index int
	Type  string
	// Size is the record's Data length; Limit is MaxEventBytes, both in bytes.
	Size, Limit int
}

// Error implements error.
func (e *EventTooLargeError) Error() string {
	return fmt.Sprintf("%v: record %d (%s) of stream %s is %d bytes; the limit is %d", ErrEventTooLarge, e.Index, e.Type, e.Stream, e.Size, e.Limit)
}

// Unwrap returns ErrEventTooLarge and ErrInvalid.
func (e *EventTooLargeError) Unwrap() []error { return []error{ErrEventTooLarge, ErrInvalid} }

// Record is one stored event of a stream. Data is opaque to the journal; Fathom stores
// protobuf-encoded messages.Event envelopes in it.
type Record struct {
	// Seq is the record's position in its stream, starting at 1 with no gaps. A caller
	// that knows it (the session grain numbers its events when it decides them) sets it:
	// Append refuses a record whose Seq is not expectedSeq+1+i (ErrInvalid) and stores
	// nothing. Zero means "the next one".
	Seq uint64
	// Type is the event's snake_case name (e.g. "session_started"), kept beside the payload
	// so projections and operators can filter without decoding.
	Type string
	// Data is the encoded event.
	Data []byte
	// At is when the event was decided. Append fills a zero At with the current time.
	At time.Time
}

// Snapshot is a folded state of a stream as of sequence Seq (all events 1..Seq applied).
type Snapshot struct {
	// Seq is the last event included in the snapshot.
	Seq uint64
	// Data is the encoded state.
	Data []byte
	// At is when the snapshot was taken.
	At time.Time
}

// StreamInfo describes one stream for listings.
type StreamInfo struct {
	// ID is the stream id (for sessions, the session id).
	ID string
	// LastSeq is the sequence number of the newest record.
	LastSeq uint64
	// CreatedAt is the time of the first append; UpdatedAt of the newest one.
	CreatedAt, UpdatedAt time.Time
}

// Journal is Fathom's append-only event store: one totally ordered stream of records per
// stream id (a session, a sub-agent), with snapshots to bound replay.
//
// Implementations are safe for concurrent use. Appends to different streams must not
// serialise behind one another (group commit, not a global writer lock). An append is
// durable when it returns nil: callers acknowledge events only after that.
type Journal interface {
	// Append stores recs as the next records of stream, atomically (all or nothing, one
	// commit). expectedSeq is the sequence number of the stream's newest record as the
	// caller knows it (0 for a new stream); records get expectedSeq+1, expectedSeq+2, ...
	// If the stream's newest record is not expectedSeq, Append stores nothing and returns
	// an error wrapping ErrConflict. It returns the sequence number of the last stored record.
	Append(ctx context.Context, stream string, expectedSeq uint64, recs []Record) (uint64, error)

	// Load calls fn with every record of stream whose Seq is greater than afterSeq, in
	// order. It stops at the first error fn returns and returns it. An unknown stream
	// has no records: fn is never called and Load returns nil.
	Load(ctx context.Context, stream string, afterSeq uint64, fn func(Record) error) error

	// LastSeq returns the sequence number of the stream's newest record (0 if none).
	LastSeq(ctx context.Context, stream string) (uint64, error)

	// SaveSnapshot stores snap for stream. Snapshots are kept per Seq; saving a snapshot
	// at an existing Seq replaces it.
	SaveSnapshot(ctx context.Context, stream string, snap Snapshot) error

	// LoadSnapshot returns the newest snapshot of stream whose Seq is at most maxSeq
	// (use math.MaxUint64 for the newest). ok is false when there is none.
	LoadSnapshot(ctx context.Context, stream string, maxSeq uint64) (snap Snapshot, ok bool, err error)

	// ListStreams returns the streams whose id starts with prefix ("" for all), ordered
	// by id.
	ListStreams(ctx context.Context, prefix string) ([]StreamInfo, error)

	// Close releases the journal's resources. Calls after Close return ErrClosed.
	Close() error
}

// ValidateAppend checks the arguments of an Append the way every implementation must:
// a non-empty stream id and at least one record, each with a type, at most
// MaxEventBytes of data (else an *EventTooLargeError) and either no seq or the seq it
// will have after expectedSeq. The error wraps ErrInvalid.
func ValidateAppend(stream string, expectedSeq uint64, recs []Record) error {
	if stream == "" {
		return fmt.Errorf("%w: empty stream id", ErrInvalid)
	}
	if len(recs) == 0 {
		return fmt.Errorf("%w: no records", ErrInvalid)
	}
	for i, r := range recs {
		if r.Type == "" {
			return fmt.Errorf("%w: record %d has no type", ErrInvalid, i)
		}
		if len(r.Data) > MaxEventBytes {
			return &EventTooLargeError{Stream: stream, Index: i, Type: r.Type, Size: len(r.Data), Limit: MaxEventBytes}
		}
		if want := expectedSeq + 1 + uint64(i); r.Seq != 0 && r.Seq != want {
			return fmt.Errorf("%w: record %d carries seq %d, appended after seq %d it would be %d", ErrInvalid, i, r.Seq, expectedSeq, want)
		}
	}
	return nil
}
