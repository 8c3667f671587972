package persistence

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// castagnoli is the CRC-32C table of record checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C (Castagnoli) of parts, in order: the checksum every
// stored record of format 2 carries. Each part is preceded by its length, so moving
// bytes from one part to the next changes the sum.
func Checksum(parts ...[]byte) uint32 {
	var crc uint32
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		crc = crc32.Update(crc, castagnoli, n[:])
		crc = crc32.Update(crc, castagnoli, p)
	}
	return crc
}

// RecordChecksum is the checksum of the record at seq of stream: its stream id, seq,
// type and data (its time is not covered: PostgreSQL stores it in microseconds).
// Snapshots use the type "snapshot".
func RecordChecksum(stream string, seq uint64, typ string, data []byte) uint32 {
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	return Checksum([]byte(stream), s[:], []byte(typ), data)
}

// RecordError is a stored record that failed its check on read: its checksum does not
// match, or it cannot be decoded. It names the stream (for sessions, the session id)
// and the seq, and wraps ErrCorrupt.
type RecordError struct {
	// Stream is the record's stream id.
	Stream string
	// Seq is the record's seq (a snapshot's: the last event it includes).
	Seq uint64
	// Snapshot is true for a snapshot record.
	Snapshot bool
	// Reason says what failed ("checksum mismatch: stored 0x…, computed 0x…").
	Reason string
}

func (e *RecordError) Error() string {
	what := "seq"
	if e.Snapshot {
		what = "snapshot at seq"
	}
	return fmt.Sprintf("%v: session %s %s %d: %s", ErrCorrupt, e.Stream, what, e.Seq, e.Reason)
}

// Unwrap returns ErrCorrupt.
func (e *RecordError) Unwrap() error { return ErrCorrupt }

// VerifyChecksum returns a *RecordError when stored (the checksum kept with the record)
// is not want (the one computed from what was read).
func VerifyChecksum(stream string, seq uint64, snapshot bool, stored, want uint32) error {
	if stored == want {
		return nil
	}
	return &RecordError{Stream: stream, Seq: seq, Snapshot: snapshot, Reason: fmt.Sprintf("checksum mismatch: stored %#08x, computed %#08x", stored, want)}
}
