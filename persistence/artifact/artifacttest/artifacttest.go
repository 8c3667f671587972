// Package artifacttest is the conformance suite every artifact.Store passes: run it from
// each implementation's tests with a constructor of fresh, empty stores.
//
//	func TestConformance(t *testing.T) {
//		artifacttest.Run(t, func(t *testing.T, maxSize int64) artifact.Store { ... })
//	}
package artifacttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/persistence/artifact"
)

// Tenant is the tenant of the suite's artifacts; OtherTenant is another one, whose
// artifacts must never be reachable through Tenant's keys (nor the reverse).
const (
	Tenant      = "acme"
	OtherTenant = "globex"
)

// Opener returns a fresh, empty store whose size limit is maxSize bytes (0 = the
// default). The suite closes it.
type Opener func(t *testing.T, maxSize int64) artifact.Store

// Run runs the suite. Each subtest opens its own store.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"WriteReadListDelete", testRoundTrip},
		{"Overwrite", testOverwrite},
		{"Metadata", testMetadata},
		{"NotFound", testNotFound},
		{"InvalidPaths", testInvalidPaths},
		{"SizeLimit", testSizeLimit},
		{"ContextCancelled", testCancelled},
		{"ConcurrentWriters", testConcurrent},
		{"Close", testClose},
		{"TenantIsolation", testTenantIsolation},
		{"InvalidTenants", testInvalidTenants},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

