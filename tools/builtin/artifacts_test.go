package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/persistence/artifact/local"
	"github.com/fathom-agents/fathom/persistence/artifact/s3"
	"github.com/fathom-agents/fathom/tools"
	"github.com/fathom-agents/fathom/tools/builtin"
)

func localStore(t *testing.T, maxSize int64) *local.Store {
	t.Helper()
	s, err := local.Open(filepath.Join(t.TempDir(), "artifacts"), local.Config{MaxSize: maxSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func artifactExecutor(t *testing.T, store artifact.Store, readLimit int) *tools.Executor {
	t.Helper()
	return executor(t, builtin.Options{Artifacts: store, ArtifactReadLimit: readLimit})
}

// call runs a tool as session sid's step st1 would.
func call(e *tools.Executor, sid, name, args string) tools.Result {
	return e.Run(context.Background(), tools.Call{ID: "c1", Name: name, Args: json.RawMessage(args), SessionID: sid, StepID: "st1", IdempotencyKey: sid + "/st1/tool-1"})
}

func argsJSON(t *testing.T, v map[string]any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestArtifactToolsOnlyWithAStore(t *testing.T) {
	if _, ok := executor(t, builtin.Options{}).Registry.Get("write_artifact"); ok {
		t.Fatal("write_artifact registered without a store")
	}
	e := artifactExecutor(t, localStore(t, 0), 0)
	for _, name := range []string{"write_artifact", "read_artifact", "list_artifacts"} {
		if _, ok := e.Registry.Get(name); !ok {
			t.Fatalf("%s not registered with a store", name)
		}
	}
	tool, _ := e.Registry.Get("write_artifact")
	for _, want := range []string{`"type"`, `"research"`, `"logs"`, `"filename"`, `"content"`, `"content_type"`} {
		if !strings.Contains(string(tool.Schema()), want) {
			t.Errorf("write_artifact schema lacks %s: %s", want, tool.Schema())
		}
	}
}

// TestArtifactRoundTrip: write → list → read through the executor, as a session calls
// them; the write is reported for the session's artifact_written event.
func TestArtifactRoundTrip(t *testing.T) {
	store := localStore(t, 0)
	e := artifactExecutor(t, store, 0)
	r := call(e, "s1", "write_artifact", `{"type":"research","filename":"findings.md","content":"# Findings\nactors are cheap"}`)
	if r.Err != nil {
		t.Fatal(r.Err.FormatForLLM())
	}
	if !strings.Contains(r.Output, "Saved artifact s1/research/findings.md (") || !strings.Contains(r.Output, "text/markdown") || strings.Contains(r.Output, "replaced") {
		t.Fatalf("write output %q", r.Output)
	}
	if len(r.Artifacts) != 1 {
		t.Fatalf("recorded %d artifacts", len(r.Artifacts))
	}
	a := r.Artifacts[0]
	if a.Path != "s1/research/findings.md" || a.Type != "research" || a.Filename != "findings.md" || a.Size != 27 ||
		a.ContentType != "text/markdown; charset=utf-8" || len(a.SHA256) != 64 || a.Overwrote {
		t.Fatalf("recorded %+v", a)
	}
	r = call(e, "s1", "write_artifact", `{"type":"code","filename":"count.py","content":"print(1)","content_type":"text/x-python"}`)
	if r.Err != nil {
		t.Fatal(r.Err.FormatForLLM())
	}
	// Another session's artifacts never show.
	if r = call(e, "s2", "write_artifact", `{"type":"research","filename":"other.md","content":"x"}`); r.Err != nil {
		t.Fatal(r.Err.FormatForLLM())
	}

	r = call(e, "s1", "list_artifacts", `{}`)
	want := "2 artifacts in this session's workspace:\n- s1/code/count.py (8 B, text/x-python)\n- s1/research/findings.md (27 B, text/markdown; charset=utf-8)"
	if r.Err != nil || r.Output != want {
		t.Fatalf("list: %q %v\nwant %q", r.Output, r.Err, want)
	}
	if r = call(e, "s1", "list_artifacts", `{"type":"drafts"}`); r.Output != "No drafts artifacts in this session's workspace yet." {
		t.Fatalf("list drafts: %q %v", r.Output, r.Err)
	}

	for _, args := range []string{`{"path":"s1/research/findings.md"}`, `{"path":"research/findings.md"}`, `{"type":"research","filename":"findings.md"}`} {
		r = call(e, "s1", "read_artifact", args)
		if r.Err != nil || !strings.HasPrefix(r.Output, "Artifact s1/research/findings.md (text/markdown; charset=utf-8, 27 bytes, sha256 ") ||
			!strings.HasSuffix(r.Output, "):\n# Findings\nactors are cheap") {
			t.Fatalf("read %s: %q %v", args, r.Output, r.Err)
		}
	}

	r = call(e, "s1", "write_artifact", `{"type":"research","filename":"findings.md","content":"v2"}`)
	if r.Err != nil || !strings.Contains(r.Output, "It replaced the previous version.") || !r.Artifacts[0].Overwrote {
		t.Fatalf("overwrite: %q %v %+v", r.Output, r.Err, r.Artifacts)
	}
}

func TestArtifactValidation(t *testing.T) {
	e := artifactExecutor(t, localStore(t, 1024), 0)
	if r := call(e, "s1", "write_artifact", `{"type":"research","filename":"real.md","content":"x"}`); r.Err != nil {
		t.Fatal(r.Err)
	}
	cases := []struct {
		name, tool, args string
		errType          tools.ErrorType
		msg              string
	}{
		{"traversal", "write_artifact", `{"type":"research","filename":"../../etc/passwd","content":"x"}`, tools.ErrValidation, `path traversal is not allowed`},
		{"absolute", "write_artifact", `{"type":"research","filename":"/abs","content":"x"}`, tools.ErrValidation, `"/abs" filename is an absolute path`},
		{"inner traversal", "write_artifact", `{"type":"research","filename":"a/../../b","content":"x"}`, tools.ErrValidation, `path traversal is not allowed`},
		{"directory", "write_artifact", `{"type":"research","filename":"src/main.py","content":"x"}`, tools.ErrValidation, `artifacts are flat within their type`},
		{"hidden", "write_artifact", `{"type":"research","filename":".env","content":"x"}`, tools.ErrValidation, `starts with "."`},
		{"backslash", "write_artifact", `{"type":"research","filename":"a\\b","content":"x"}`, tools.ErrValidation, `backslash`},
		{"control", "write_artifact", `{"type":"research","filename":"a\u0007b","content":"x"}`, tools.ErrValidation, `control character U+0007`},
		{"long", "write_artifact", argsJSON(t, map[string]any{"type": "research", "filename": strings.Repeat("é", 200), "content": "x"}), tools.ErrValidation, `400 bytes long; the limit is 255`},
		{"unknown type", "write_artifact", `{"type":"secrets","filename":"a.md","content":"x"}`, tools.ErrValidation, `/type`},
		{"no content", "write_artifact", `{"type":"research","filename":"a.md"}`, tools.ErrValidation, `content`},
		{"bad content type", "write_artifact", `{"type":"research","filename":"a.md","content":"x","content_type":"nonsense"}`, tools.ErrValidation, `want type/subtype`},
		{"oversize", "write_artifact", argsJSON(t, map[string]any{"type": "data", "filename": "big.csv", "content": strings.Repeat("x", 1025)}), tools.ErrValidation,
			`content is 1.0 KiB; an artifact may hold at most 1.0 KiB: split it into several artifacts`},
		{"read traversal", "read_artifact", `{"path":"../../etc/passwd"}`, tools.ErrValidation, `"../../etc/passwd" contains ".." (path traversal is not allowed)`},
		{"read absolute", "read_artifact", `{"path":"/etc/passwd"}`, tools.ErrValidation, `is absolute`},
		{"read inner traversal", "read_artifact", `{"path":"a/../../b"}`, tools.ErrValidation, `path traversal is not allowed`},
		{"read other session", "read_artifact", `{"path":"s2/research/real.md"}`, tools.ErrPermission, `belongs to another session`},
		{"read missing", "read_artifact", `{"path":"research/missing.md"}`, tools.ErrValidation, `no such artifact in this session; list_artifacts`},
		{"read nothing", "read_artifact", `{}`, tools.ErrValidation, `give path`},
		{"read both", "read_artifact", `{"path":"research/real.md","type":"research","filename":"real.md"}`, tools.ErrValidation, `not both`},
		{"read past end", "read_artifact", `{"path":"research/real.md","offset":5}`, tools.ErrValidation, `offset 5 is past the end`},
		{"list unknown type", "list_artifacts", `{"type":"secrets"}`, tools.ErrValidation, `/type`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(e, "s1", c.tool, c.args)
			if r.Err == nil || r.Err.Type != c.errType || !strings.Contains(r.Err.Message, c.msg) {
				t.Fatalf("got %v, want %s error containing %q", r.Err, c.errType, c.msg)
			}
			if c.errType == tools.ErrValidation && !r.Err.Retryable {
				t.Fatal("a validation error must be retryable: the model can fix its arguments")
			}
			if len(r.Artifacts) != 0 {
				t.Fatalf("a failed call recorded %+v", r.Artifacts)
			}
		})
	}
	// Nothing but the one good write reached the store.
	if r := call(e, "s1", "list_artifacts", `{}`); !strings.HasPrefix(r.Output, "1 artifacts") {
		t.Fatalf("list after rejected writes: %q", r.Output)
	}
	// Outside a session there is no workspace.
	r := e.Run(context.Background(), tools.Call{ID: "c", Name: "list_artifacts", Args: json.RawMessage(`{}`)})
	if r.Err == nil || r.Err.Type != tools.ErrExecution || r.Err.Retryable || !strings.Contains(r.Err.Message, "outside") {
		t.Fatalf("outside a session: %v", r.Err)
	}
}

// TestArtifactStoreDown: an unreachable or closed store is a retryable execution error
// that says the store failed.
func TestArtifactStoreDown(t *testing.T) {
	dead, err := s3.Open(s3.Config{Endpoint: "127.0.0.1:1", AccessKey: "k", SecretKey: "s", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	closed := localStore(t, 0)
	_ = closed.Close()
	for name, store := range map[string]artifact.Store{"unreachable s3": dead, "closed local": closed} {
		t.Run(name, func(t *testing.T) {
			e := artifactExecutor(t, store, 0)
			for _, c := range []struct{ tool, args string }{
				{"write_artifact", `{"type":"logs","filename":"run.log","content":"x"}`},
				{"read_artifact", `{"path":"logs/run.log"}`},
				{"list_artifacts", `{}`},
			} {
				r := call(e, "s1", c.tool, c.args)
				if r.Err == nil || r.Err.Type != tools.ErrExecution || !r.Err.Retryable || !strings.Contains(r.Err.Message, "the artifact store failed") {
					t.Fatalf("%s: %v", c.tool, r.Err)
				}
			}
		})
	}
}

// TestReadArtifactIsBounded: a long artifact comes back in parts cut on character
// boundaries; each part says what was cut and the offsets reassemble it.
func TestReadArtifactIsBounded(t *testing.T) {
	store := localStore(t, 0)
	e := artifactExecutor(t, store, 100)
	content := strings.Repeat("ünïcødé ", 40) // 2-byte characters: cuts must not split them
	if r := call(e, "s1", "write_artifact", argsJSON(t, map[string]any{"type": "drafts", "filename": "long.txt", "content": content})); r.Err != nil {
		t.Fatal(r.Err)
	}
	var got strings.Builder
	offset := 0
	for parts := 0; ; parts++ {
		if parts > 10 {
			t.Fatal("no end after 10 parts")
		}
		r := call(e, "s1", "read_artifact", fmt.Sprintf(`{"path":"drafts/long.txt","offset":%d}`, offset))
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		_, body, _ := strings.Cut(r.Output, ":\n")
		text, cut, wasCut := strings.Cut(body, "\n[Cut: ")
		got.WriteString(text)
		if !wasCut {
			break
		}
		var from, to, size, rest, next int
		if _, err := fmt.Sscanf(cut, "showed bytes %d-%d of %d; %d bytes not shown. Call read_artifact with offset=%d", &from, &to, &size, &rest, &next); err != nil {
			t.Fatalf("cut note %q: %v", cut, err)
		}
		if size != len(content) || to-from > 100 || rest != size-to || next != to {
			t.Fatalf("cut note %q", cut)
		}
		offset = next
	}
	if got.String() != content {
		t.Fatalf("reassembled %q", got.String())
	}
	// Binary data is described, not dumped.
	if _, err := store.Write(context.Background(), artifact.Ref{Tenant: "default", SessionID: "s1", Type: "data", Filename: "blob.bin"}, []byte{0xff, 0xfe, 0}, ""); err != nil {
		t.Fatal(err)
	}
	if r := call(e, "s1", "read_artifact", `{"path":"data/blob.bin"}`); r.Err != nil || !strings.HasSuffix(r.Output, "holds binary data; it cannot be shown as text.") {
		t.Fatalf("binary: %q %v", r.Output, r.Err)
	}
}
