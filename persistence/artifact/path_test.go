package artifact_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/persistence/artifact"
)

func TestParsePath(t *testing.T) {
	r, err := artifact.ParsePath("s-1/code/main.py")
	if err != nil || r != (artifact.Ref{SessionID: "s-1", Type: "code", Filename: "main.py"}) || r.Path() != "s-1/code/main.py" {
		t.Fatalf("ParsePath: %+v %v", r, err)
	}
	for path, reason := range map[string]string{
		"../../etc/passwd":     `contains ".." (path traversal is not allowed)`,
		"s/research/a/../../b": `contains ".."`,
		"/etc/passwd":          "is absolute",
		`s\research\x`:         "backslash",
		"s/research/a/b.md":    "has 4 parts",
		"s/secrets/x":          "unknown artifact type; use one of research, code, drafts, data, logs, results",
		"s/research/.env":      `filename starts with "."`,
		"s/research/a\x1bb":    "control character U+001B",
	} {
		_, err := artifact.ParsePath(path)
		var pe *artifact.PathError
		if !errors.As(err, &pe) || !errors.Is(err, artifact.ErrInvalidPath) || !strings.Contains(err.Error(), reason) {
			t.Errorf("ParsePath(%q) = %v, want a PathError saying %q", path, err, reason)
		}
	}
}

func TestResolvePath(t *testing.T) {
	for in, want := range map[string]string{"research/a.md": "s1/research/a.md", "s2/data/b.csv": "s2/data/b.csv"} {
		r, err := artifact.ResolvePath("s1", in)
		if err != nil || r.Path() != want {
			t.Errorf("ResolvePath(%q) = %v %v, want %s", in, r.Path(), err, want)
		}
	}
	for _, in := range []string{"a.md", "../x", "research/../x", "s/research/a/b", ""} {
		if _, err := artifact.ResolvePath("s1", in); !errors.Is(err, artifact.ErrInvalidPath) {
			t.Errorf("ResolvePath(%q) = %v", in, err)
		}
	}
}

func TestContentTypes(t *testing.T) {
	for in, want := range map[string]string{"": artifact.DefaultContentType, "Text/Markdown; Charset=UTF-8": "text/markdown; charset=utf-8", "application/json": "application/json"} {
		if got, err := artifact.NormalizeContentType(in); err != nil || got != want {
			t.Errorf("NormalizeContentType(%q) = %q %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"json", "text/", strings.Repeat("a", 250) + "/plain"} {
		if _, err := artifact.NormalizeContentType(in); !errors.Is(err, artifact.ErrInvalidContentType) {
			t.Errorf("NormalizeContentType(%q) = %v", in, err)
		}
	}
	for in, want := range map[string]string{"a.md": "text/markdown; charset=utf-8", "a.py": "text/x-python; charset=utf-8", "README": "text/plain; charset=utf-8"} {
		if got := artifact.ContentTypeFor(in); got != want {
			t.Errorf("ContentTypeFor(%q) = %q", in, got)
		}
	}
	if err := artifact.CheckSize(11, 10); err == nil || err.Error() != "artifact too large: 11 B is over the limit of 10 B" {
		t.Errorf("CheckSize: %v", err)
	}
}
