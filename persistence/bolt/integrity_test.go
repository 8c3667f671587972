package bolt_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/bolt"
)

// needle is the unique payload of one record, so a test can find its bytes in the file.
func needle(stream string, seq uint64) []byte {
	return []byte(fmt.Sprintf("<needle %s #%d>", stream, seq) + strings.Repeat(".", 100))
}

// writeNeedles fills a journal with 4 sessions of 60 events each (and a snapshot of
// each at seq 30), every event's data its needle.
func writeNeedles(t *testing.T, path string) {
	t.Helper()
	j, err := bolt.Open(path, bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for s := 0; s < 4; s++ {
		stream := fmt.Sprintf("s-%d", s)
		for i := uint64(0); i < 60; i++ {
			if _, err := j.Append(ctx, stream, i, []persistence.Record{{Type: "step_completed", Data: needle(stream, i+1)}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.SaveSnapshot(ctx, stream, persistence.Snapshot{Seq: 30, Data: []byte("snapshot " + stream)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// smashAt overwrites n bytes of the file at off with a pattern and returns the content.
func smashAt(t *testing.T, path string, off, n int) []byte {
	t.Helper()
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := off; i < off+n && i < len(content); i++ {
		content[i] ^= 0x5a
	}
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return content
}

func offsetOf(t *testing.T, path string, b []byte) int {
	t.Helper()
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := bytes.Index(content, b)
	if off < 0 {
		t.Fatalf("%q not found in %s", b, path)
	}
	return off
}

// TestDamagedRecordIsRefusedAtOpen: one event's bytes changed inside an otherwise
// consistent page (bbolt's own check passes) are found by the open check, which names
// the session and seq and writes nothing.
func TestDamagedRecordIsRefusedAtOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	writeNeedles(t, path)
	content := smashAt(t, path, offsetOf(t, path, needle("s-2", 17))+3, 8)
	for _, readOnly := range []bool{false, true} {
		j, err := bolt.Open(path, bolt.Options{ReadOnly: readOnly})
		if err == nil {
			_ = j.Close()
			t.Fatalf("Open(ReadOnly=%v) accepted a journal with a damaged record", readOnly)
		}
		var re *persistence.RecordError
		if !errors.As(err, &re) || re.Stream != "s-2" || re.Seq != 17 || !errors.Is(err, persistence.ErrCorrupt) ||
			!strings.Contains(err.Error(), "session s-2 seq 17") || !strings.Contains(err.Error(), "fathom journal check --repair") {
			t.Fatalf("Open(ReadOnly=%v) = %v, want a RecordError naming session s-2 seq 17 and the repair command", readOnly, err)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, content) {
			t.Fatalf("Open(ReadOnly=%v) modified the damaged file", readOnly)
		}
	}
}

// TestDamagedRecordIsRefusedOnRead: with the open check skipped, a read of the damaged
// record fails with its session and seq instead of returning the changed bytes.
func TestDamagedRecordIsRefusedOnRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	writeNeedles(t, path)
	smashAt(t, path, offsetOf(t, path, needle("s-1", 5))+3, 1)
	smashAt(t, path, offsetOf(t, path, []byte("snapshot s-3"))+2, 1)
	j, err := bolt.Open(path, bolt.Options{CheckMaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	var re *persistence.RecordError
	err = j.Load(ctx, "s-1", 0, func(persistence.Record) error { return nil })
	if !errors.As(err, &re) || re.Stream != "s-1" || re.Seq != 5 {
		t.Fatalf("Load of s-1 = %v, want a RecordError at seq 5", err)
	}
	_, _, err = j.LoadSnapshot(ctx, "s-3", 100)
	if !errors.As(err, &re) || re.Stream != "s-3" || re.Seq != 30 || !re.Snapshot {
		t.Fatalf("LoadSnapshot of s-3 = %v, want a RecordError for the snapshot at 30", err)
	}
	if err := j.Load(ctx, "s-2", 0, func(persistence.Record) error { return nil }); err != nil {
		t.Fatalf("Load of the intact s-2 = %v", err)
	}
}

// TestDamagedRecordInALargeFileRefusesWrites: above CheckMaxBytes the check runs in the
// background; when it finds the damaged record, writes stay refused with its error.
func TestDamagedRecordInALargeFileRefusesWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	writeNeedles(t, path)
	content := smashAt(t, path, offsetOf(t, path, needle("s-0", 40))+3, 4)
	j, err := bolt.Open(path, bolt.Options{CheckMaxBytes: 4096, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = j.Append(ctx, "s-new", 0, []persistence.Record{{Type: "e"}})
		if !errors.Is(err, bolt.ErrChecking) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var re *persistence.RecordError
	if !errors.As(err, &re) || re.Stream != "s-0" || re.Seq != 40 {
		t.Fatalf("Append after the background check = %v, want the check's RecordError for s-0 seq 40", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, content) {
		t.Fatal("the journal was written to after its check failed")
	}
}

// TestSmashedBytesAnywhereAreRefusedOrHarmless: 64 bytes smashed at positions across the
// whole file either make Open refuse the file, or (free or unused space) leave every
// event and snapshot readable exactly as written. None is silently different.
func TestSmashedBytesAnywhereAreRefusedOrHarmless(t *testing.T) {
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean.db")
	writeNeedles(t, clean)
	orig, err := os.ReadFile(clean)
	if err != nil {
		t.Fatal(err)
	}
	want := dump(t, clean)
	refused, harmless := 0, 0
	for off := 0; off+64 <= len(orig); off += len(orig) / 97 {
		path := filepath.Join(dir, fmt.Sprintf("smashed-%d.db", off))
		if err := os.WriteFile(path, orig, 0o600); err != nil {
			t.Fatal(err)
		}
		smashAt(t, path, off, 64)
		j, err := bolt.Open(path, bolt.Options{NoSync: true, Timeout: time.Second})
		if err != nil {
			if !errors.Is(err, persistence.ErrCorrupt) {
				t.Fatalf("smash at %d: Open = %v, want ErrCorrupt", off, err)
			}
			refused++
			continue
		}
		_ = j.Close()
		if got := dump(t, path); got != want {
			t.Fatalf("smash at %d passed the open check but the journal reads differently", off)
		}
		harmless++
	}
	t.Logf("%d positions refused, %d harmless", refused, harmless)
}

// dump renders every stream's events and newest snapshot.
func dump(t *testing.T, path string) string {
	t.Helper()
	j, err := bolt.Open(path, bolt.Options{ReadOnly: true, CheckMaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	var b strings.Builder
	streams, err := j.ListStreams(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		fmt.Fprintf(&b, "%s %d\n", s.ID, s.LastSeq)
		if err := j.Load(ctx, s.ID, 0, func(r persistence.Record) error {
			fmt.Fprintf(&b, " %d %s %q %d\n", r.Seq, r.Type, r.Data, r.At.UnixNano())
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		snap, ok, err := j.LoadSnapshot(ctx, s.ID, 1<<62)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, " snap %v %d %q\n", ok, snap.Seq, snap.Data)
	}
	return b.String()
}

// TestNewerFormatIsRefused: a journal stamped by a newer format is refused at open,
// read-write and read-only, with the upgrade message, and left as it was.
func TestNewerFormatIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	writeNeedles(t, path)
	if err := bolt.StampFormat(path, persistence.Format+1); err != nil {
		t.Fatal(err)
	}
	content, _ := os.ReadFile(path)
	for _, readOnly := range []bool{false, true} {
		j, err := bolt.Open(path, bolt.Options{ReadOnly: readOnly})
		if err == nil {
			_ = j.Close()
			t.Fatalf("Open(ReadOnly=%v) accepted a journal of a newer format", readOnly)
		}
		msg := fmt.Sprintf("written by Fathom format %d; this binary reads up to %d: upgrade", persistence.Format+1, persistence.Format)
		if !errors.Is(err, persistence.ErrNewerFormat) || !strings.Contains(err.Error(), msg) {
			t.Fatalf("Open(ReadOnly=%v) = %v, want ErrNewerFormat with %q", readOnly, err, msg)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, content) {
			t.Fatalf("Open(ReadOnly=%v) modified the file", readOnly)
		}
	}
}

// TestFormatOneJournalStillOpens: a journal written before formats (no stamp, records
// and metadata without checksums) opens, reads back, takes appends that carry
// checksums, and is stamped with the current format; its old records stay readable.
func TestFormatOneJournalStillOpens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		streams, _ := tx.CreateBucket([]byte("streams"))
		evs, _ := tx.CreateBucket([]byte("events"))
		snaps, _ := tx.CreateBucket([]byte("snapshots"))
		ev, _ := evs.CreateBucket([]byte("old"))
		sn, _ := snaps.CreateBucket([]byte("old"))
		for seq := uint64(1); seq <= 3; seq++ {
			if err := ev.Put(binary.BigEndian.AppendUint64(nil, seq), legacyRecord(at, "e", fmt.Sprintf("old %d", seq))); err != nil {
				return err
			}
		}
		if err := sn.Put(binary.BigEndian.AppendUint64(nil, 2), legacyRecord(at, "snapshot", "old state")); err != nil {
			return err
		}
		m := binary.BigEndian.AppendUint64(nil, 3)
		m = binary.BigEndian.AppendUint64(m, uint64(at.UnixNano()))
		m = binary.BigEndian.AppendUint64(m, uint64(at.UnixNano()))
		return streams.Put([]byte("old"), m)
	}); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()

	j, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("Open of a format 1 journal: %v", err)
	}
	ctx := context.Background()
	if _, err := j.Append(ctx, "old", 3, []persistence.Record{{Type: "e", Data: []byte("new 4")}}); err != nil {
		t.Fatal(err)
	}
	_ = j.Close()
	if err := bolt.StampFormat(path, 0); err != nil {
		t.Fatal(err)
	} // prove Open restamps: 0 is below every format
	j, err = bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer j.Close()
	var got []string
	if err := j.Load(ctx, "old", 0, func(r persistence.Record) error { got = append(got, string(r.Data)); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "old 1,old 2,old 3,new 4" {
		t.Fatalf("events = %q", got)
	}
	if snap, ok, err := j.LoadSnapshot(ctx, "old", 10); err != nil || !ok || string(snap.Data) != "old state" {
		t.Fatalf("LoadSnapshot = %+v %v %v", snap, ok, err)
	}
}

func legacyRecord(at time.Time, typ, data string) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(at.UnixNano()))
	b = binary.BigEndian.AppendUint16(b, uint16(len(typ)))
	return append(append(b, typ...), data...)
}

// TestRepairQuarantinesTheDamagedStreamsAndKeepsTheRest: Repair leaves the damaged
// stream out (listed in the check's quarantine), keeps every other stream readable as it
// was, and keeps the original file unchanged beside the journal.
func TestRepairQuarantinesTheDamagedStreamsAndKeepsTheRest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	writeNeedles(t, path)
	want := dump(t, path)
	content := smashAt(t, path, offsetOf(t, path, needle("s-1", 12))+3, 4)
	rep, err := bolt.Repair(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Quarantine) != 1 || rep.Quarantine[0].Stream != "s-1" || rep.Quarantine[0].Seq != 12 || rep.Kept != 3 {
		t.Fatalf("repair: quarantine %v, kept %d; want s-1 at 12 and 3 kept", rep.Quarantine, rep.Kept)
	}
	if kept, _ := os.ReadFile(rep.Backup); !bytes.Equal(kept, content) {
		t.Fatal("the original was not kept unchanged")
	}
	check, err := bolt.Check(path, bolt.Options{})
	if err != nil || !check.OK() || check.Quarantined["s-1"] == "" {
		t.Fatalf("check after repair: %+v, %v", check, err)
	}
	got := dump(t, path)
	if strings.Contains(got, "s-1 ") {
		t.Fatalf("repaired journal:\n%s", got)
	}
	for _, s := range []string{"s-0", "s-2", "s-3"} {
		i := strings.Index(want, s+" 60\n")
		block := want[i : i+strings.Index(want[i:], " snap ")]
		if !strings.Contains(got, block) {
			t.Fatalf("stream %s changed by the repair", s)
		}
	}
	j, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("open after repair: %v", err)
	}
	defer j.Close()
	if _, err := j.Append(context.Background(), "s-0", 60, []persistence.Record{{Type: "e"}}); err != nil {
		t.Fatalf("append after repair: %v", err)
	}
}

// TestEverySmashedPageIsRefusedByTheCheck: whichever leaf or branch page of a journal is
// overwritten with garbage, Open refuses it as the consistency check's finding (naming
// the file and the check, with the remedy), also when bbolt meets the page while opening
// and asserts before the check reaches it.
func TestEverySmashedPageIsRefusedByTheCheck(t *testing.T) {
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean.db")
	writeNeedles(t, clean)
	db, err := bbolt.Open(clean, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := db.Info().PageSize
	var victims []int
	err = db.View(func(tx *bbolt.Tx) error {
		for id := 2; id < int(tx.Size())/pageSize; id++ {
			if p, err := tx.Page(id); err == nil && p != nil && (p.Type == "leaf" || p.Type == "branch") {
				victims = append(victims, id)
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil || len(victims) < 3 {
		t.Fatalf("pages to smash: %v (err %v)", victims, err)
	}
	content, err := os.ReadFile(clean)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range victims {
		path := filepath.Join(dir, fmt.Sprintf("smashed-%d.db", id))
		c := bytes.Clone(content)
		copy(c[id*pageSize:(id+1)*pageSize], bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef, 0x17}, pageSize/5+1))
		if err := os.WriteFile(path, c, 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := bolt.Open(path, bolt.Options{ReadOnly: true})
		if err == nil {
			_ = j.Close()
			t.Errorf("page %d smashed: Open accepted the journal", id)
			continue
		}
		if msg := err.Error(); !errors.Is(err, persistence.ErrCorrupt) || !strings.Contains(msg, path) || !strings.Contains(msg, "consistency check") {
			t.Errorf("page %d smashed: Open = %v, want ErrCorrupt naming the file and the consistency check", id, err)
		}
	}
}
