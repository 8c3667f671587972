package persistence

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Session statuses kept in the session index. They are the values of the gateway's
// `GET /v1/sessions?status=` filter.
const (
	StatusRunning       = "running"
	StatusAwaitingHuman = "awaiting_human"
	StatusInterrupted   = "interrupted"
	StatusCompleted     = "completed"
	StatusFailed        = "failed"
	StatusCancelled     = "cancelled"
)

// ValidStatus reports whether s is one of the index's statuses.
func ValidStatus(s string) bool {
	switch s {
	case StatusRunning, StatusAwaitingHuman, StatusInterrupted, StatusCompleted, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// DueSince is the due time a session index stores when an append with due time next,
// written at now, replaces a row due at stored: stored when the session was due and stays
// due (stored is set, not after next, and next is not after now), else next. Every
// SessionIndex applies it, so a session's steps leave its due time (and PostgreSQL's
// index on it) unchanged.
func DueSince(stored, next, now time.Time) time.Time {
	if !stored.IsZero() && !next.IsZero() && !stored.After(next) && !next.After(now) {
		return stored
	}
	return next
}

// IndexEntry is one session's row of the session index.
type IndexEntry struct {
	// SessionID is the session (stream) id.
	SessionID string
	// Status is one of the Status* constants.
	Status string
	// DueAt is when the session next needs a live activation: the time of the append for
	// pending work, a retry's retry_at, a human-input or interrupt deadline. Zero means
	// never (terminal, or waiting on a human without a deadline): the reactivator leaves
	// such a session alone. A session that stays due keeps the time it became due: an
	// append whose DueAt is due when it is written (not after the append's time) and not
	// before the stored one keeps the stored one (DueSince), so a running session's row
	// reads "due since" and its steps do not rewrite the index's due time.
	DueAt time.Time
	// Seq is the stream's seq after the append that wrote the entry.
	Seq uint64
	// UpdatedAt is when the entry was written (set by the journal).
	UpdatedAt time.Time
	// LeaseOwner is the cluster member whose activation holds the session's lease ("" for
	// none); LeaseExpires is when that lease lapses unless renewed (output only).
	// AppendIndexed with a LeaseOwner and a positive LeaseTTL also takes the lease for
	// LeaseTTL (the writer is evidently alive); otherwise it keeps the stored lease.
	LeaseOwner   string
	LeaseExpires time.Time
	// LeaseTTL is input only (AppendIndexed).
	LeaseTTL time.Duration

	// The session's facts, kept from its events by the journal's FactsFunc (output only;
	// empty when the journal has none, and in rows written before the facts were kept).

	// UserID is session_started's user_id.
	UserID string
	// Tenant and Owner are whose session it is: session_started's (a fork's:
	// session_forked's). Rows from before tenancy have the tenant "default".
	Tenant, Owner string
	// Goal is session_started's goal, cut to MaxIndexedGoalBytes.
	Goal string
	// ForkedFrom is the session a fork was forked from (its session_forked's
	// source_session_id; "" for a session that is no fork).
	ForkedFrom string
	// CreatedAt is when the session's first event was stored.
	CreatedAt time.Time
	// CostUSD is the sum of the session's llm_responded cost_usd.
	CostUSD float64
	// Tokens is input only (AppendIndexed, from the facts): the tokens the batch adds to
	// its tenant's daily usage.
	Tokens uint64
	// ArtifactBytes is input only (AppendIndexed, from the facts): the artifact bytes
	// the batch adds to its tenant's daily usage.
	ArtifactBytes uint64
}

// DefaultTenant is the tenant of index rows written before tenancy and of sessions
// started from inside the node (auth.DefaultTenant).
const DefaultTenant = "default"

// MaxIndexedGoalBytes bounds the goal an index row keeps (the events keep all of it).
const MaxIndexedGoalBytes = 1000

// SessionFacts is what a batch of a session's records tells its index row besides the
// status: the start's user and goal, and the cost the batch adds.
type SessionFacts struct {
	// Started is set when the batch holds the session's session_started.
	Started bool
	// UserID and Goal are session_started's (when Started).
	UserID, Goal string
	// Tenant and Owner are whose session it is (when Started): session_started's, or
	// the session_forked's of a fork's first batch.
	Tenant, Owner string
	// ForkedFrom is the source of a fork (when Started: the session_forked of a fork's
	// first batch).
	ForkedFrom string
	// CostUSD is the model cost the batch adds.
	CostUSD float64
	// Tokens are the model tokens the batch adds (each llm_responded usage's total, or
	// input + output when larger), counted in the tenant's daily usage.
	Tokens uint64
	// ArtifactBytes are the bytes of the artifacts the batch records (each
	// artifact_written's size), counted in the tenant's daily usage.
	ArtifactBytes uint64
}

// FactsFunc reads a batch's SessionFacts. Journals that keep the session index call
// theirs (an option of each journal) on every indexed append; the journal packages do
// not decode events themselves (persistence/indexfacts.Of does).
type FactsFunc func(recs []Record) SessionFacts

// ListQuery selects and pages GET /v1/sessions's rows. Rows come newest first (by
// CreatedAt, then by SessionID, both descending).
type ListQuery struct {
	// Status keeps rows with this status ("" for any).
	Status string
	// UserID keeps rows of this user ("" for any).
	UserID string
	// Tenant keeps rows of this tenant ("" for any: an admin's listing); Owner keeps
	// rows of this owner ("" for any).
	Tenant, Owner string
	// Since and Until keep rows created at or after Since and before Until (zero: open).
	Since, Until time.Time
	// GoalContains keeps rows whose goal contains this text, ignoring case ("" for any).
	GoalContains string
	// IDPrefix keeps rows whose session id starts with this ("" for any).
	IDPrefix string
	// ForkedFrom keeps the forks of this session ("" for any).
	ForkedFrom string
	// After continues a listing after this row (its CreatedAt and SessionID); nil starts
	// from the newest.
	After *ListPosition
	// Limit bounds the rows returned (0: all).
	Limit int
}

// ListPosition is a row's place in the list order.
type ListPosition struct {
	CreatedAt time.Time
	SessionID string
}

// Before reports whether position p comes before row e in the list order (newest
// first); a nil position comes before every row.
func (p *ListPosition) Before(e IndexEntry) bool {
	return p == nil || Newer(IndexEntry{CreatedAt: p.CreatedAt, SessionID: p.SessionID}, e)
}

// Newer reports whether row a comes before row b in the list order: created later, or
// created at the same time with a greater session id.
func Newer(a, b IndexEntry) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.SessionID > b.SessionID
}

// Matches reports whether row e passes q's filters (not its position or limit).
func (q ListQuery) Matches(e IndexEntry) bool {
	switch {
	case q.Status != "" && e.Status != q.Status,
		q.UserID != "" && e.UserID != q.UserID,
		q.Tenant != "" && e.Tenant != q.Tenant,
		q.Owner != "" && e.Owner != q.Owner,
		!q.Since.IsZero() && e.CreatedAt.Before(q.Since),
		!q.Until.IsZero() && !e.CreatedAt.Before(q.Until),
		q.IDPrefix != "" && !strings.HasPrefix(e.SessionID, q.IDPrefix),
		q.ForkedFrom != "" && e.ForkedFrom != q.ForkedFrom,
		q.GoalContains != "" && !strings.Contains(strings.ToLower(e.Goal), strings.ToLower(q.GoalContains)):
		return false
	}
	return true
}

// CutGoal cuts goal to MaxIndexedGoalBytes at a rune boundary.
func CutGoal(goal string) string {
	if len(goal) <= MaxIndexedGoalBytes {
		return goal
	}
	cut := MaxIndexedGoalBytes
	for cut > 0 && !utf8.RuneStart(goal[cut]) {
		cut--
	}
	return goal[:cut]
}

// SessionIndex is the session index, a part of SessionStore: one row per session with
// its status and next due time, written in the same transaction as the append that
// changes it, plus a lease renewed by the activation that owns the session.
//
// The lease is a liveness hint only: the journal's expected sequence stays the one guard
// against two writers.
type SessionIndex interface {
	// AppendIndexed is Journal.Append that also upserts entry (SessionID = stream) in the
	// same transaction: both are stored or neither. With entry.LeaseOwner and a positive
	// entry.LeaseTTL the append also renews the lease; otherwise the stored lease is kept.
	AppendIndexed(ctx context.Context, stream string, expectedSeq uint64, recs []Record, entry IndexEntry) (uint64, error)
	// RenewLease makes owner the holder of session id's lease for ttl from now (the store's
	// clock). A session not in the index is left alone (no error).
	RenewLease(ctx context.Context, id, owner string, ttl time.Duration) error
	// ReleaseLease drops session id's lease if owner holds it.
	ReleaseLease(ctx context.Context, id, owner string) error
	// LeaseHolder returns the member holding session id's live lease: "" when none does
	// (never taken, released, lapsed by the store's clock, or an unknown session). A new
	// activation asks it before it runs the calls its state has in flight: while another
	// member holds the lease, its activation still runs them.
	LeaseHolder(ctx context.Context, id string) (string, error)
	// BreakLeases ends at once every live lease owner holds (a cluster member the
	// membership declared dead), so Due returns its sessions without waiting for the
	// leases to lapse; it returns how many it ended. Should owner be alive after all, its
	// next renewal takes a lease back; the journal's expected sequence keeps one writer.
	BreakLeases(ctx context.Context, owner string) (int, error)
	// Due returns up to limit sessions that need a live activation and have none: DueAt set
	// and passed, and no lease or an expired one. Earliest DueAt first.
	Due(ctx context.Context, limit int) ([]IndexEntry, error)
	// ListSessions returns the rows q selects, newest first (ListQuery).
	ListSessions(ctx context.Context, q ListQuery) ([]IndexEntry, error)
}

// LeaseCount is what one cluster member holds in the session index (LeaseCounter).
type LeaseCount struct {
	// Leases are its live leases (not expired, not released).
	Leases int
	// Running are those of sessions that have not ended (RunningStatuses): the sessions
	// it hosts.
	Running int
}

// LeaseCounter is implemented by session indexes that count the live leases per owner
// (GET /v1/cluster), a part of SessionStore.
type LeaseCounter interface {
	// LeaseCounts returns, per lease owner, its live leases; owners without one are absent.
	LeaseCounts(ctx context.Context) (map[string]LeaseCount, error)
}

// RunningStatuses are the statuses of a session that has not ended: what a tenant's
// max_running_sessions counts.
var RunningStatuses = []string{StatusRunning, StatusAwaitingHuman, StatusInterrupted}

// TenantUsage is a tenant's usage over one UTC day.
type TenantUsage struct {
	// Tokens are the tokens of the day's llm_responded events (SessionFacts.Tokens).
	Tokens uint64
	// CostUSD is their cost in US dollars.
	CostUSD float64
	// ArtifactBytes are the bytes of the day's artifact_written events
	// (SessionFacts.ArtifactBytes).
	ArtifactBytes uint64
}

// TenantIndex is implemented by session indexes that answer the tenants' quotas
// (internal/quota): the sessions of a tenant by status, and its model usage per UTC
// day, added up by each indexed append in its own transaction from the batch's facts
// (the tenant is the session's row's). A part of SessionStore.
type TenantIndex interface {
	// CountSessions returns how many of tenant's sessions have one of statuses.
	CountSessions(ctx context.Context, tenant string, statuses []string) (int, error)
	// TenantUsage returns tenant's usage on day's UTC date (zero when it has none).
	TenantUsage(ctx context.Context, tenant string, day time.Time) (TenantUsage, error)
}

// UsageDay is the UTC date of t, as TenantIndex keys the usage.
func UsageDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// ValidateIndexEntry checks an entry the way every SessionIndex must: a known status and
// the stream's id. The error wraps ErrInvalid.
func ValidateIndexEntry(stream string, e IndexEntry) error {
	if e.SessionID != stream {
		return fmt.Errorf("%w: index entry for %q appended to stream %q", ErrInvalid, e.SessionID, stream)
	}
	if !ValidStatus(e.Status) {
		return fmt.Errorf("%w: index status %q", ErrInvalid, e.Status)
	}
	return nil
}
