package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/errcode"
	"github.com/fathom-agents/fathom/messages"
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
