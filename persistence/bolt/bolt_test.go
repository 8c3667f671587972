package bolt_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/bolt"
	"github.com/fathom-agents/fathom/persistence/journaltest"
)

func TestConformance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	journaltest.Run(t, func(t *testing.T) persistence.Journal {
		j, err := bolt.Open(path, bolt.Options{NoSync: true, Facts: journaltest.Facts})
		if err != nil {
			t.Fatal(err)
		}
		return j
	})
}

func TestCorruptFileIsReportedAndNeverModified(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	j, err := bolt.Open(good, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 256<<10)
	for i := uint64(0); i < 20; i++ {
		if _, err := j.Append(context.Background(), "s", i, []persistence.Record{{Type: "e", Data: big}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	garbage := bytes.Repeat([]byte("not a journal "), 2000)
	for name, content := range map[string][]byte{
		"garbage":        garbage,
		"truncated":      whole[:len(whole)/2],
		"header smashed": append(append([]byte{}, garbage[:8192]...), whole[8192:]...),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".db")
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := bolt.Open(path, bolt.Options{Timeout: time.Second})
			if !errors.Is(err, persistence.ErrCorrupt) {
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error does not name the file: %v", err)
			}
			after, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if !bytes.Equal(after, content) {
				t.Fatal("Open modified the corrupt file")
			}
		})
	}
}

func TestLockedFileFailsClearly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	_, err = bolt.Open(path, bolt.Options{Timeout: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("second Open = %v, want a lock error", err)
	}
}

func TestUnwritableDirectory(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root ignores directory permissions")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	_, err := bolt.Open(filepath.Join(dir, "journal.db"), bolt.Options{})
	if err == nil || !errors.Is(err, os.ErrPermission) {
		t.Fatalf("Open = %v, want permission error", err)
	}
}
