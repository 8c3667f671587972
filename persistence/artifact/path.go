package artifact

import (
	"fmt"
	"mime"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fathom-agents/fathom/auth"
)

// The artifact types: the second segment of every path.
const (
	// TypeResearch: notes, findings, sources.
	TypeResearch = "research"
	// TypeCode: programs and scripts.
	TypeCode = "code"
	// TypeDrafts: documents being written.
	TypeDrafts = "drafts"
	// TypeData: data sets, tables, results.
	TypeData = "data"
	// TypeLogs: run logs and transcripts.
	TypeLogs = "logs"
	// TypeResults: tool results over the session's cap, stored whole by the node as
	// results/{call_id} (the tool_result event keeps a head and a tail).
	TypeResults = "results"
)

// Types lists the artifact types in their canonical order.
var Types = []string{TypeResearch, TypeCode, TypeDrafts, TypeData, TypeLogs, TypeResults}

// MaxNameBytes bounds a session id and a filename (the common file system limit).
const MaxNameBytes = 255

// MaxContentTypeBytes bounds a content type.
const MaxContentTypeBytes = 255

// TenantsDir is the first segment of every tenant's keys: a tenant's artifacts live
// under "tenants/{tenant}/" in a directory or bucket (Ref.Key).
const TenantsDir = "tenants"

// Ref names one artifact: its tenant and the parts of its path.
type Ref struct {
	// Tenant is the tenant of the session that owns the artifact (the session's tenant,
	// auth.DefaultTenant for sessions from before tenancy). It is part of the artifact's
	// key, not of its path.
	Tenant string `json:"tenant"`
	// SessionID is the session that owns the artifact.
	SessionID string `json:"session_id"`
	// Type is one of Types.
	Type string `json:"type"`
	// Filename is the file's name inside its type: one segment, no directories.
	Filename string `json:"filename"`
}

// Path returns "{session_id}/{type}/{filename}": how sessions, events and the gateway
// name the artifact (within its tenant).
func (r Ref) Path() string { return r.SessionID + "/" + r.Type + "/" + r.Filename }

// Key returns the artifact's physical key in a store:
// "tenants/{tenant}/{session_id}/{type}/{filename}".
func (r Ref) Key() string { return TenantsDir + "/" + r.Tenant + "/" + r.Path() }

// LegacyKey returns the key the artifact had before tenancy: its path, without a tenant
// prefix. Stores still read (and delete) artifacts found there.
func (r Ref) LegacyKey() string { return r.Path() }

// PathError is the error of a path (or session id, type, filename) that breaks a rule.
// It wraps ErrInvalidPath.
type PathError struct {
	// Path is what was checked, as given.
	Path string
	// Reason says which rule it breaks and what to do instead.
	Reason string
}

// Error implements error.
func (e *PathError) Error() string {
	return fmt.Sprintf("%v %q: %s", ErrInvalidPath, e.Path, e.Reason)
}

// Unwrap returns ErrInvalidPath.
func (e *PathError) Unwrap() error { return ErrInvalidPath }

// Validate checks the four parts of r:
//
//   - Tenant is a tenant name (ValidateTenant).
//   - Type is one of Types (research, code, drafts, data, logs).
//   - SessionID and Filename are each one non-empty segment of at most MaxNameBytes bytes
//     of valid UTF-8, without control characters, "/" or "\", not "." or "..", and not
//     starting with "." (hidden names are reserved for the stores' own files).
//
// Artifacts are flat within their type: a filename has no directories, so "a/b.md" is
// rejected (name it "a_b.md"); this keeps every backend free of file/directory clashes.
func (r Ref) Validate() error {
	if err := ValidateTenant(r.Tenant); err != nil {
		return err
	}
	return r.validatePath()
}

// validatePath checks the parts of r's path (not its tenant).
func (r Ref) validatePath() error {
	if err := ValidateType(r.Type); err != nil {
		return err
	}
	if err := checkSegment("session id", r.SessionID); err != nil {
		return err
	}
	return ValidateFilename(r.Filename)
}

// ValidateType checks that typ is one of Types.
func ValidateType(typ string) error {
	if slices.Contains(Types, typ) {
		return nil
	}
	return &PathError{Path: typ, Reason: "unknown artifact type; use one of " + strings.Join(Types, ", ")}
}

// ValidateTenant checks a tenant as a key segment: a tenant name as auth.CheckTenant
// accepts it (1 to 64 letters, digits, '.', '_' or '-', starting with a letter or
// digit). Errors are *PathError.
func ValidateTenant(tenant string) error {
	if err := auth.CheckTenant(tenant); err != nil {
		return &PathError{Path: tenant, Reason: "is not a tenant name: " + err.Error()}
	}
	return nil
}

// WithTenant returns r under tenant.
func (r Ref) WithTenant(tenant string) Ref {
	r.Tenant = tenant
	return r
}

// ValidateSessionID checks a session id as a path segment (see Ref.Validate).
func ValidateSessionID(id string) error { return checkSegment("session id", id) }

// ValidateFilename checks a filename (see Ref.Validate).
func ValidateFilename(name string) error { return checkSegment("filename", name) }

