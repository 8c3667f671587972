package gateway

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"

	"github.com/fathom-agents/fathom/persistence"
)

// Bounds of GET /v1/sessions.
const (
	// DefaultListLimit is the page size without ?limit=.
	DefaultListLimit = 100
	// MaxListLimit is the largest ?limit= accepted.
	MaxListLimit = 1000
)

// indexed is what Config.Sessions offers when the node's journal keeps the session index
// (internal/node.Node does).
type indexed interface {
	SessionIndex() persistence.SessionIndex
}

// SessionSummary is one session of GET /v1/sessions, read from the session index.
type SessionSummary struct {
	SessionID string `json:"session_id"`
	// Status is running, awaiting_human, interrupted, completed or failed.
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
	ix := h.sessionIndex()
	if ix == nil {
		writeError(w, errorf(CodeUnsupported, "this node's journal keeps no session index"))
		return
	}
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !persistence.ValidStatus(status) {
		writeError(w, errorf(CodeInvalidArgument, "status must be running, awaiting_human, interrupted, completed or failed, not %q", truncate(status, 40)))
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
		s := SessionSummary{SessionID: e.SessionID, Status: e.Status, Seq: e.Seq, UpdatedAt: e.UpdatedAt}
		if !e.DueAt.IsZero() {
			due := e.DueAt
			s.DueAt = &due
		}
		if e.LeaseOwner != "" && e.LeaseExpires.After(time.Now()) {
			s.LeaseOwner = e.LeaseOwner
		}
		out.Sessions = append(out.Sessions, s)
	}
	writeJSON(w, http.StatusOK, out)
}

// sessionIndex is the session index Config.Sessions offers, nil if none.
func (h *Handler) sessionIndex() persistence.SessionIndex {
	if s, ok := h.cfg.Sessions.(indexed); ok {
		return s.SessionIndex()
	}
	return nil
}
