package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/migrations"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/journaltest"
	"github.com/fathom-agents/fathom/persistence/postgres"
)

func open(t testing.TB, dsn string) *postgres.Journal {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := postgres.Open(ctx, dsn, postgres.Options{Facts: journaltest.Facts})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestConformance(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	journaltest.Run(t, func(t *testing.T) persistence.Journal { return open(t, dsn) })
}

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() { errs <- postgres.MigrateDSN(context.Background(), dsn) }()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	j := open(t, dsn)
	defer j.Close()
	var n int
	if err := j.Pool().QueryRow(context.Background(), "SELECT count(*) FROM fathom_schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n < 1 {
		t.Fatalf("%d migrations recorded", n)
	}
}

func TestUnreachableServerFailsClearlyWithoutPassword(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = postgres.Open(ctx, "postgres://fathom:s3cretpw@"+addr+"/db?sslmode=disable", postgres.Options{ConnectTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "postgres: connect to "+addr) {
		t.Fatalf("Open = %v", err)
	}
	if strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("error leaks the password: %v", err)
	}
	if _, err := postgres.Open(ctx, "postgres://u:s3cretpw@host:notaport/db", postgres.Options{}); err == nil || strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("bad DSN: %v", err)
	}
}

func TestClosedJournal(t *testing.T) {
	j := open(t, testenv.PostgresDSN(t))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(context.Background(), "s", 0, []persistence.Record{{Type: "x"}}); !errors.Is(err, persistence.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}

// TestUpgradeFromRowPerEventKeepsEvents builds a database on the first schema (one row
// per event, migration 0001 only), stores events in it, then migrates to the current
// schema: every event survives with its seq, type, data and time, the stream goes on
// from its head, and the fathom_events view shows the same rows.
func TestUpgradeFromRowPerEventKeepsEvents(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	v1, err := fs.ReadFile(migrations.FS, "0001_journal.sql")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, q := range []string{
		string(v1),
		`CREATE TABLE fathom_schema_migrations (version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
		`INSERT INTO fathom_schema_migrations (version, name) VALUES (1, '0001_journal.sql')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for seq := 1; seq <= 3; seq++ {
		if _, err := conn.Exec(ctx, `INSERT INTO fathom_events (stream_id, seq, type, data, at) VALUES ('old', $1, $2, $3, $4)`,
			seq, fmt.Sprintf("type-%d", seq), []byte(fmt.Sprintf("data-%d", seq)), at.Add(time.Duration(seq)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	j := open(t, dsn) // applies the remaining migrations
	defer j.Close()
	var got []persistence.Record
	if err := j.Load(ctx, "old", 0, func(r persistence.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("after the upgrade the stream has %d events, want 3", len(got))
	}
	for i, r := range got {
		seq := i + 1
		if r.Seq != uint64(seq) || r.Type != fmt.Sprintf("type-%d", seq) || string(r.Data) != fmt.Sprintf("data-%d", seq) ||
			!r.At.Equal(at.Add(time.Duration(seq)*time.Second)) {
			t.Fatalf("event %d after the upgrade = %+v", seq, r)
		}
	}
	if _, err := j.Append(ctx, "old", 2, []persistence.Record{{Type: "x", Data: []byte("x")}}); !errors.Is(err, persistence.ErrConflict) {
		t.Fatalf("append behind the migrated head: %v, want ErrConflict", err)
	}
	if last, err := j.Append(ctx, "old", 3, []persistence.Record{{Type: "x", Data: []byte("x")}, {Type: "y", Data: []byte("y")}}); err != nil || last != 5 {
		t.Fatalf("append at the migrated head = %d, %v", last, err)
	}
	var n, maxSeq int64
	if err := j.Pool().QueryRow(ctx, `SELECT count(*), max(seq) FROM fathom_events WHERE stream_id = 'old'`).Scan(&n, &maxSeq); err != nil {
		t.Fatal(err)
	}
	if n != 5 || maxSeq != 5 {
		t.Fatalf("fathom_events view: %d rows up to seq %d, want 5 up to 5", n, maxSeq)
	}
}

// TestFailedSnapshotLeavesNoOpenTransaction: a snapshot is one batch (BEGIN, its insert,
// COMMIT). When the insert fails the rest of the batch is skipped and its connection is
// still inside the aborted transaction: the error must say so, and with one pooled
// connection the next snapshot and append must work (the pool discards that connection).
func TestFailedSnapshotLeavesNoOpenTransaction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := postgres.Open(ctx, testenv.PostgresDSN(t), postgres.Options{Facts: journaltest.Facts, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	// A stream id with a NUL byte is refused by PostgreSQL's text type.
	if err := j.SaveSnapshot(ctx, "bad\x00stream", persistence.Snapshot{Seq: 1, Data: []byte("x")}); err == nil ||
		!strings.Contains(err.Error(), "save snapshot of") {
		t.Fatalf("snapshot of an invalid stream id: %v", err)
	}
	stream := fmt.Sprintf("snap-after-failure-%d", time.Now().UnixNano())
	if _, err := j.Append(ctx, stream, 0, []persistence.Record{{Type: "x", Data: []byte("1")}}); err != nil {
		t.Fatalf("append after a failed snapshot: %v", err)
	}
	if err := j.SaveSnapshot(ctx, stream, persistence.Snapshot{Seq: 1, Data: []byte("state@1")}); err != nil {
		t.Fatalf("snapshot after a failed one: %v", err)
	}
	snap, ok, err := j.LoadSnapshot(ctx, stream, 1)
	if err != nil || !ok || string(snap.Data) != "state@1" {
		t.Fatalf("LoadSnapshot = %q %v %v", snap.Data, ok, err)
	}
}
