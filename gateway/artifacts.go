package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/errcode"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/transcript"
)

// ArtifactReader reads session artifacts for GET /v1/sessions/{id}/artifacts/{type}/{filename}
// (internal/node.Node implements it over its artifact store).
type ArtifactReader interface {
	// ReadArtifact returns tenant's artifact at path ("{session_id}/{type}/{filename}"),
	// its content type and the sha256 of the content. Errors wrap ErrArtifactNotFound or
	// ErrInvalidArtifactPath where they apply.
	ReadArtifact(ctx context.Context, tenant, path string) (content []byte, contentType, sha256 string, err error)
}

// Errors an ArtifactReader reports (wrapped).
var (
	// ErrArtifactNotFound: no artifact at the path.
	ErrArtifactNotFound = errcode.ErrArtifactNotFound
	// ErrInvalidArtifactPath: the path breaks the artifact path rules.
	ErrInvalidArtifactPath = errcode.ErrInvalidArtifactPath
)

// serveArtifact answers GET /v1/sessions/{id}/artifacts/{type}/{filename}: the content
// as stored, with its content type and an ETag of its sha256.
func (h *Handler) serveArtifact(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := checkSessionID(id); err != nil {
		writeError(w, toAPIError(err))
		return
	}
	if h.cfg.Artifacts == nil {
		writeError(w, errorf(CodeUnsupported, "this gateway has no artifact store"))
		return
	}
	// The session answers the access check and names its tenant, whose part of the
	// store its artifacts are in (also for an admin, who may read every tenant's).
	acc, err := h.grain(id).Access(&messages.AccessRequest{Caller: callerOf(r)}, cluster.WithTimeout(h.cfg.RequestTimeout))
	if err != nil {
		writeError(w, toAPIError(err))
		return
	}
	tenant := acc.GetTenant()
	if tenant == "" {
		tenant = auth.DefaultTenant // a session from before tenancy
	}
	path := id + "/" + r.PathValue("type") + "/" + r.PathValue("filename")
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
	defer cancel()
	content, contentType, sum, err := h.cfg.Artifacts.ReadArtifact(ctx, tenant, path)
	switch {
	case errors.Is(err, ErrArtifactNotFound):
		writeError(w, errorf(CodeNotFound, "no artifact %s", truncate(path, 300)))
		return
	case errors.Is(err, ErrInvalidArtifactPath):
		writeError(w, errorf(CodeInvalidArgument, "%v", err))
		return
	case err != nil:
		writeError(w, hidden(CodeUnavailable, "the artifact store is unavailable; retry", fmt.Errorf("read artifact %s: %w", path, err)))
		return
	}
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	if r.URL.Query().Get("preview") != "" {
		writeJSON(w, http.StatusOK, artifactPreview(r.PathValue("filename"), contentType, content))
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(content)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "sandbox") // never run an artifact as a page of the gateway's origin
	if sum != "" {
		w.Header().Set("ETag", `"`+sum+`"`)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(content)
}

// MaxPreviewBytes bounds the text an artifact preview holds (GET
// /v1/sessions/{id}/artifacts/{type}/{filename}?preview=1); a longer artifact's preview is
// cut, and its download has it all.
const MaxPreviewBytes = 256 << 10

// ArtifactPreview is the answer of GET /v1/sessions/{id}/artifacts/{type}/{filename}?preview=1:
// what the console shows in place of a download.
type ArtifactPreview struct {
	// Kind is how to show it: "markdown" and "code" (HTML, rendered safely by the gateway:
	// no raw HTML, no unsafe links, code highlighted with chroma's classes), "json" and
	// "text" (Text), "image" (fetch the artifact itself) or "binary" (nothing to show).
	Kind string `json:"kind"`
	// ContentType and Size are the artifact's.
	ContentType string `json:"content_type"`
	Size        int    `json:"size"`
	// HTML is a markdown or code artifact rendered.
	HTML string `json:"html,omitempty"`
	// Text is a JSON or text artifact's content.
	Text string `json:"text,omitempty"`
	// Cut is set when the preview holds only the first MaxPreviewBytes.
	Cut bool `json:"cut,omitempty"`
}

// artifactPreview previews content of file filename with contentType.
func artifactPreview(filename, contentType string, content []byte) ArtifactPreview {
	p := ArtifactPreview{ContentType: contentType, Size: len(content)}
	media, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		media = contentType
	}
	ext := strings.ToLower(path.Ext(filename))
	switch {
	case strings.HasPrefix(media, "image/"):
		p.Kind = "image"
		return p
	case !utf8.Valid(cutUTF8(content)):
		p.Kind = "binary"
		return p
	}
	text := string(cutUTF8(content))
	p.Cut = len(text) < len(content)
	switch {
	case media == "text/markdown" || ext == ".md" || ext == ".markdown":
		p.Kind, p.HTML = "markdown", transcript.Markdown(text)
	case media == "application/json" || strings.HasSuffix(media, "+json") || ext == ".json":
		p.Kind, p.Text = "json", text
		if !p.Cut && !json.Valid(content) {
			p.Kind = "text"
		}
	case transcript.CodeLexer(filename):
		p.Kind, p.HTML = "code", transcript.Code(text, filename)
	default:
		p.Kind, p.Text = "text", text
	}
	return p
}

// cutUTF8 is b's first MaxPreviewBytes, cut at a rune boundary.
func cutUTF8(b []byte) []byte {
	if len(b) <= MaxPreviewBytes {
		return b
	}
	n := MaxPreviewBytes
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n]
}
