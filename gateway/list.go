package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/errcode"
	"github.com/fathom-agents/fathom/internal/listing"
)

// Bounds of GET /v1/sessions (internal/listing's, shared with the fathom Go API).
const (
	// DefaultListLimit is the page size without ?limit=.
	DefaultListLimit = listing.DefaultLimit
	// MaxListLimit is the largest ?limit= accepted.
	MaxListLimit = listing.MaxLimit
)

// SessionIndex lists the sessions of the node's session index for GET /v1/sessions
// (internal/node.Node implements it over its journal): ListSessions returns the
// sessions a ListQuery selects, newest first (by CreatedAt, then by SessionID, both
// descending); ErrNoIndex when the journal keeps none.
type SessionIndex = listing.Index

// ListQuery is what GET /v1/sessions asks the index for: Status, UserID, Since, Until,
// GoalContains, ForkedFrom, the caller's Tenant and Owner (set from its principal: a principal's
// listing, its pages and its cursors never reach another tenant's rows), the cursor's
// AfterCreated and AfterID, and Limit.
type ListQuery = listing.Query

// ErrNoIndex is what a SessionIndex answers when the node's journal keeps no session index.
var ErrNoIndex = errcode.ErrNoIndex

// Statuses are the statuses of GET /v1/sessions?status=.
var Statuses = listing.Statuses

// SessionSummary is one session of GET /v1/sessions, read from the session index:
// session_id, status, seq, updated_at, due_at, lease_owner, user_id, tenant, owner,
// goal, forked_from, created_at, cost_usd.
type SessionSummary = listing.Summary

// SessionList is the body of GET /v1/sessions: the sessions and, when there are more,
// the next page's ?cursor= (next_cursor).
type SessionList = listing.Page

// listSessions serves GET /v1/sessions?status=&user_id=&since=&until=&goal=&forked_from=&limit=&cursor=
// from the session index, newest first (forked_from=ID: the forks of session ID).
func (h *Handler) listSessions(w http.ResponseWriter, r *http.Request) {
	ix := h.cfg.Index
	if ix == nil {
		writeError(w, errorf(CodeUnsupported, "this gateway has no session index"))
		return
	}
	lq, aerr := parseListQuery(r.URL.Query())
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	// Filtered in the index's query, not after it: pages and cursors stay inside.
	p, _ := auth.FromContext(r.Context())
	listing.Scope(&lq, h.cfg.Tenancy, p, false, r.URL.Query().Get("tenant")) // an admin may pick a tenant
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
	defer cancel()
	out, err := listing.List(ctx, ix, lq)
	if errors.Is(err, ErrNoIndex) {
		writeError(w, errorf(CodeUnsupported, "%v", err))
		return
	}
	if err != nil {
		h.cfg.Logger.Warn("list sessions failed", "error", err)
		writeError(w, hidden(CodeUnavailable, "the session index is unavailable; retry", err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// MaxGoalFilterBytes bounds GET /v1/sessions?goal=.
const MaxGoalFilterBytes = listing.MaxGoalFilterBytes

// parseListQuery reads GET /v1/sessions's parameters; a bad one is a clear 400.
func parseListQuery(q url.Values) (ListQuery, *apiError) {
	lq := ListQuery{Status: q.Get("status"), UserID: q.Get("user_id"), GoalContains: q.Get("goal"), ForkedFrom: q.Get("forked_from"), Limit: DefaultListLimit}
	if lq.ForkedFrom != "" {
		if err := checkSessionIDField("forked_from", lq.ForkedFrom); err != nil {
			return lq, toAPIError(err)
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return lq, errorf(CodeInvalidArgument, "limit must be 1 to %d: %q", MaxListLimit, truncate(v, 40))
		}
		lq.Limit = n
	}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"since", &lq.Since}, {"until", &lq.Until}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return lq, errorf(CodeInvalidArgument, "%s must be an RFC 3339 time (2026-11-24T01:00:00Z): %q", p.name, truncate(v, 40))
		}
		*p.to = t
	}
	if err := listing.Check(lq); err != nil {
		return lq, errorf(CodeInvalidArgument, "%v", err)
	}
	if c := q.Get("cursor"); c != "" {
		if err := listing.SetCursor(&lq, c); err != nil {
			return lq, errorf(CodeInvalidArgument, "%v", err)
		}
	}
	return lq, nil
}