func openStore(t *testing.T, open Opener, maxSize int64) artifact.Store {
	t.Helper()
	s := open(t, maxSize)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// session returns a session id no other test uses (stores may be shared servers).
func session(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "s-" + hex.EncodeToString(b)
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func write(t *testing.T, s artifact.Store, ref artifact.Ref, content, ct string) artifact.Info {
	t.Helper()
	info, err := s.Write(ctx(t), ref, []byte(content), ct)
	if err != nil {
		t.Fatalf("write %s: %v", ref.Path(), err)
	}
	if info.Path != ref.Path() || info.Ref != ref || info.Size != int64(len(content)) || info.SHA256 != digest([]byte(content)) {
		t.Fatalf("write %s: info %+v", ref.Path(), info)
	}
	return info
}

func read(t *testing.T, s artifact.Store, tenant, path string) ([]byte, artifact.Info) {
	t.Helper()
	b, info, err := s.Read(ctx(t), tenant, path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if info.Path != path || info.Size != int64(len(b)) || info.SHA256 != digest(b) {
		t.Fatalf("read %s: info %+v does not describe the %d bytes read", path, info, len(b))
	}
	return b, info
}

func paths(infos []artifact.Info) []string {
	out := make([]string, len(infos))
	for i, in := range infos {
		out[i] = in.Path
	}
	return out
}

func list(t *testing.T, s artifact.Store, sessionID, typ string) []artifact.Info {
	t.Helper()
	infos, err := s.List(ctx(t), Tenant, sessionID, typ)
	if err != nil {
		t.Fatalf("list %s %q: %v", sessionID, typ, err)
	}
	return infos
}

func testRoundTrip(t *testing.T, open Opener) {
	s := openStore(t, open, 0)
	sid, other := session(t), session(t)
	if got := list(t, s, sid, ""); len(got) != 0 {
		t.Fatalf("a fresh store lists %v", paths(got))
	}
	notes := artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeResearch, Filename: "notes.md"}
	code := artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeCode, Filename: "main.py"}
	data := artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeData, Filename: "résumé données.csv"}
	write(t, s, notes, "# Notes\nfound it", "text/markdown")
	write(t, s, code, "print('hi')\n", "text/x-python")
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	if _, err := s.Write(ctx(t), data, bin, "application/octet-stream"); err != nil {
		t.Fatal(err)
	}
	write(t, s, artifact.Ref{Tenant: Tenant, SessionID: other, Type: artifact.TypeResearch, Filename: "notes.md"}, "someone else's", "text/plain")

	if b, _ := read(t, s, Tenant, notes.Path()); string(b) != "# Notes\nfound it" {
		t.Fatalf("read back %q", b)
	}
	if b, _ := read(t, s, Tenant, data.Path()); !bytes.Equal(b, bin) {
		t.Fatalf("binary content changed: %v", b)
	}
	all := list(t, s, sid, "")
	want := []string{code.Path(), data.Path(), notes.Path()} // ordered by path
	if fmt.Sprint(paths(all)) != fmt.Sprint(want) {
		t.Fatalf("list = %v, want %v", paths(all), want)
	}
	for _, in := range all {
		if in.SessionID != sid || in.Filename == "" || in.ModTime.IsZero() || in.SHA256 == "" {
			t.Fatalf("list entry %+v", in)
		}
	}
	if got := list(t, s, sid, artifact.TypeResearch); fmt.Sprint(paths(got)) != fmt.Sprint([]string{notes.Path()}) {
		t.Fatalf("list research = %v", paths(got))
	}
	if got := list(t, s, sid, artifact.TypeLogs); len(got) != 0 {
		t.Fatalf("list logs = %v", paths(got))
	}
	if got := list(t, s, other, ""); len(got) != 1 || got[0].Size != int64(len("someone else's")) {
		t.Fatalf("other session lists %+v", got)
	}

	if err := s.Delete(ctx(t), Tenant, notes.Path()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Read(ctx(t), Tenant, notes.Path()); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("read after delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx(t), Tenant, notes.Path()); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if got := list(t, s, sid, ""); fmt.Sprint(paths(got)) != fmt.Sprint([]string{code.Path(), data.Path()}) {
		t.Fatalf("list after delete = %v", paths(got))
	}
	// The other session's artifact of the same name is untouched.
	if b, _ := read(t, s, Tenant, other+"/research/notes.md"); string(b) != "someone else's" {
		t.Fatalf("other session's artifact: %q", b)
	}
}

func testOverwrite(t *testing.T, open Opener) {
	s := openStore(t, open, 0)
	ref := artifact.Ref{Tenant: Tenant, SessionID: session(t), Type: artifact.TypeDrafts, Filename: "report.md"}
	first := write(t, s, ref, "draft one", "text/markdown")
	if first.Overwrote {
		t.Fatal("first write reports Overwrote")
	}
	second := write(t, s, ref, "draft two, longer", "text/plain")
	if !second.Overwrote {
		t.Fatal("second write does not report Overwrote")
	}
	b, info := read(t, s, Tenant, ref.Path())
	if string(b) != "draft two, longer" || info.SHA256 != second.SHA256 || info.SHA256 == first.SHA256 || !strings.HasPrefix(info.ContentType, "text/plain") {
		t.Fatalf("after overwrite: %q %+v", b, info)
	}
	got := list(t, s, ref.SessionID, "")
	if len(got) != 1 || got[0].SHA256 != second.SHA256 || got[0].Size != second.Size || !strings.HasPrefix(got[0].ContentType, "text/plain") {
		t.Fatalf("list after overwrite: %+v", got)
	}
}

func testMetadata(t *testing.T, open Opener) {
	s := openStore(t, open, 0)
	sid := session(t)
	md := write(t, s, artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeResearch, Filename: "a.md"}, "# A", "text/markdown; charset=UTF-8")
	if md.ContentType != "text/markdown; charset=utf-8" {
		t.Fatalf("content type %q, want it normalised", md.ContentType)
	}
	raw := write(t, s, artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeData, Filename: "blob"}, "xyz", "")
	if raw.ContentType != artifact.DefaultContentType {
		t.Fatalf("default content type %q", raw.ContentType)
	}
	empty := write(t, s, artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeLogs, Filename: "empty.log"}, "", "text/plain")
	if empty.Size != 0 || empty.SHA256 != digest(nil) {
		t.Fatalf("empty artifact %+v", empty)
	}
	written := map[string]artifact.Info{md.Path: md, raw.Path: raw, empty.Path: empty}
	same := func(a, b artifact.Info) bool {
		return a.Ref == b.Ref && a.ContentType == b.ContentType && a.SHA256 == b.SHA256 && a.Size == b.Size
	}
	for p, w := range written {
		if _, info := read(t, s, Tenant, p); !same(info, w) {
			t.Fatalf("read %s: %+v, wrote %+v", p, info, w)
		}
	}
	listed := list(t, s, sid, "")
	if len(listed) != len(written) {
		t.Fatalf("listed %v", paths(listed))
	}
	for _, in := range listed {
		if !same(in, written[in.Path]) {
			t.Fatalf("listed %+v, wrote %+v", in, written[in.Path])
		}
	}
	_, err := s.Write(ctx(t), artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeData, Filename: "x"}, []byte("x"), "not a type")
	if !errors.Is(err, artifact.ErrInvalidContentType) {
		t.Fatalf("bad content type: %v", err)
	}
}

