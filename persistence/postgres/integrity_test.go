package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/postgres"
)

// TestDamagedRowIsRefusedOnRead: an event or snapshot changed in the database after it
// was written fails its checksum on read with a RecordError naming the stream and seq;
// rows from before checksums (NULL) are read as they are.
func TestDamagedRowIsRefusedOnRead(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	j := open(t, dsn)
	defer j.Close()
	ctx := context.Background()
	for _, s := range []string{"damaged", "legacy"} {
		if _, err := j.Append(ctx, s, 0, []persistence.Record{{Type: "a", Data: []byte("one")}, {Type: "b", Data: []byte("two")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(ctx, s, 2, []persistence.Record{{Type: "c", Data: []byte("three")}}); err != nil {
			t.Fatal(err)
		}
		if err := j.SaveSnapshot(ctx, s, persistence.Snapshot{Seq: 2, Data: []byte("state")}); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`UPDATE fathom_event_batches SET data[2] = 'tw0' WHERE stream_id = 'damaged' AND first_seq = 1`,
		`UPDATE fathom_snapshots SET data = 'st4te' WHERE stream_id = 'damaged'`,
		`UPDATE fathom_event_batches SET crcs = NULL, data[2] = 'old' WHERE stream_id = 'legacy' AND first_seq = 1`,
		`UPDATE fathom_snapshots SET crc = NULL, data = 'old state' WHERE stream_id = 'legacy'`,
	} {
		if _, err := j.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var re *persistence.RecordError
	err := j.Load(ctx, "damaged", 0, func(persistence.Record) error { return nil })
	if !errors.As(err, &re) || re.Stream != "damaged" || re.Seq != 2 || !errors.Is(err, persistence.ErrCorrupt) || !strings.Contains(err.Error(), "session damaged seq 2") {
		t.Fatalf("Load of the damaged stream = %v, want a RecordError at seq 2", err)
	}
	if err := j.Load(ctx, "damaged", 2, func(persistence.Record) error { return nil }); err != nil {
		t.Fatalf("Load after the damaged seq = %v (its batch is not read)", err)
	}
	if _, _, err := j.LoadSnapshot(ctx, "damaged", 10); !errors.As(err, &re) || re.Seq != 2 || !re.Snapshot {
		t.Fatalf("LoadSnapshot of the damaged stream = %v, want a RecordError for the snapshot at 2", err)
	}
	var got []string
	if err := j.Load(ctx, "legacy", 0, func(r persistence.Record) error { got = append(got, string(r.Data)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[one old three]" {
		t.Fatalf("legacy stream = %v", got)
	}
	if snap, ok, err := j.LoadSnapshot(ctx, "legacy", 10); err != nil || !ok || string(snap.Data) != "old state" {
		t.Fatalf("legacy snapshot = %q %v %v", snap.Data, ok, err)
	}
}

// TestNewerSchemaOrFormatIsRefused: a database with a migration this binary does not know,
// or stamped with a newer journal format, is refused by Open with the upgrade message.
func TestNewerSchemaOrFormatIsRefused(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	j := open(t, dsn)
	ctx := context.Background()
	var format int
	if err := j.Pool().QueryRow(ctx, "SELECT format FROM fathom_format").Scan(&format); err != nil || format != persistence.Format {
		t.Fatalf("format = %d, %v; want %d", format, err, persistence.Format)
	}
	if _, err := j.Pool().Exec(ctx, "INSERT INTO fathom_schema_migrations (version, name) VALUES (99, '0099_future.sql')"); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(ctx, dsn, postgres.Options{})
	if !errors.Is(err, persistence.ErrNewerFormat) || !strings.Contains(err.Error(), "schema migration 99 is applied") || !strings.Contains(err.Error(), "upgrade") {
		t.Fatalf("Open with migration 99 applied = %v, want ErrNewerFormat naming migration 99", err)
	}
	if _, err := j.Pool().Exec(ctx, "DELETE FROM fathom_schema_migrations WHERE version = 99"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Pool().Exec(ctx, "UPDATE fathom_format SET format = $1", persistence.Format+1); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(ctx, dsn, postgres.Options{})
	want := fmt.Sprintf("written by Fathom format %d; this binary reads up to %d: upgrade", persistence.Format+1, persistence.Format)
	if !errors.Is(err, persistence.ErrNewerFormat) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open of a newer format = %v, want %q", err, want)
	}
	_ = j.Close()
}
