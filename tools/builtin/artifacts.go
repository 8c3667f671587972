package builtin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/tools"
)

// DefaultArtifactReadLimit bounds the content read_artifact returns in one call, in
// bytes; the model pages through longer artifacts with offset.
const DefaultArtifactReadLimit = 20000

// maxListed bounds the entries list_artifacts shows.
const maxListed = 200

// WriteArtifactArgs are write_artifact's arguments.
type WriteArtifactArgs struct {
	// Type is the artifact's kind.
	Type string `json:"type" jsonschema:"enum=research,enum=code,enum=drafts,enum=data,enum=logs" jsonschema_description:"Kind of artifact: research (notes, findings, sources), code (programs), drafts (documents being written), data (tables, results) or logs."`
	// Filename names it inside its type.
	Filename string `json:"filename" jsonschema:"minLength=1,maxLength=255" jsonschema_description:"A plain file name such as findings.md or analysis.py: no directories, no leading dot, at most 255 bytes. Writing an existing name replaces that artifact."`
	// Content is the whole file.
	Content string `json:"content" jsonschema_description:"The complete content of the file (text). It replaces any previous version."`
	// ContentType is its MIME type.
	ContentType string `json:"content_type,omitempty" jsonschema:"maxLength=255" jsonschema_description:"MIME type such as text/markdown or application/json (default: guessed from the file name's extension, else text/plain)."`
}

// ReadArtifactArgs are read_artifact's arguments.
type ReadArtifactArgs struct {
	// Path is "{type}/{filename}" or the full path.
	Path string `json:"path,omitempty" jsonschema:"maxLength=1024" jsonschema_description:"The artifact's path as write_artifact or list_artifacts gave it ({session_id}/{type}/{filename}), or just {type}/{filename}. Give either path or type and filename."`
	// Type and Filename name it instead of Path.
	Type string `json:"type,omitempty" jsonschema:"enum=research,enum=code,enum=drafts,enum=data,enum=logs,enum=results" jsonschema_description:"The artifact's type, with filename, instead of path (results: a tool result too large to show whole, stored by the runtime)."`
	// Filename goes with Type.
	Filename string `json:"filename,omitempty" jsonschema:"maxLength=255" jsonschema_description:"The artifact's file name, with type, instead of path."`
	// Offset is the first byte to return.
	Offset int64 `json:"offset,omitempty" jsonschema:"minimum=0" jsonschema_description:"Byte offset to start reading at, to continue a long artifact where the previous read was cut (default 0)."`
}

// ListArtifactsArgs are list_artifacts' arguments.
type ListArtifactsArgs struct {
	// Type filters the list.
	Type string `json:"type,omitempty" jsonschema:"enum=research,enum=code,enum=drafts,enum=data,enum=logs,enum=results" jsonschema_description:"Only list artifacts of this type (default: all types)."`
}

// ArtifactTools returns write_artifact, read_artifact and list_artifacts backed by
// store. Each call works in the calling session's workspace (tools.CallInfo's
// SessionID): a session reads and lists only its own artifacts. readLimit bounds the
// bytes read_artifact returns per call (0 = DefaultArtifactReadLimit).
func ArtifactTools(store artifact.Store, readLimit int) []tools.Tool {
	if readLimit <= 0 {
		readLimit = DefaultArtifactReadLimit
	}
	return []tools.Tool{WriteArtifact(store), ReadArtifact(store, readLimit), ListArtifacts(store)}
}

// WriteArtifact returns the write_artifact tool.
func WriteArtifact(store artifact.Store) tools.Tool {
	const name = "write_artifact"
	return tools.MustNew(name,
		"Save a file to this session's workspace: research notes, code, drafts, data or logs. Use it for any "+
			"deliverable longer than a few paragraphs, for anything a later step or agent must build on, and for "+
			"results the user should get as a file. Then refer to the artifact by the path it returns instead of "+
			"repeating its content. Writing the same type and filename again replaces the file.",
		tools.SandboxNone, func(ctx context.Context, a WriteArtifactArgs) (any, error) {
			tenant, sid, terr := sessionOf(ctx, name)
			if terr != nil {
				return nil, terr
			}
			ref := artifact.Ref{Tenant: tenant, SessionID: sid, Type: a.Type, Filename: a.Filename}
			if err := artifact.ValidateType(a.Type); err != nil {
				return nil, badInput(name, err, tools.Field{Key: "type", Value: a.Type})
			}
			if err := artifact.ValidateFilename(a.Filename); err != nil {
				return nil, badInput(name, err, tools.Field{Key: "filename", Value: a.Filename})
			}
			ct := a.ContentType
			if ct == "" {
				ct = artifact.ContentTypeFor(a.Filename)
			}
			info, err := store.Write(ctx, ref, []byte(a.Content), ct)
			if err != nil {
				return nil, storeError(ctx, name, err, tools.Field{Key: "type", Value: a.Type}, tools.Field{Key: "filename", Value: a.Filename})
			}
			tools.RecordArtifact(ctx, tools.Artifact{Path: info.Path, Type: info.Type, Filename: info.Filename,
				ContentType: info.ContentType, Size: info.Size, SHA256: info.SHA256, Overwrote: info.Overwrote})
			replaced := ""
			if info.Overwrote {
				replaced = " It replaced the previous version."
			}
			return fmt.Sprintf("Saved artifact %s (%s, %s, sha256 %s).%s Refer to it by this path; read it back with read_artifact.",
				info.Path, artifact.FormatSize(info.Size), info.ContentType, short(info.SHA256), replaced), nil
		})
}