func testNotFound(t *testing.T, open Opener) {
	s := openStore(t, open, 0)
	p := session(t) + "/research/missing.md"
	if _, _, err := s.Read(ctx(t), Tenant, p); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("read: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx(t), Tenant, p); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("delete: %v, want ErrNotFound", err)
	}
}

// BadPaths are artifact paths every store rejects with ErrInvalidPath.
var BadPaths = []string{
	"", "/abs/research/x.md", "../../etc/passwd", "s/research/../../b", "s/research/a/../../b", `s\research\x.md`,
	"s/research/..", "s/research/.", "s/research/", "s/research/.hidden", "s/research/a/b.md", "s/secrets/x.md",
	"s/research/bad\x00name", "s/research/new\nline", "s/research/" + strings.Repeat("n", 256), "s/research",
	"./research/x.md", "../research/x.md", "s//x.md",
}

func testInvalidPaths(t *testing.T, open Opener) {
	s := openStore(t, open, 0)
	for _, p := range BadPaths {
		if _, _, err := s.Read(ctx(t), Tenant, p); !errors.Is(err, artifact.ErrInvalidPath) {
			t.Errorf("read %q: %v, want ErrInvalidPath", p, err)
		}
		if err := s.Delete(ctx(t), Tenant, p); !errors.Is(err, artifact.ErrInvalidPath) {
			t.Errorf("delete %q: %v, want ErrInvalidPath", p, err)
		}
	}
	sid := session(t)
	badNames := []string{"", ".", "..", "../x", "a/../../b", "/abs", `a\b`, ".env", "a/b", "tab\there", strings.Repeat("é", 128)}
	for _, name := range badNames {
		ref := artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeResearch, Filename: name}
		_, err := s.Write(ctx(t), ref, []byte("x"), "")
		var pe *artifact.PathError
		if !errors.Is(err, artifact.ErrInvalidPath) || !errors.As(err, &pe) || pe.Reason == "" {
			t.Errorf("write filename %q: %v, want a *PathError", name, err)
		}
	}
	if _, err := s.Write(ctx(t), artifact.Ref{Tenant: Tenant, SessionID: sid, Type: "secrets", Filename: "x"}, []byte("x"), ""); !errors.Is(err, artifact.ErrInvalidPath) {
		t.Errorf("write unknown type: %v", err)
	}
	for _, id := range []string{"", "..", "a/b", "/abs", ".hidden"} {
		if _, err := s.Write(ctx(t), artifact.Ref{Tenant: Tenant, SessionID: id, Type: artifact.TypeResearch, Filename: "x"}, []byte("x"), ""); !errors.Is(err, artifact.ErrInvalidPath) {
			t.Errorf("write session %q: %v", id, err)
		}
		if _, err := s.List(ctx(t), Tenant, id, ""); !errors.Is(err, artifact.ErrInvalidPath) {
			t.Errorf("list session %q: %v", id, err)
		}
	}
	if _, err := s.List(ctx(t), Tenant, sid, "secrets"); !errors.Is(err, artifact.ErrInvalidPath) {
		t.Errorf("list unknown type: %v", err)
	}
	if got := list(t, s, sid, ""); len(got) != 0 {
		t.Fatalf("rejected writes stored %v", paths(got))
	}
	// A 255-byte name is fine.
	write(t, s, artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeResearch, Filename: strings.Repeat("n", 255)}, "long name", "")
}

