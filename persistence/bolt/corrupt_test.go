package bolt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/bolt"
)

// writeSessions fills a journal at path with a few sessions of small events, so the
// file has many leaf and branch pages.
func writeSessions(t *testing.T, path string) {
	t.Helper()
	j, err := bolt.Open(path, bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for s := 0; s < 5; s++ {
		stream := fmt.Sprintf("s-%d", s)
		for i := uint64(0); i < 400; i++ {
			if _, err := j.Append(ctx, stream, i, []persistence.Record{{Type: "step_completed", Data: bytes.Repeat([]byte{byte('a' + s)}, 200)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// smashMiddlePage overwrites the in-use (leaf or branch) page nearest the middle of the
// file with random bytes and returns the file's new content.
func smashMiddlePage(t *testing.T, path string) []byte {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil) // writable: a read-only open does not load the freelist tx.Page needs
	if err != nil {
		t.Fatal(err)
	}
	var victim int
	pageSize := db.Info().PageSize
	err = db.View(func(tx *bbolt.Tx) error {
		pages := int(tx.Size()) / pageSize
		for d := 0; d < pages/2; d++ {
			for _, id := range []int{pages/2 + d, pages/2 - d} {
				if p, err := tx.Page(id); err == nil && p != nil && (p.Type == "leaf" || p.Type == "branch") {
					victim = id
					return nil
				}
			}
		}
		return errors.New("no leaf or branch page found")
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := victim * pageSize; i < (victim+1)*pageSize; i++ {
		content[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return content
}

func TestMidFilePageCorruptionIsRefusedBeforeAnyWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	writeSessions(t, path)
	content := smashMiddlePage(t, path)
	for _, readOnly := range []bool{false, true} {
		j, err := bolt.Open(path, bolt.Options{Timeout: time.Second, ReadOnly: readOnly})
		if err == nil {
			_, aerr := j.Append(context.Background(), "s-new", 0, []persistence.Record{{Type: "e"}})
			_ = j.Close()
			t.Fatalf("Open(ReadOnly=%v) accepted a journal with a smashed page (append after it: %v)", readOnly, aerr)
		}
		if !errors.Is(err, persistence.ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "consistency check") {
			t.Fatalf("Open(ReadOnly=%v) = %v, want ErrCorrupt from the consistency check naming %s", readOnly, err, path)
		}
		after, rerr := os.ReadFile(path)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if !bytes.Equal(after, content) {
			t.Fatalf("Open(ReadOnly=%v) modified the corrupt file", readOnly)
		}
	}
}

// TestLargeFileIsCheckedInTheBackground: a file above CheckMaxBytes opens at once with a
// log line, serves reads, and takes writes once its background check has passed.
func TestLargeFileIsCheckedInTheBackground(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	writeSessions(t, path)
	var logs bytes.Buffer
	j, err := bolt.Open(path, bolt.Options{CheckMaxBytes: 4096, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if last, err := j.LastSeq(ctx, "s-1"); err != nil || last != 400 {
		t.Fatalf("LastSeq during the check = %d, %v; want 400", last, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := j.Append(ctx, "s-1", 400, []persistence.Record{{Type: "e"}})
		if err == nil {
			break
		}
		if !errors.Is(err, bolt.ErrChecking) || time.Now().After(deadline) {
			t.Fatalf("Append = %v, want success once the background check passed", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := j.Close(); err != nil { // waits for the check, the logs' other writer
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "checking it in the background") || !strings.Contains(logs.String(), path) {
		t.Fatalf("no log line about the background check: %q", logs.String())
	}
}

func TestReadOnlyNeverCreatesAndNeverWrites(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "journal.db")
	if _, err := bolt.Open(missing, bolt.Options{ReadOnly: true}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only Open of a missing file = %v, want os.ErrNotExist", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only Open created %s (stat: %v)", missing, err)
	}
	writeSessions(t, missing)
	j, err := bolt.Open(missing, bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	if last, err := j.LastSeq(ctx, "s-1"); err != nil || last != 400 {
		t.Fatalf("LastSeq = %d, %v; want 400", last, err)
	}
	if _, err := j.Append(ctx, "s-1", 400, []persistence.Record{{Type: "e"}}); !errors.Is(err, bolt.ErrReadOnly) {
		t.Fatalf("Append on a read-only journal = %v, want ErrReadOnly", err)
	}
	if err := j.SaveSnapshot(ctx, "s-1", persistence.Snapshot{Seq: 1, Data: []byte("x")}); !errors.Is(err, bolt.ErrReadOnly) {
		t.Fatalf("SaveSnapshot on a read-only journal = %v, want ErrReadOnly", err)
	}
}
