// Package listing is the session listing both the gateway (GET /v1/sessions) and the
// fathom Go API (Node.List) serve: the query, its checks, the caller's tenancy scope,
// the page and its cursor, over the node's session index. The gateway re-exports its
// types (gateway.ListQuery, gateway.SessionSummary, gateway.SessionList).
package listing

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/errcode"
)

// Bounds of a listing.
const (
	// DefaultLimit is the page size of a query without a limit.
	DefaultLimit = 100
	// MaxLimit is the largest limit accepted.
	MaxLimit = 1000
	// MaxGoalFilterBytes bounds the goal filter.
	MaxGoalFilterBytes = 200
)

// Statuses are the statuses a listing filters on.
var Statuses = []string{"running", "awaiting_human", "interrupted", "completed", "failed", "cancelled"}

// Index lists the sessions of the node's session index (internal/node.Node implements
// it over its journal).
type Index interface {
	// ListSessions returns the sessions q selects, newest first (by CreatedAt, then by
	// SessionID, both descending). errcode.ErrNoIndex when the journal keeps none.
	ListSessions(ctx context.Context, q Query) ([]Summary, error)
}

// Query is what a listing asks the index for.
type Query struct {
	// Status, UserID: only sessions with this status, of this user ("" for any).
	Status, UserID string
	// Since, Until: only sessions created at or after Since and before Until (zero: open).
	Since, Until time.Time
	// GoalContains: only sessions whose goal contains this text, ignoring case.
	GoalContains string
	// ForkedFrom: only the forks of this session ("" for any).
	ForkedFrom string
	// Tenant, Owner: only sessions of this tenant, of this owner ("" for any). Scope sets
	// them from the caller's principal: a principal's listing, its pages and its cursors
	// never reach another tenant's rows.
	Tenant, Owner string
	// AfterCreated and AfterID continue a listing after that session (AfterID "": from
	// the newest).
	AfterCreated time.Time
	AfterID      string
	// Limit bounds the sessions returned.
	Limit int
}

// Summary is one session of a listing, read from the session index.
type Summary struct {
	SessionID string `json:"session_id"`
	// Status is running, awaiting_human, interrupted, completed, failed or cancelled.
	Status string `json:"status"`
	// Seq is the session's newest event.
	Seq uint64 `json:"seq"`
	// UpdatedAt is when the newest event was stored.
	UpdatedAt time.Time `json:"updated_at"`
	// DueAt is when the session next needs its node, or since when it has needed it
	// while it runs (absent: never).
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
	// ForkedFrom is the session it was forked from (absent: no fork).
	ForkedFrom string `json:"forked_from,omitempty"`
	// CreatedAt is when its first event was stored.
	CreatedAt time.Time `json:"created_at"`
	// CostUSD is its model cost so far (the node's price table).
	CostUSD float64 `json:"cost_usd"`
}

// Page is one page of a listing.
type Page struct {
	Sessions []Summary `json:"sessions"`
	// NextCursor, when present, continues the listing with the next page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// Check refuses a query the index is not asked: an unknown status, an oversize goal
// filter, a limit outside 1 to MaxLimit (0 is DefaultLimit), Since not before Until.
// Its errors wrap nothing: each is a bad argument, its message says which.
func Check(q Query) error {
	if q.Status != "" && !slices.Contains(Statuses, q.Status) {
		return fmt.Errorf("status must be one of %s, not %q", strings.Join(Statuses, ", "), cut(q.Status, 40))
	}
	if len(q.GoalContains) > MaxGoalFilterBytes {
		return fmt.Errorf("goal filter exceeds %d bytes", MaxGoalFilterBytes)
	}
	if q.Limit < 0 || q.Limit > MaxLimit {
		return fmt.Errorf("limit must be 1 to %d: %d", MaxLimit, q.Limit)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return fmt.Errorf("since (%s) must be before until (%s)", q.Since.Format(time.RFC3339), q.Until.Format(time.RFC3339))
	}
	return nil
}

// Scope limits q to what principal p sees under policy pol (auth.Policy.Visible); an
// administrator (and a trusted caller, trusted) may pick one tenant (tenant "": all).
func Scope(q *Query, pol auth.Policy, p auth.Principal, trusted bool, tenant string) {
	if trusted || p.Admin() {
		q.Tenant, q.Owner = tenant, ""
		return
	}
	q.Tenant, q.Owner = pol.Visible(p)
}

// SetCursor continues q after the session cursor names (a Page's NextCursor).
func SetCursor(q *Query, cursor string) error {
	at, id, ok := DecodeCursor(CursorListing, cursor)
	if !ok {
		return fmt.Errorf("cursor is not one a listing returned: %q", cut(cursor, 40))
	}
	q.AfterCreated, q.AfterID = at, id
	return nil
}

// List returns the page q selects from ix (q checked and scoped), with the cursor of
// the next page when there is one. Its errors are ix's (errcode.ErrNoIndex when the
// journal keeps no index).
func List(ctx context.Context, ix Index, q Query) (Page, error) {
	if ix == nil {
		return Page{}, errcode.ErrNoIndex
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	q.Limit = limit + 1 // one more tells whether there is a next page
	es, err := ix.ListSessions(ctx, q)
	if err != nil {
		return Page{}, err
	}
	out := Page{Sessions: make([]Summary, 0, min(len(es), limit))}
	for i, e := range es {
		if i == limit {
			out.NextCursor = EncodeCursor(CursorListing, es[i-1])
			break
		}
		out.Sessions = append(out.Sessions, e)
	}
	return out, nil
}

// CursorListing is the namespace of a listing's cursors (Page.NextCursor, SetCursor).
// Another reader that pages over the index's order (A2A ListTasks' page tokens) encodes
// its own cursors with EncodeCursor in a namespace of its own, so that one reader's
// cursor is never taken for another's.
const CursorListing = "c1"

// EncodeCursor is the cursor, in namespace ns, of the position just after session s in
// the index's order: base64url(ns + "." + s's creation Unix nanoseconds + "." + its id).
func EncodeCursor(ns string, s Summary) string {
	return base64.RawURLEncoding.EncodeToString([]byte(ns + "." + strconv.FormatInt(s.CreatedAt.UnixNano(), 10) + "." + s.SessionID))
}

// DecodeCursor reads cursor c of namespace ns (EncodeCursor's): the creation time and
// id of the session it follows; ok false when c is not a cursor of ns.
func DecodeCursor(ns, c string) (at time.Time, id string, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", false
	}
	rest, ok := strings.CutPrefix(string(b), ns+".")
	if !ok {
		return time.Time{}, "", false
	}
	nanos, id, ok := strings.Cut(rest, ".")
	n, err := strconv.ParseInt(nanos, 10, 64)
	if !ok || err != nil || id == "" {
		return time.Time{}, "", false
	}
	return time.Unix(0, n).UTC(), id, true
}

// Follows reports whether session s comes after the session (at, id) in the index's
// order (newest first: creation, then id, both descending), as a cursor of (at, id)
// continues.
func Follows(s Summary, at time.Time, id string) bool {
	c := s.CreatedAt.UnixNano()
	return c < at.UnixNano() || c == at.UnixNano() && s.SessionID < id
}

// cut shortens s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n] + "…"
}
