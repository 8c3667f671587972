package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/persistence/artifact/artifacttest"
	"github.com/fathom-agents/fathom/persistence/artifact/local"
)

func TestConformance(t *testing.T) {
	artifacttest.Run(t, func(t *testing.T, maxSize int64) artifact.Store {
		s, err := local.Open(filepath.Join(t.TempDir(), "artifacts"), local.Config{MaxSize: maxSize})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestLayout: the workspace is plain files at their paths, browsable with ls; nothing
// is left in the temporary directory.
func TestLayout(t *testing.T) {
	dir := t.TempDir()
	s, err := local.Open(dir, local.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ref := artifact.Ref{Tenant: "acme", SessionID: "s1", Type: artifact.TypeResearch, Filename: "notes.md"}
	if _, err := s.Write(context.Background(), ref, []byte("# notes"), "text/markdown"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "tenants", "acme", "s1", "research", "notes.md"))
	if err != nil || string(b) != "# notes" {
		t.Fatalf("file: %q %v", b, err)
	}
	m, err := os.ReadFile(filepath.Join(dir, "tenants", "acme", "s1", "research", ".meta", "notes.md"))
	if err != nil || !strings.Contains(string(m), `"content_type":"text/markdown"`) {
		t.Fatalf("metadata: %s %v", m, err)
	}
	if tmp, _ := os.ReadDir(filepath.Join(dir, ".tmp")); len(tmp) != 0 {
		t.Fatalf("temporary files left: %v", tmp)
	}
	// The session's last delete takes its directories with it, up to its tenant's.
	if err := s.Delete(context.Background(), "acme", ref.Path()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tenants", "acme")); !os.IsNotExist(err) {
		t.Fatalf("the tenant's emptied directory is left: %v", err)
	}
}

// TestLegacyArtifacts: artifacts a store wrote before tenancy, at
// DIR/{session_id}/{type}/{filename}, stay readable for their session and go with its
// delete.
func TestLegacyArtifacts(t *testing.T) {
	dir := t.TempDir()
	s, err := local.Open(dir, local.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	artifacttest.RunLegacy(t, s, func(t *testing.T, key string, content []byte) {
		p := filepath.Join(dir, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o640); err != nil {
			t.Fatal(err)
		}
	})
	if entries, _ := os.ReadDir(dir); len(entries) != 2 { // .tmp and tenants
		t.Fatalf("the legacy session's directory is left: %v", entries)
	}
}

// TestStaleMetadata: content replaced behind the store's back (as by a crash between
// the content and metadata renames) is described by its real digest and size.
func TestStaleMetadata(t *testing.T) {
	dir := t.TempDir()
	s, err := local.Open(dir, local.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ref := artifact.Ref{Tenant: "acme", SessionID: "s1", Type: artifact.TypeData, Filename: "t.csv"}
	if _, err := s.Write(context.Background(), ref, []byte("a,b\n"), "text/csv"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tenants", "acme", "s1", "data", "t.csv"), []byte("a,b\n1,2\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	infos, err := s.List(context.Background(), "acme", "s1", "")
	if err != nil || len(infos) != 1 {
		t.Fatalf("list: %v %v", infos, err)
	}
	_, read, err := s.Read(context.Background(), "acme", ref.Path())
	if err != nil {
		t.Fatal(err)
	}
	if infos[0].Size != 8 || infos[0].SHA256 != read.SHA256 || infos[0].ContentType != "text/csv" {
		t.Fatalf("listed %+v, read %+v", infos[0], read)
	}
}

// TestSymlinkEscape: a symlink planted in the directory cannot take a read outside it.
func TestSymlinkEscape(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(dir, "s1", "research"), filepath.Join(dir, "tenants", "acme", "s1", "research")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(d, "link.md")); err != nil {
			t.Fatal(err)
		}
	}
	s, err := local.Open(dir, local.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if b, _, err := s.Read(context.Background(), "acme", "s1/research/link.md"); err == nil {
		t.Fatalf("read through a symlink out of the store: %q", b)
	}
}