// checkSegment applies the segment rules of Ref.Validate to s, naming it what.
func checkSegment(what, s string) error {
	fail := func(reason string) error { return &PathError{Path: s, Reason: what + " " + reason} }
	switch {
	case s == "":
		return fail("is empty")
	case strings.HasPrefix(s, "/"):
		return fail("is an absolute path; give a plain name such as notes.md")
	case strings.Contains(s, `\`):
		return fail(`contains a backslash; use a plain name such as notes.md`)
	case s == "." || s == ".." || strings.HasPrefix(s, "../") || strings.HasSuffix(s, "/..") || strings.Contains(s, "/../"):
		return fail(`contains ".." (path traversal is not allowed); give a plain name such as notes.md`)
	case strings.Contains(s, "/"):
		return fail(`contains "/"; artifacts are flat within their type, so name it without directories (e.g. src_main.py)`)
	case strings.HasPrefix(s, "."):
		return fail(`starts with "."; hidden names are reserved`)
	case len(s) > MaxNameBytes:
		return fail(fmt.Sprintf("is %d bytes long; the limit is %d", len(s), MaxNameBytes))
	case !utf8.ValidString(s):
		return fail("is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return fail(fmt.Sprintf("contains the control character %U", r))
		}
	}
	return nil
}

// ParsePath splits and validates "{session_id}/{type}/{filename}". It rejects absolute
// paths, backslashes, ".." segments, empty segments, nested directories and everything
// Ref.Validate rejects, with a *PathError wrapping ErrInvalidPath. The Ref it returns
// has no Tenant: the caller names it (WithTenant).
func ParsePath(path string) (Ref, error) {
	parts, err := splitPath(path)
	if err != nil {
		return Ref{}, err
	}
	if len(parts) != 3 {
		return Ref{}, &PathError{Path: path, Reason: fmt.Sprintf("has %d parts; artifact paths are exactly {session_id}/{type}/{filename} (no directories inside a type)", len(parts))}
	}
	r := Ref{SessionID: parts[0], Type: parts[1], Filename: parts[2]}
	if err := r.validatePath(); err != nil {
		return Ref{}, err
	}
	return r, nil
}

// ResolvePath parses path as either "{type}/{filename}", relative to session
// sessionID, or a full "{session_id}/{type}/{filename}" (whose session may differ from
// sessionID: callers that confine a session to its own artifacts check Ref.SessionID).
// Errors are those of ParsePath.
func ResolvePath(sessionID, path string) (Ref, error) {
	parts, err := splitPath(path)
	if err != nil {
		return Ref{}, err
	}
	var r Ref
	switch len(parts) {
	case 2:
		r = Ref{SessionID: sessionID, Type: parts[0], Filename: parts[1]}
	case 3:
		r = Ref{SessionID: parts[0], Type: parts[1], Filename: parts[2]}
	default:
		return Ref{}, &PathError{Path: path, Reason: fmt.Sprintf("has %d parts; give {type}/{filename} or {session_id}/{type}/{filename} (no directories inside a type)", len(parts))}
	}
	if err := r.validatePath(); err != nil {
		return Ref{}, err
	}
	return r, nil
}

// splitPath applies the whole-path rules (not empty, not absolute, no backslash, no
// "..") and splits path at "/".
func splitPath(path string) ([]string, error) {
	fail := func(reason string) error { return &PathError{Path: path, Reason: reason} }
	switch {
	case path == "":
		return nil, fail("is empty")
	case strings.HasPrefix(path, "/"):
		return nil, fail("is absolute; artifact paths are {session_id}/{type}/{filename}")
	case strings.Contains(path, `\`):
		return nil, fail("contains a backslash; artifact paths are {session_id}/{type}/{filename} with / between the parts")
	}
	parts := strings.Split(path, "/")
	if slices.Contains(parts, "..") {
		return nil, fail(`contains ".." (path traversal is not allowed)`)
	}
	return parts, nil
}

// NormalizeContentType checks a content type (type/subtype with optional parameters, at
// most MaxContentTypeBytes) and returns it in canonical form; "" becomes
// DefaultContentType. Errors wrap ErrInvalidContentType.
func NormalizeContentType(ct string) (string, error) {
	ct = strings.TrimSpace(ct)
	if ct == "" {
		return DefaultContentType, nil
	}
	if len(ct) > MaxContentTypeBytes {
		return "", fmt.Errorf("%w: %d bytes; the limit is %d", ErrInvalidContentType, len(ct), MaxContentTypeBytes)
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || !strings.Contains(mt, "/") {
		return "", fmt.Errorf("%w %q: want type/subtype, e.g. text/markdown", ErrInvalidContentType, ct)
	}
	if cs, ok := params["charset"]; ok {
		params["charset"] = strings.ToLower(cs) // case-insensitive (RFC 2046)
	}
	out := mime.FormatMediaType(mt, params)
	if out == "" {
		return "", fmt.Errorf("%w %q: want type/subtype, e.g. text/markdown", ErrInvalidContentType, ct)
	}
	return out, nil
}

// ContentTypeFor guesses a content type from a filename's extension; text/plain when
// the extension is unknown (artifacts written by the model are text).
func ContentTypeFor(filename string) string {
	i := strings.LastIndexByte(filename, '.')
	if i > 0 {
		switch strings.ToLower(filename[i:]) {
		case ".md", ".markdown":
			return "text/markdown; charset=utf-8"
		case ".py":
			return "text/x-python; charset=utf-8"
		case ".go":
			return "text/x-go; charset=utf-8"
		case ".csv":
			return "text/csv; charset=utf-8"
		case ".json":
			return "application/json"
		case ".yaml", ".yml":
			return "application/yaml"
		case ".txt", ".log":
			return "text/plain; charset=utf-8"
		}
		if ct := mime.TypeByExtension(filename[i:]); ct != "" {
			return ct
		}
	}
	return "text/plain; charset=utf-8"
}
