package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/fathom-agents/fathom/internal/errcode"
)

// SessionDeleter removes terminal sessions for DELETE /v1/sessions/{id}
// (internal/node.Node implements it: journal, snapshots, vectors and artifacts).
type SessionDeleter interface {
	// DeleteSession removes session id. Errors wrap ErrSessionNotFound,
	// ErrSessionNotTerminal or ErrNoIndex where they apply.
	DeleteSession(ctx context.Context, id string) error
}

// Errors a SessionDeleter reports (wrapped).
var (
	// ErrSessionNotFound: the node's journal has no such session.
	ErrSessionNotFound = errcode.ErrSessionNotFound
	// ErrSessionNotTerminal: the session is not completed, failed or cancelled; nothing
	// was deleted.
	ErrSessionNotTerminal = errcode.ErrSessionNotTerminal
)

// DeletedSession is the body of a successful DELETE /v1/sessions/{id}.
type DeletedSession struct {
	SessionID string `json:"session_id"`
	Deleted   bool   `json:"deleted"`
}

// deleteSession serves DELETE /v1/sessions/{id}: 200 once the session's journal,
// snapshots, vectors and artifacts are gone; 409 failed_precondition for a session
// that is not terminal (cancel it first), 404 for an unknown one.
func (h *Handler) deleteSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := checkSessionID(id); err != nil {
		writeError(w, toAPIError(err))
		return
	}
	if h.cfg.Deleter == nil {
		writeError(w, errorf(CodeUnsupported, "this gateway cannot delete sessions"))
		return
	}
	if err := h.access(callerOf(r), id, true); err != nil {
		writeError(w, toAPIError(err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
	defer cancel()
	err := h.cfg.Deleter.DeleteSession(ctx, id)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, DeletedSession{SessionID: id, Deleted: true})
	case errors.Is(err, ErrSessionNotFound):
		writeError(w, errorf(CodeNotFound, "session %q not found", truncate(id, 200)))
	case errors.Is(err, ErrSessionNotTerminal):
		writeError(w, errorf(CodeFailedPrecondition, "%v (cancel a running session first: POST /v1/sessions/{id}/cancel)", err))
	case errors.Is(err, ErrNoIndex):
		writeError(w, errorf(CodeUnsupported, "%v", err))
	default:
		writeError(w, hidden(CodeUnavailable, "the session could not be deleted: its journal, vectors or artifacts are unavailable; repeat the delete", fmt.Errorf("delete session %s: %w", id, err)))
	}
}
