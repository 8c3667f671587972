package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/auth"
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
	// ListSessions returns the sessions q selects, newest first (by CreatedAt, then by
	// SessionID, both descending). ErrNoIndex when the journal keeps none.
	ListSessions(ctx context.Context, q ListQuery) ([]SessionSummary, error)
}

// ListQuery is what GET /v1/sessions asks the index for.
type ListQuery struct {
	// Status, UserID: only sessions with this status, of this user ("" for any).
	Status, UserID string
	// Since, Until: only sessions created at or after Since and before Until (zero: open).
	Since, Until time.Time
	// GoalContains: only sessions whose goal contains this text, ignoring case.
	GoalContains string
	// Tenant, Owner: only sessions of this tenant, of this owner ("" for any). The
	// gateway sets them from the caller's principal: a principal's listing, its pages
	// and its cursors never reach another tenant's rows.
	Tenant, Owner string
	// AfterCreated and AfterID continue a listing after that session (AfterID "": from
	// the newest).
	AfterCreated time.Time
	AfterID      string
	// Limit bounds the sessions returned.
	Limit int
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
	// UserID is who started it (absent: unknown).
	UserID string `json:"user_id,omitempty"`
	// Tenant is the tenant it belongs to; Owner the subject of the principal that
	// started (or forked) it (absent: started from inside the node).
	Tenant string `json:"tenant"`
	Owner  string `json:"owner,omitempty"`
	// Goal is its goal, cut to 1,000 bytes.
	Goal string `json:"goal"`
	// CreatedAt is when its first event was stored.
	CreatedAt time.Time `json:"created_at"`
	// CostUSD is its model cost so far (the node's price table).
	CostUSD float64 `json:"cost_usd"`
}

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	Sessions []SessionSummary `json:"sessions"`
	// NextCursor, when present, is the ?cursor= of the next page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// listSessions serves GET /v1/sessions?status=&user_id=&since=&until=&goal=&limit=&cursor=
// from the session index, newest first.
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
	if lq.Tenant, lq.Owner = h.cfg.Tenancy.Visible(p); p.Admin() {
		lq.Tenant = r.URL.Query().Get("tenant") // an admin may pick one
	}
	limit := lq.Limit
	lq.Limit++ // one more tells whether there is a next page
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
	defer cancel()
	es, err := ix.ListSessions(ctx, lq)
	if errors.Is(err, ErrNoIndex) {
		writeError(w, errorf(CodeUnsupported, "%v", err))
		return
	}
	if err != nil {
		h.cfg.Logger.Warn("list sessions failed", "error", err)
		writeError(w, hidden(CodeUnavailable, "the session index is unavailable; retry", err))
		return
	}
	out := SessionList{Sessions: make([]SessionSummary, 0, min(len(es), limit))}
	for i, e := range es {
		if i == limit {
			out.NextCursor = encodeCursor(es[i-1])
			break
		}
		out.Sessions = append(out.Sessions, e)
	}
	writeJSON(w, http.StatusOK, out)
}

// MaxGoalFilterBytes bounds GET /v1/sessions?goal=.
const MaxGoalFilterBytes = 200

// parseListQuery reads GET /v1/sessions's parameters; a bad one is a clear 400.
func parseListQuery(q url.Values) (ListQuery, *apiError) {
	lq := ListQuery{Status: q.Get("status"), UserID: q.Get("user_id"), GoalContains: q.Get("goal"), Limit: DefaultListLimit}
	if lq.Status != "" && !slices.Contains(Statuses, lq.Status) {
		return lq, errorf(CodeInvalidArgument, "status must be one of %s, not %q", strings.Join(Statuses, ", "), truncate(lq.Status, 40))
	}
	if len(lq.GoalContains) > MaxGoalFilterBytes {
		return lq, errorf(CodeInvalidArgument, "goal filter exceeds %d bytes", MaxGoalFilterBytes)
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
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
	if !lq.Since.IsZero() && !lq.Until.IsZero() && !lq.Since.Before(lq.Until) {
		return lq, errorf(CodeInvalidArgument, "since (%s) must be before until (%s)", lq.Since.Format(time.RFC3339), lq.Until.Format(time.RFC3339))
	}
	if c := q.Get("cursor"); c != "" {
		at, id, ok := decodeCursor(c)
		if !ok {
			return lq, errorf(CodeInvalidArgument, "cursor is not one this route returned: %q", truncate(c, 40))
		}
		lq.AfterCreated, lq.AfterID = at, id
	}
	return lq, nil
}

// A cursor is base64url("c1." + creation Unix nanoseconds + "." + session id) of the last
// session of a page.
func encodeCursor(s SessionSummary) string {
	return base64.RawURLEncoding.EncodeToString([]byte("c1." + strconv.FormatInt(s.CreatedAt.UnixNano(), 10) + "." + s.SessionID))
}

func decodeCursor(c string) (time.Time, string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", false
	}
	rest, ok := strings.CutPrefix(string(b), "c1.")
	if !ok {
		return time.Time{}, "", false
	}
	ns, id, ok := strings.Cut(rest, ".")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return time.Time{}, "", false
	}
	return time.Unix(0, n).UTC(), id, true
}
