package persistence_test

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/persistence"
)

// TestRecordChecksumIsChecksumOfItsParts: a record's checksum is Checksum of its stream,
// seq (8 bytes, big-endian), type and data, the sum stored records carry; computing it
// allocates nothing (it runs on every append and every read).
func TestRecordChecksumIsChecksumOfItsParts(t *testing.T) {
	long := strings.Repeat("s", 100) // beyond the 32 bytes a string conversion keeps on the stack
	for _, c := range []struct {
		stream, typ string
		seq         uint64
		data        []byte
	}{
		{"s-1", "llm_requested", 7, []byte("payload")},
		{long, "snapshot", 1 << 40, nil},
		{"", "", 0, []byte{}},
	} {
		var seq [8]byte
		binary.BigEndian.PutUint64(seq[:], c.seq)
		want := persistence.Checksum([]byte(c.stream), seq[:], []byte(c.typ), c.data)
		if got := persistence.RecordChecksum(c.stream, c.seq, c.typ, c.data); got != want {
			t.Fatalf("RecordChecksum(%.10q, %d, %q) = %#x, Checksum of its parts %#x", c.stream, c.seq, c.typ, got, want)
		}
	}
	// Moving a byte from the stream to the type changes the sum (the parts' lengths count).
	if persistence.RecordChecksum("ab", 1, "c", nil) == persistence.RecordChecksum("a", 1, "bc", nil) {
		t.Fatal("the parts' boundaries do not count")
	}
	if raceDetector {
		return // sync.Pool drops buffers under the race detector
	}
	data := []byte(strings.Repeat("x", 4096))
	if n := testing.AllocsPerRun(100, func() { persistence.RecordChecksum(long, 9, "tool_result", data) }); n != 0 {
		t.Fatalf("RecordChecksum allocates %.1f times, want 0", n)
	}
}
