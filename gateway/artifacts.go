package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/fathom-agents/fathom/internal/errcode"
)

// ArtifactReader reads session artifacts for GET /v1/sessions/{id}/artifacts/{type}/{filename}
// (internal/node.Node implements it over its artifact store).
type ArtifactReader interface {
	// ReadArtifact returns the content at path ("{session_id}/{type}/{filename}"), its
	// content type and the sha256 of the content. Errors wrap ErrArtifactNotFound or
	// ErrInvalidArtifactPath where they apply.
	ReadArtifact(ctx context.Context, path string) (content []byte, contentType, sha256 string, err error)
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
	if err := h.access(callerOf(r), id, false); err != nil {
		writeError(w, toAPIError(err))
		return
	}
	path := id + "/" + r.PathValue("type") + "/" + r.PathValue("filename")
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
	defer cancel()
	content, contentType, sum, err := h.cfg.Artifacts.ReadArtifact(ctx, path)
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
