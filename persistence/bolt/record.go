package bolt

import (
	"encoding/binary"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/fathom-agents/fathom/persistence"
)

// Stored forms (format 2, persistence.Format).
//
// A record (an event, or a snapshot) is
//
//	0xC5 | crc(4) | at(8) | len(type)(2) | type | data
//
// where crc is the CRC-32C of the stream id, the record's key (its big-endian seq) and
// everything after the checksum (persistence.Checksum). Format 1 records have no magic
// byte and no checksum: at(8) | len(type)(2) | type | data. Their first byte is the top
// byte of a Unix nanosecond time, below 0x80 for any time from 1970 to 2262, so it never
// reads as the magic 0xC5 (a time before 1830 would).
//
// A stream's metadata is last(8) | created(8) | updated(8) | strictFrom(8) | crc(4), crc
// covering the stream id and the 32 bytes before it. Every record of the stream at or
// after seq strictFrom (events and snapshots) must carry a checksum: a stream created by
// format 2 has strictFrom 1; a format 1 stream gets strictFrom = its head + 1 with its
// first format 2 append, so its old records stay readable and a damaged magic byte in a
// newer one is still caught. Format 1 metadata is the first 24 bytes alone (strictFrom
// unknown: no record of the stream is required to carry a checksum).

const (
	recordMagic   = 0xC5
	recordHeader  = 1 + 4 + 8 + 2 // magic, crc, at, len(type)
	legacyHeader  = 8 + 2
	metaLegacyLen = 24
	metaLen       = 36
)

type meta struct {
	last             uint64
	created, updated time.Time
	// strictFrom is the first seq whose records must carry a checksum; 0 means none
	// must (a format 1 stream not yet appended to by format 2).
	strictFrom uint64
}

func (m meta) strict(seq uint64) bool { return m.strictFrom != 0 && seq >= m.strictFrom }

func encodeMeta(stream string, m meta) []byte {
	b := make([]byte, metaLen)
	binary.BigEndian.PutUint64(b, m.last)
	binary.BigEndian.PutUint64(b[8:], uint64(m.created.UnixNano()))
	binary.BigEndian.PutUint64(b[16:], uint64(m.updated.UnixNano()))
	binary.BigEndian.PutUint64(b[24:], m.strictFrom)
	binary.BigEndian.PutUint32(b[32:], persistence.Checksum([]byte(stream), b[:32]))
	return b
}

// decodeMeta decodes the metadata of stream; exists is false when b is nil. Metadata
// that fails its checksum (or has a length neither format writes) is a
// *persistence.RecordError at the stream's seq 0.
func decodeMeta(stream string, b []byte) (m meta, exists bool, err error) {
	if b == nil {
		return meta{}, false, nil
	}
	if len(b) != metaLegacyLen && len(b) != metaLen {
		return meta{}, true, &persistence.RecordError{Stream: stream, Reason: fmt.Sprintf("stream metadata is %d bytes", len(b))}
	}
	if len(b) == metaLen {
		if err := persistence.VerifyChecksum(stream, 0, false, binary.BigEndian.Uint32(b[32:]), persistence.Checksum([]byte(stream), b[:32])); err != nil {
			return meta{}, true, fmt.Errorf("stream metadata: %w", err)
		}
		m.strictFrom = binary.BigEndian.Uint64(b[24:])
	}
	m.last = binary.BigEndian.Uint64(b)
	m.created = time.Unix(0, int64(binary.BigEndian.Uint64(b[8:]))).UTC()
	m.updated = time.Unix(0, int64(binary.BigEndian.Uint64(b[16:]))).UTC()
	return m, true, nil
}

// getMeta reads stream's metadata in tx.
func getMeta(tx *bbolt.Tx, stream string) (meta, bool, error) {
	return decodeMeta(stream, tx.Bucket(bucketStreams).Get([]byte(stream)))
}

func seqKey(seq uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

// encodeRecord lays out r, the record of stream at key, in the format 2 form.
func encodeRecord(stream string, key []byte, r persistence.Record) []byte {
	b := make([]byte, recordHeader+len(r.Type)+len(r.Data))
	b[0] = recordMagic
	binary.BigEndian.PutUint64(b[5:], uint64(r.At.UnixNano()))
	binary.BigEndian.PutUint16(b[13:], uint16(len(r.Type)))
	copy(b[recordHeader:], r.Type)
	copy(b[recordHeader+len(r.Type):], r.Data)
	binary.BigEndian.PutUint32(b[1:], persistence.Checksum([]byte(stream), key, b[5:]))
	return b
}

// decodeRecord verifies and decodes the record of stream stored at key k with value v,
// copying out of bbolt's mmap (the slices are only valid inside the tx). strict says the
// record must carry a checksum. Errors are *persistence.RecordError.
func decodeRecord(stream string, k, v []byte, strict, snapshot bool) (persistence.Record, error) {
	if len(k) != 8 {
		return persistence.Record{}, &persistence.RecordError{Stream: stream, Snapshot: snapshot, Reason: fmt.Sprintf("key of %d bytes", len(k))}
	}
	seq := binary.BigEndian.Uint64(k)
	bad := func(format string, args ...any) error {
		return &persistence.RecordError{Stream: stream, Seq: seq, Snapshot: snapshot, Reason: fmt.Sprintf(format, args...)}
	}
	body := v
	switch {
	case len(v) >= recordHeader && v[0] == recordMagic:
		if err := persistence.VerifyChecksum(stream, seq, snapshot, binary.BigEndian.Uint32(v[1:]), persistence.Checksum([]byte(stream), k, v[5:])); err != nil {
			return persistence.Record{}, err
		}
		body = v[5:]
	case strict:
		return persistence.Record{}, bad("record has no checksum (its stream's records from seq on must carry one)")
	}
	if len(body) < legacyHeader {
		return persistence.Record{}, bad("short record")
	}
	tl := int(binary.BigEndian.Uint16(body[8:]))
	if len(body) < legacyHeader+tl {
		return persistence.Record{}, bad("record type overruns value")
	}
	data := make([]byte, len(body)-legacyHeader-tl)
	copy(data, body[legacyHeader+tl:])
	return persistence.Record{
		Seq:  seq,
		Type: string(body[legacyHeader : legacyHeader+tl]),
		Data: data,
		At:   time.Unix(0, int64(binary.BigEndian.Uint64(body))).UTC(),
	}, nil
}