func testSizeLimit(t *testing.T, open Opener) {
	const limit = 1024
	s := openStore(t, open, limit)
	sid := session(t)
	ok := artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeData, Filename: "full.bin"}
	if _, err := s.Write(ctx(t), ok, bytes.Repeat([]byte{'x'}, limit), ""); err != nil {
		t.Fatalf("write of exactly the limit: %v", err)
	}
	big := artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeData, Filename: "big.bin"}
	_, err := s.Write(ctx(t), big, bytes.Repeat([]byte{'x'}, limit+1), "")
	var se *artifact.SizeError
	if !errors.Is(err, artifact.ErrTooLarge) || !errors.As(err, &se) || se.Size != limit+1 || se.Limit != limit {
		t.Fatalf("oversize write: %v, want a *SizeError", err)
	}
	if _, _, err := s.Read(ctx(t), Tenant, big.Path()); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("the oversize artifact was stored: %v", err)
	}
}

func testCancelled(t *testing.T, open Opener) {
	s := openStore(t, open, 0)
	sid := session(t)
	ref := artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeResearch, Filename: "x.md"}
	write(t, s, artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeResearch, Filename: "kept.md"}, "kept", "")
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Write(c, ref, []byte("x"), ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("write: %v, want context.Canceled", err)
	}
	if _, _, err := s.Read(c, Tenant, sid+"/research/kept.md"); !errors.Is(err, context.Canceled) {
		t.Fatalf("read: %v, want context.Canceled", err)
	}
	if _, err := s.List(c, Tenant, sid, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("list: %v, want context.Canceled", err)
	}
	if err := s.Delete(c, Tenant, sid+"/research/kept.md"); !errors.Is(err, context.Canceled) {
		t.Fatalf("delete: %v, want context.Canceled", err)
	}
	if got := list(t, s, sid, ""); fmt.Sprint(paths(got)) != fmt.Sprint([]string{sid + "/research/kept.md"}) {
		t.Fatalf("after cancelled calls: %v", paths(got))
	}
}

func testConcurrent(t *testing.T, open Opener) {
	s := openStore(t, open, 0)
	sid := session(t)
	const writers = 8
	shared := artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeLogs, Filename: "shared.log"}
	contents := map[string]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for i := range writers {
		own := artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeCode, Filename: fmt.Sprintf("w%d.py", i)}
		body := strings.Repeat(fmt.Sprintf("writer %d\n", i), 100+i)
		contents[body] = true
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := s.Write(ctx(t), own, []byte(body), "text/x-python"); err != nil {
				errs <- err
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := s.Write(ctx(t), shared, []byte(body), "text/plain"); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent write: %v", err)
	}
	if got := list(t, s, sid, artifact.TypeCode); len(got) != writers {
		t.Fatalf("%d of %d writers' artifacts listed", len(got), writers)
	}
	for i := range writers {
		b, _ := read(t, s, Tenant, fmt.Sprintf("%s/code/w%d.py", sid, i))
		if !strings.HasPrefix(string(b), fmt.Sprintf("writer %d\n", i)) {
			t.Fatalf("w%d.py holds %q", i, b[:20])
		}
	}
	// The shared path holds one writer's content whole, and its metadata matches it.
	b, info := read(t, s, Tenant, shared.Path())
	if !contents[string(b)] {
		t.Fatalf("shared path holds a mix of writes (%d bytes)", len(b))
	}
	logs := list(t, s, sid, artifact.TypeLogs)
	if len(logs) != 1 || logs[0].SHA256 != info.SHA256 || logs[0].Size != info.Size {
		t.Fatalf("listed %+v, read %+v", logs, info)
	}
}