// ReadArtifact returns the read_artifact tool; it returns at most limit bytes per call.
// It only reads (tools.NoEffects).
func ReadArtifact(store artifact.Store, limit int) tools.Tool {
	const name = "read_artifact"
	return tools.WithoutEffects(tools.MustNew(name,
		"Read a file from this session's workspace, by the path write_artifact or list_artifacts gave, or by type "+
			"and filename. Long files come back in parts: the answer says where it was cut and which offset continues it.",
		tools.SandboxNone, func(ctx context.Context, a ReadArtifactArgs) (any, error) {
			tenant, sid, terr := sessionOf(ctx, name)
			if terr != nil {
				return nil, terr
			}
			ref, terr := readRef(name, sid, a)
			if terr != nil {
				return nil, terr
			}
			content, info, err := store.Read(ctx, tenant, ref.Path())
			if err != nil {
				return nil, storeError(ctx, name, err, tools.Field{Key: "path", Value: ref.Path()})
			}
			return renderArtifact(name, info, content, a.Offset, limit)
		}))
}

// readRef resolves read_artifact's arguments to an artifact of session sid.
func readRef(tool, sid string, a ReadArtifactArgs) (artifact.Ref, *tools.ToolError) {
	var ref artifact.Ref
	switch {
	case a.Path != "" && (a.Type != "" || a.Filename != ""):
		return ref, tools.ValidationError(tool, "give either path or type and filename, not both")
	case a.Path != "":
		r, err := artifact.ResolvePath(sid, a.Path)
		if err != nil {
			return ref, badInput(tool, err, tools.Field{Key: "path", Value: a.Path})
		}
		if r.SessionID != sid {
			return ref, tools.PermissionError(tool, fmt.Sprintf("artifact %s belongs to another session; a session can read only its own artifacts (list_artifacts shows them)", a.Path))
		}
		ref = r
	case a.Type != "" && a.Filename != "":
		ref = artifact.Ref{SessionID: sid, Type: a.Type, Filename: a.Filename}
		if err := artifact.ValidateType(a.Type); err != nil {
			return ref, badInput(tool, err, tools.Field{Key: "type", Value: a.Type})
		}
		if err := artifact.ValidateFilename(a.Filename); err != nil {
			return ref, badInput(tool, err, tools.Field{Key: "filename", Value: a.Filename})
		}
	default:
		return ref, tools.ValidationError(tool, "name the artifact: give path (e.g. research/notes.md), or type and filename")
	}
	return ref, nil
}

// renderArtifact shows content from offset, at most limit bytes, cut on a character
// boundary, and says what was cut.
func renderArtifact(tool string, info artifact.Info, content []byte, offset int64, limit int) (string, error) {
	size := int64(len(content))
	if offset > size || offset < 0 {
		return "", tools.ValidationError(tool, fmt.Sprintf("offset %d is past the end of %s, which has %d bytes", offset, info.Path, size))
	}
	head := fmt.Sprintf("Artifact %s (%s, %d bytes, sha256 %s)", info.Path, info.ContentType, size, short(info.SHA256))
	if !utf8.Valid(content) {
		return head + " holds binary data; it cannot be shown as text.", nil
	}
	start := offset
	for start < size && !utf8.RuneStart(content[start]) {
		start++ // never start inside a character
	}
	end := min(start+int64(limit), size)
	for end < size && end > start && !utf8.RuneStart(content[end]) {
		end-- // nor cut one
	}
	var b strings.Builder
	b.WriteString(head)
	if start > 0 {
		fmt.Fprintf(&b, ", from byte %d", start)
	}
	b.WriteString(":\n")
	b.Write(content[start:end])
	if end < size {
		fmt.Fprintf(&b, "\n[Cut: showed bytes %d-%d of %d; %d bytes not shown. Call read_artifact with offset=%d to read on.]", start, end, size, size-end, end)
	}
	return b.String(), nil
}

