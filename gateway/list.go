package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Bounds of GET /v1/sessions.
const (
	// DefaultListLimit is the page size without ?limit=.
	DefaultListLimit = 100
	// MaxListLimit is the largest ?limit= accepted.
	MaxListLimit = 1000
)

// SessionIndex lists the sessions of the node's session index for GET /v1/sessions
// (internal/node.Node implements it over its journal).
type SessionIndex interface {
	// ListSessions returns up to limit sessions ordered by id, after the id after ("" from
	// the start), with status status ("" for any). ErrNoIndex when the journal keeps none.
	ListSessions(ctx context.Context, status, after string, limit int) ([]SessionSummary, error)
}

// ErrNoIndex is what a SessionIndex answers when the node's journal keeps no session index.
var ErrNoIndex = errors.New("the node's journal keeps no session index")

// Statuses are the statuses of GET /v1/sessions?status=.
var Statuses = []string{"running", "awaiting_human", "interrupted", "completed", "failed", "cancelled"}

// SessionSummary is one session of GET /v1/sessions, read from the session index.
type SessionSummary struct {
	SessionID string `json:"session_id"`
	// Status is running, awaiting_human, interrupted, completed, failed or cancelled.
	Status string `json:"status"`
	// Seq is the session's newest event.
	Seq uint64 `json:"seq"`
	// UpdatedAt is when the newest event was stored.
	UpdatedAt time.Time `json:"updated_at"`
	// DueAt is when the session next needs its node (absent: never).
	DueAt *time.Time `json:"due_at,omitempty"`
	// LeaseOwner is the member hosting it while its lease is live (absent: none).
	LeaseOwner string `json:"lease_owner,omitempty"`
}

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	Sessions []SessionSummary `json:"sessions"`
	// NextCursor, when present, is the ?cursor= of the next page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// listSessions serves GET /v1/sessions?status=&limit=&cursor= from the session index,
// ordered by session id.
func (h *Handler) listSessions(w http.ResponseWriter, r *http.Request) {
	ix := h.cfg.Index
	if ix == nil {
		writeError(w, errorf(CodeUnsupported, "this gateway has no session index"))
		return
	}
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !slices.Contains(Statuses, status) {
		writeError(w, errorf(CodeInvalidArgument, "status must be one of %s, not %q", strings.Join(Statuses, ", "), truncate(status, 40)))
		return
	}
	limit := DefaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			writeError(w, errorf(CodeInvalidArgument, "limit must be 1 to %d: %q", MaxListLimit, truncate(v, 40)))
			return
		}
		limit = n
	}
	after, err := base64.RawURLEncoding.DecodeString(q.Get("cursor"))
	if err != nil {
		writeError(w, errorf(CodeInvalidArgument, "cursor is not one this route returned: %q", truncate(q.Get("cursor"), 40)))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
	defer cancel()
	es, err := ix.ListSessions(ctx, status, string(after), limit+1)
	if errors.Is(err, ErrNoIndex) {
		writeError(w, errorf(CodeUnsupported, "%v", err))
		return
	}
	if err != nil {
		h.cfg.Logger.Warn("list sessions failed", "error", err)
		writeError(w, errorf(CodeUnavailable, "the session index is unavailable: %v", err))
		return
	}
	out := SessionList{Sessions: make([]SessionSummary, 0, min(len(es), limit))}
	for i, e := range es {
		if i == limit {
			out.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(es[i-1].SessionID))
			break
		}
		s := e
		out.Sessions = append(out.Sessions, s)
	}
	writeJSON(w, http.StatusOK, out)
}