func testClose(t *testing.T, open Opener) {
	s := open(t, 0)
	sid := session(t)
	write(t, s, artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeResearch, Filename: "x.md"}, "x", "")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Write(ctx(t), artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeResearch, Filename: "y.md"}, []byte("y"), ""); !errors.Is(err, artifact.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	if _, _, err := s.Read(ctx(t), Tenant, sid+"/research/x.md"); !errors.Is(err, artifact.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if _, err := s.List(ctx(t), Tenant, sid, ""); !errors.Is(err, artifact.ErrClosed) {
		t.Fatalf("list after close: %v", err)
	}
	if err := s.Delete(ctx(t), Tenant, sid+"/research/x.md"); !errors.Is(err, artifact.ErrClosed) {
		t.Fatalf("delete after close: %v", err)
	}
}

// testTenantIsolation: two tenants' artifacts at the same session id and path are two
// artifacts; neither is read, listed, overwritten or deleted through the other's key.
func testTenantIsolation(t *testing.T, open Opener) {
	s := openStore(t, open, 0)
	sid := session(t)
	a := artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeResearch, Filename: "notes.md"}
	b := a.WithTenant(OtherTenant)
	if a.Key() == b.Key() || !strings.Contains(a.Key(), Tenant) {
		t.Fatalf("keys %q and %q do not hold their tenant", a.Key(), b.Key())
	}
	write(t, s, a, "A's secret", "text/markdown")
	if _, _, err := s.Read(ctx(t), OtherTenant, a.Path()); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("tenant %s read %s of tenant %s: %v, want ErrNotFound", OtherTenant, a.Path(), Tenant, err)
	}
	if got, err := s.List(ctx(t), OtherTenant, sid, ""); err != nil || len(got) != 0 {
		t.Fatalf("tenant %s lists session %s of tenant %s: %v %v", OtherTenant, sid, Tenant, paths(got), err)
	}
	if err := s.Delete(ctx(t), OtherTenant, a.Path()); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("tenant %s deleted %s of tenant %s: %v, want ErrNotFound", OtherTenant, a.Path(), Tenant, err)
	}
	// The other tenant writes the same session id and path: a second artifact.
	if info := write(t, s, b, "B's own", "text/plain"); info.Overwrote {
		t.Fatal("tenant B's first write reports it overwrote tenant A's artifact")
	}
	if got, _ := read(t, s, Tenant, a.Path()); string(got) != "A's secret" {
		t.Fatalf("tenant A reads %q", got)
	}
	if got, info := read(t, s, OtherTenant, b.Path()); string(got) != "B's own" || info.Tenant != OtherTenant {
		t.Fatalf("tenant B reads %q %+v", got, info)
	}
	if got := listOf(t, s, Tenant, sid); len(got) != 1 || got[0].Tenant != Tenant || got[0].Size != int64(len("A's secret")) {
		t.Fatalf("tenant A lists %+v", got)
	}
	if err := s.Delete(ctx(t), OtherTenant, b.Path()); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(t, s, Tenant, a.Path()); string(got) != "A's secret" {
		t.Fatalf("after tenant B's delete, tenant A reads %q", got)
	}
}

// BadTenants are tenant names every store rejects with ErrInvalidPath.
var BadTenants = []string{"", "..", ".", "a/b", "/abs", `a\b`, ".hidden", "-x", "tab\there", strings.Repeat("t", 65)}

func testInvalidTenants(t *testing.T, open Opener) {
	s := openStore(t, open, 0)
	sid := session(t)
	for _, tenant := range BadTenants {
		ref := artifact.Ref{Tenant: tenant, SessionID: sid, Type: artifact.TypeResearch, Filename: "x.md"}
		if _, err := s.Write(ctx(t), ref, []byte("x"), ""); !errors.Is(err, artifact.ErrInvalidPath) {
			t.Errorf("write tenant %q: %v, want ErrInvalidPath", tenant, err)
		}
		if _, _, err := s.Read(ctx(t), tenant, ref.Path()); !errors.Is(err, artifact.ErrInvalidPath) {
			t.Errorf("read tenant %q: %v, want ErrInvalidPath", tenant, err)
		}
		if _, err := s.List(ctx(t), tenant, sid, ""); !errors.Is(err, artifact.ErrInvalidPath) {
			t.Errorf("list tenant %q: %v, want ErrInvalidPath", tenant, err)
		}
		if err := s.Delete(ctx(t), tenant, ref.Path()); !errors.Is(err, artifact.ErrInvalidPath) {
			t.Errorf("delete tenant %q: %v, want ErrInvalidPath", tenant, err)
		}
	}
}

// Planter stores content at key in the store's backing directory or bucket, behind the
// store's back (as a store from before tenancy did, at the bare path).
type Planter func(t *testing.T, key string, content []byte)