// ListArtifacts returns the list_artifacts tool. It only reads (tools.NoEffects).
func ListArtifacts(store artifact.Store) tools.Tool {
	const name = "list_artifacts"
	return tools.WithoutEffects(tools.MustNew(name,
		"List the files in this session's workspace (written by you or by earlier steps), with their paths, sizes "+
			"and content types. Check it before writing, to build on existing artifacts instead of duplicating them.",
		tools.SandboxNone, func(ctx context.Context, a ListArtifactsArgs) (any, error) {
			tenant, sid, terr := sessionOf(ctx, name)
			if terr != nil {
				return nil, terr
			}
			if a.Type != "" {
				if err := artifact.ValidateType(a.Type); err != nil {
					return nil, badInput(name, err, tools.Field{Key: "type", Value: a.Type})
				}
			}
			infos, err := store.List(ctx, tenant, sid, a.Type)
			if err != nil {
				return nil, storeError(ctx, name, err)
			}
			what := "artifacts"
			if a.Type != "" {
				what = a.Type + " artifacts"
			}
			if len(infos) == 0 {
				return fmt.Sprintf("No %s in this session's workspace yet.", what), nil
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%d %s in this session's workspace:", len(infos), what)
			for i, in := range infos {
				if i == maxListed {
					fmt.Fprintf(&b, "\n… and %d more (list one type at a time to see them).", len(infos)-maxListed)
					break
				}
				fmt.Fprintf(&b, "\n- %s (%s, %s)", in.Path, artifact.FormatSize(in.Size), in.ContentType)
			}
			return b.String(), nil
		}))
}

// sessionOf returns the calling session's tenant (auth.TenantOf: the session's tool
// runner names it) and id: the artifact tools work only inside a session, and only in
// its tenant's part of the store.
func sessionOf(ctx context.Context, tool string) (tenant, sid string, terr *tools.ToolError) {
	c, _ := tools.CallInfo(ctx)
	if c.SessionID == "" {
		return "", "", tools.ExecutionError(tool, "artifacts belong to a session, and this call was made outside one", false)
	}
	if err := artifact.ValidateSessionID(c.SessionID); err != nil {
		return "", "", tools.ExecutionError(tool, fmt.Sprintf("this session's id cannot name an artifact directory: %v", err), false)
	}
	tenant = auth.TenantOf(ctx)
	if err := artifact.ValidateTenant(tenant); err != nil {
		return "", "", tools.ExecutionError(tool, fmt.Sprintf("this session's tenant cannot name an artifact directory: %v", err), false)
	}
	return tenant, c.SessionID, nil
}

// badInput is the validation error of an argument that breaks the path rules.
func badInput(tool string, err error, ctx ...tools.Field) *tools.ToolError {
	msg := err.Error()
	var pe *artifact.PathError
	if errors.As(err, &pe) {
		msg = fmt.Sprintf("%q %s", pe.Path, pe.Reason)
	}
	return tools.ValidationError(tool, msg, ctx...)
}

// storeError classifies a store failure: bad input the model can fix is a validation
// error; a missing artifact too (it can list and pick another); a write over the
// tenant's quota of artifact bytes is an execution error that says so, not retryable
// (no write succeeds until the quota's period turns); an outage is a retryable
// execution error; a timeout or cancellation goes back as is, for the executor to
// report.
func storeError(ctx context.Context, tool string, err error, fields ...tools.Field) error {
	var se *artifact.SizeError
	var qe *artifact.QuotaError
	switch {
	case errors.As(err, &qe):
		return tools.ExecutionError(tool, fmt.Sprintf("the artifact was not saved: tenant %s has written %s of artifacts %s, and this %s would pass its %s of %d bytes. "+
			"No artifact can be saved until the quota resets at the next UTC day (or the node's operator raises it): keep the content in your answer instead",
			qe.Tenant, artifact.FormatSize(qe.Used), qe.Period, artifact.FormatSize(qe.Size), qe.Quota, qe.Limit),
			false, append(fields, tools.Field{Key: "quota", Value: qe.Quota}, tools.Field{Key: "limit_bytes", Value: qe.Limit})...)
	case errors.As(err, &se):
		return tools.ValidationError(tool, fmt.Sprintf("content is %s; an artifact may hold at most %s: split it into several artifacts",
			artifact.FormatSize(se.Size), artifact.FormatSize(se.Limit)), fields...)
	case errors.Is(err, artifact.ErrInvalidPath):
		return badInput(tool, err, fields...)
	case errors.Is(err, artifact.ErrInvalidContentType):
		return tools.ValidationError(tool, err.Error(), fields...)
	case errors.Is(err, artifact.ErrNotFound):
		return tools.ValidationError(tool, "there is no such artifact in this session; list_artifacts shows the ones that exist", fields...)
	case ctx.Err() != nil:
		return err
	}
	return tools.ExecutionError(tool, "the artifact store failed: "+err.Error(), true)
}

// short abbreviates a hex digest for people and models.
func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
