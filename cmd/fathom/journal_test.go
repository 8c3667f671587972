package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/bolt"
)

// runSessions runs n sessions on the embedded journal in data and returns their ids.
func runSessions(t *testing.T, data string, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		r := fathom(t, cleanEnv(), "run", "--data-dir", data, "--json", fmt.Sprintf("Write haiku number %d about event sourcing", i))
		if r.code != 0 {
			t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
		}
		ids = append(ids, checkCompletedRun(t, jsonEvents(t, r.stdout)))
	}
	return ids
}

// futureEvent is the record a newer Fathom would store for an event kind this binary
// does not know: an envelope whose payload is a field number the binary has never seen.
func futureEvent(t *testing.T, session string, seq uint64) persistence.Record {
	t.Helper()
	env, err := proto.Marshal(&messages.Event{Seq: seq, SessionId: session, AtUnixNano: time.Now().UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	env = protowire.AppendTag(env, 987, protowire.BytesType)
	env = protowire.AppendBytes(env, []byte("a payload from the future"))
	return persistence.Record{Seq: seq, Type: "future_event", Data: env}
}

// sessionWithFutureEvent runs one session in a fresh data directory, then appends to its
// journal an event of a kind this binary does not know (futureEvent), as a newer build
// would; it returns the data directory and the session id.
func sessionWithFutureEvent(t *testing.T) (data, id string) {
	t.Helper()
	data = filepath.Join(t.TempDir(), "data")
	id = runSessions(t, data, 1)[0]
	j, err := bolt.Open(filepath.Join(data, "journal.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	last, err := j.LastSeq(ctx, id)
	if err != nil || last == 0 {
		t.Fatalf("LastSeq(%s) = %d, %v", id, last, err)
	}
	if _, err := j.Append(ctx, id, last, []persistence.Record{futureEvent(t, id, last+1)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return data, id
}

// TestEventOfANewerVersionIsAFailedPrecondition: a session whose journal holds an event
// kind this binary does not know answers 409 failed_precondition "written by a newer
// version" through the gateway (never 500 "has no payload").
func TestEventOfANewerVersionIsAFailedPrecondition(t *testing.T) {
	t.Parallel()
	data, id := sessionWithFutureEvent(t)
	const tok = "newer-token"
	p := startNode(t, cleanEnv(), "--data-dir", data, "--token", tok)
	for _, path := range []string{"/v1/sessions/" + id, "/v1/sessions/" + id + "/timeline"} {
		code, body := httpJSON(t, "GET", p.url+path, tok, nil)
		e, _ := body["error"].(map[string]any)
		if msg, _ := e["message"].(string); code != 409 || e["code"] != "failed_precondition" || !strings.Contains(msg, "written by a newer version") {
			t.Errorf("GET %s = %d %v, want 409 failed_precondition \"written by a newer version\"", path, code, body)
		}
	}
	p.stop(t)
}

// TestJournalOfANewerFormatIsRefusedAtStart: run, node and the reading commands refuse a
// journal stamped by a newer format with the upgrade message, and write nothing.
func TestJournalOfANewerFormatIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	runSessions(t, data, 1)
	path := filepath.Join(data, "journal.db")
	if err := bolt.StampFormat(path, persistence.Format+1); err != nil {
		t.Fatal(err)
	}
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("written by Fathom format %d; this binary reads up to %d: upgrade", persistence.Format+1, persistence.Format)
	for _, args := range [][]string{
		{"run", "--data-dir", data, "one more"},
		{"node", "--listen", "127.0.0.1:0", "--data-dir", data},
		{"session", "list", "--data-dir", data},
	} {
		r := fathom(t, cleanEnv(), args...)
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("%v: exit %d, want 1 and %q\n%s", args[:1], r.code, want, r.stderr)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, content) {
			t.Fatalf("%v wrote into a journal of a newer format", args[:1])
		}
	}
}

// smashRecord changes bytes in the middle of the stored event at seq of session in the
// embedded journal at path (the page around it stays consistent) and returns the file's
// new content.
func smashRecord(t *testing.T, path, session string, seq uint64) []byte {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var stored []byte
	_ = db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket([]byte("events")).Bucket([]byte(session)); b != nil {
			stored = bytes.Clone(b.Get(binary.BigEndian.AppendUint64(nil, seq)))
		}
		return nil
	})
	_ = db.Close()
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := bytes.Index(content, stored)
	if len(stored) < 32 || off < 0 || bytes.Count(content, stored) != 1 {
		t.Fatalf("event %s/%d (%d bytes) not found once in %s", session, seq, len(stored), path)
	}
	for i := off + len(stored)/2; i < off+len(stored)/2+8; i++ {
		content[i] ^= 0xff
	}
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return content
}

// TestDamagedRecordIsRefusedUntilRepair: bytes changed inside one stored event (bbolt's
// own page check passes) make run and node refuse the journal at start with an error
// naming the session and seq, writing nothing; `fathom journal check` reports it;
// `fathom journal check --repair` quarantines that session and keeps the others, and
// the journal works again.
func TestDamagedRecordIsRefusedUntilRepair(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	ids := runSessions(t, data, 3)
	path := filepath.Join(data, "journal.db")
	content := smashRecord(t, path, ids[1], 3)
	named := "session " + ids[1] + " seq 3"
	for _, args := range [][]string{
		{"run", "--data-dir", data, "one more"},
		{"node", "--listen", "127.0.0.1:0", "--data-dir", data},
		{"session", "timeline", "--data-dir", data, ids[0]},
	} {
		r := fathom(t, cleanEnv(), args...)
		if r.code != 1 || !strings.Contains(r.stderr, named) || !strings.Contains(r.stderr, "fathom journal check --repair") {
			t.Errorf("%v: exit %d, want 1 and an error naming %s and the repair\n%s", args[:1], r.code, named, r.stderr)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, content) {
			t.Fatalf("%v wrote into the damaged journal", args[:1])
		}
	}
	r := fathom(t, cleanEnv(), "journal", "check", "--data-dir", data)
	if r.code != 1 || !strings.Contains(r.stdout, "damaged: "+named) {
		t.Fatalf("journal check: exit %d, want 1 naming %s\n%s%s", r.code, named, r.stdout, r.stderr)
	}
	r = fathom(t, cleanEnv(), "journal", "check", "--repair", "--data-dir", data)
	if r.code != 0 || !strings.Contains(r.stdout, "quarantined session "+ids[1]) {
		t.Fatalf("journal check --repair: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	backups, _ := filepath.Glob(path + ".damaged-*")
	if len(backups) != 1 {
		t.Fatalf("backups of the original: %v", backups)
	}
	if kept, _ := os.ReadFile(backups[0]); !bytes.Equal(kept, content) {
		t.Fatal("the original file was not kept as it was")
	}
	if r := fathom(t, cleanEnv(), "journal", "check", "--data-dir", data); r.code != 0 || !strings.Contains(r.stdout, "quarantined earlier: session "+ids[1]) {
		t.Fatalf("journal check after repair: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, id := range []string{ids[0], ids[2]} {
		if r := fathom(t, cleanEnv(), "session", "timeline", "--data-dir", data, id); r.code != 0 {
			t.Errorf("timeline %s after repair: exit %d\n%s", id, r.code, r.stderr)
		}
	}
	if r := fathom(t, cleanEnv(), "session", "timeline", "--data-dir", data, ids[1]); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("timeline of the quarantined %s: exit %d\n%s", ids[1], r.code, r.stderr)
	}
	if r := fathom(t, cleanEnv(), "run", "--data-dir", data, "--json", "Write a haiku after the repair"); r.code != 0 {
		t.Fatalf("run after repair: exit %d\n%s", r.code, r.stderr)
	}
}

// TestPostgresOfANewerSchemaIsRefusedAtStart: with migration 99 recorded in
// fathom_schema_migrations, `fathom run --postgres` refuses to start, with the upgrade
// message, and stores nothing.
func TestPostgresOfANewerSchemaIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresDSN(t)
	if r := fathom(t, cleanEnv(), "migrate", "--postgres", dsn); r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s", r.code, r.stderr)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "INSERT INTO fathom_schema_migrations (version, name) VALUES (99, '0099_future.sql')"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"run", "--postgres", dsn, "Write a haiku"}, {"migrate", "--postgres", dsn}} {
		r := fathom(t, cleanEnv(), args...)
		if r.code != 1 || !strings.Contains(r.stderr, "schema migration 99 is applied") || !strings.Contains(r.stderr, "upgrade") {
			t.Errorf("%v: exit %d, want 1 and the upgrade message\n%s", args[:1], r.code, r.stderr)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM fathom_event_batches").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d event batches stored (%v), want none", n, err)
	}
}