// RunLegacy checks that artifacts stored before tenancy (at their bare path, no tenant
// prefix; planted with plant into s) stay readable for their session: read and listed
// under the session's tenant, shadowed once rewritten, and removed by a delete.
func RunLegacy(t *testing.T, s artifact.Store, plant Planter) {
	t.Helper()
	sid := session(t)
	old := artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeResearch, Filename: "old.md"}
	kept := artifact.Ref{Tenant: Tenant, SessionID: sid, Type: artifact.TypeData, Filename: "kept.csv"}
	plant(t, old.LegacyKey(), []byte("written before tenancy"))
	plant(t, kept.LegacyKey(), []byte("a,b\n"))
	if got, info := read(t, s, Tenant, old.Path()); string(got) != "written before tenancy" || info.Tenant != Tenant {
		t.Fatalf("legacy artifact reads %q %+v", got, info)
	}
	if got := listOf(t, s, Tenant, sid); fmt.Sprint(paths(got)) != fmt.Sprint([]string{kept.Path(), old.Path()}) {
		t.Fatalf("legacy artifacts list %v", paths(got))
	}
	// A new write goes under the tenant and shadows the old content.
	if info := write(t, s, old, "rewritten", "text/markdown"); !info.Overwrote {
		t.Fatal("rewriting a legacy artifact does not report Overwrote")
	}
	if got, _ := read(t, s, Tenant, old.Path()); string(got) != "rewritten" {
		t.Fatalf("rewritten legacy artifact reads %q", got)
	}
	if got := listOf(t, s, Tenant, sid); len(got) != 2 || got[1].SHA256 != digest([]byte("rewritten")) {
		t.Fatalf("after the rewrite the list is %+v", got)
	}
	// A delete (as a session's delete does, per listed path) removes both copies.
	for _, in := range listOf(t, s, Tenant, sid) {
		if err := s.Delete(ctx(t), Tenant, in.Path); err != nil {
			t.Fatalf("delete %s: %v", in.Path, err)
		}
	}
	if got := listOf(t, s, Tenant, sid); len(got) != 0 {
		t.Fatalf("after deleting the session's artifacts it lists %v", paths(got))
	}
	if _, _, err := s.Read(ctx(t), Tenant, old.Path()); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("read after delete: %v, want ErrNotFound", err)
	}

	// A session named like the tenants' directory: its old artifacts sit beside the
	// keys of a tenant named like their type, and neither is taken for the other.
	named := artifact.Ref{Tenant: Tenant, SessionID: artifact.TenantsDir, Type: artifact.TypeResearch, Filename: "old.md"}
	plant(t, named.LegacyKey(), []byte("session tenants, before tenancy"))
	write(t, s, artifact.Ref{Tenant: artifact.TypeResearch, SessionID: sid, Type: artifact.TypeData, Filename: "x.csv"}, "tenant research's", "text/csv")
	if got := listOf(t, s, Tenant, artifact.TenantsDir); fmt.Sprint(paths(got)) != fmt.Sprint([]string{named.Path()}) {
		t.Fatalf("session %q lists %v", artifact.TenantsDir, paths(got))
	}
	if got, _ := read(t, s, Tenant, named.Path()); string(got) != "session tenants, before tenancy" {
		t.Fatalf("session %q's legacy artifact reads %q", artifact.TenantsDir, got)
	}
	if got := listOf(t, s, artifact.TypeResearch, sid); len(got) != 1 || got[0].Path != sid+"/data/x.csv" {
		t.Fatalf("tenant %q lists %v", artifact.TypeResearch, paths(got))
	}
	for _, ref := range []artifact.Ref{{Tenant: artifact.TypeResearch, SessionID: sid, Type: artifact.TypeData, Filename: "x.csv"}, named} {
		if err := s.Delete(ctx(t), ref.Tenant, ref.Path()); err != nil {
			t.Fatalf("delete %s of %s: %v", ref.Path(), ref.Tenant, err)
		}
	}
}

func listOf(t *testing.T, s artifact.Store, tenant, sid string) []artifact.Info {
	t.Helper()
	infos, err := s.List(ctx(t), tenant, sid, "")
	if err != nil {
		t.Fatalf("list %s of %s: %v", sid, tenant, err)
	}
	return infos
}
