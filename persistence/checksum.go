package persistence

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
	"unsafe"
)

// castagnoli is the CRC-32C table of record checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C (Castagnoli) of parts, in order: the checksum every
// stored record of format 2 carries. Each part is preceded by its length, so moving
// bytes from one part to the next changes the sum.
func Checksum(parts ...[]byte) uint32 {
	n := scratch.Get().(*[8]byte)
	defer scratch.Put(n)
	var crc uint32
	for _, p := range parts {
		crc = checksumPart(crc, n, p)
	}
	return crc
}

// scratch holds the 8-byte buffers checksums encode lengths and seqs in: crc32 keeps
// nothing it is given, but the compiler cannot see that, so a buffer on the stack would
// move to the heap on every checksum.
var scratch = sync.Pool{New: func() any { return new([8]byte) }}

// checksumPart extends crc with one part of Checksum: its length (encoded in n), then
// its bytes.
func checksumPart(crc uint32, n *[8]byte, p []byte) uint32 {
	binary.BigEndian.PutUint64(n[:], uint64(len(p)))
	crc = crc32.Update(crc, castagnoli, n[:])
	return crc32.Update(crc, castagnoli, p)
}

// stringBytes is s's bytes without a copy, for reading only (crc32 never writes them).
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// RecordChecksum is the checksum of the record at seq of stream: its stream id, seq,
// type and data (its time is not covered: PostgreSQL stores it in microseconds).
// Snapshots use the type "snapshot". It is Checksum(stream, seq as 8 bytes big-endian,
// type, data), computed without copying the strings or boxing the parts: it runs on
// every append and every read of a record.
func RecordChecksum(stream string, seq uint64, typ string, data []byte) uint32 {
	n := scratch.Get().(*[8]byte)
	defer scratch.Put(n)
	crc := checksumPart(0, n, stringBytes(stream))
	binary.BigEndian.PutUint64(n[:], 8) // the seq's part: its length, then its bytes
	crc = crc32.Update(crc, castagnoli, n[:])
	binary.BigEndian.PutUint64(n[:], seq)
	crc = crc32.Update(crc, castagnoli, n[:])
	crc = checksumPart(crc, n, stringBytes(typ))
	return checksumPart(crc, n, data)
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
