package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fathom-agents/fathom/persistence"
)

// The session index (persistence.SessionIndex) is table fathom_sessions (migration
// 0005). An indexed append is one statement: the guarded batch INSERT of appendSQL in a
// CTE, and the index upsert selecting from it. When the batch inserts nothing (the
// expected sequence does not hold) neither does the upsert, so the statement affects no
// row, which Append reports as a conflict exactly like an unindexed append; when it
// inserts, both are committed together. Lease times use the server's clock.

var _ persistence.SessionIndex = (*Journal)(nil)

// appendIndexedSQL is appendSQL plus the index row: $6 the events' checksums (as in
// appendSQL), $7 status, $8 due_at (NULL: none), $9 the lease owner to renew (NULL: keep
// the stored lease) for $10 microseconds, and the batch's facts (migration 0006): $11
// user_id and $12 goal (NULL: keep the stored ones; set by the batch that starts the
// session), $13 the cost the batch adds, $14 tenant and $15 owner (NULL: keep the
// stored ones; set by the batch that starts or forks the session, migration 0008), $16
// the tokens, $17 the artifact bytes the batch adds and $18 the source of a fork (NULL:
// keep; set by the batch that starts the session, migration 0014). A batch with tokens,
// cost or artifact bytes also adds them to its tenant's usage of the server's UTC date
// (fathom_tenant_usage, migrations 0009 and 0012; the tenant is the row's, or $14 for
// the batch that starts it), in the same statement: one data-modifying CTE that only
// runs its insert when the batch was stored.
var appendIndexedSQL = `
WITH batch AS (` + appendSQL + `
    RETURNING last_seq),
usage AS (
    INSERT INTO fathom_tenant_usage (tenant, day, tokens, cost_usd, artifact_bytes)
    SELECT coalesce($14::text, (SELECT tenant FROM fathom_sessions WHERE session_id = $1), 'default'),
           (now() AT TIME ZONE 'UTC')::date, $16::bigint, $13::double precision, $17::bigint
    FROM batch WHERE $16::bigint > 0 OR $13::double precision > 0 OR $17::bigint > 0
    ON CONFLICT (tenant, day) DO UPDATE
    SET tokens = fathom_tenant_usage.tokens + EXCLUDED.tokens, cost_usd = fathom_tenant_usage.cost_usd + EXCLUDED.cost_usd,
        artifact_bytes = fathom_tenant_usage.artifact_bytes + EXCLUDED.artifact_bytes)
INSERT INTO fathom_sessions (session_id, status, due_at, seq, updated_at, lease_owner, lease_expires, user_id, goal, created_at, cost_usd, tenant, owner, forked_from)
SELECT $1, $7, $8, last_seq, now(), $9::text,
       CASE WHEN $9::text IS NULL THEN NULL ELSE now() + $10::bigint * interval '1 microsecond' END,
       coalesce($11::text, ''), coalesce($12::text, ''), now(), $13::double precision,
       coalesce($14::text, 'default'), coalesce($15::text, ''), coalesce($18::text, '') FROM batch
ON CONFLICT (session_id) DO UPDATE
SET status = EXCLUDED.status,
    due_at = CASE WHEN fathom_sessions.due_at <= EXCLUDED.due_at AND EXCLUDED.due_at <= now() THEN fathom_sessions.due_at ELSE EXCLUDED.due_at END,
    seq = EXCLUDED.seq, updated_at = EXCLUDED.updated_at,
    lease_owner = coalesce(EXCLUDED.lease_owner, fathom_sessions.lease_owner),
    lease_expires = CASE WHEN EXCLUDED.lease_owner IS NULL THEN fathom_sessions.lease_expires ELSE EXCLUDED.lease_expires END,
    user_id = CASE WHEN $12::text IS NULL THEN fathom_sessions.user_id ELSE EXCLUDED.user_id END,
    goal = coalesce($12::text, fathom_sessions.goal),
    tenant = coalesce($14::text, fathom_sessions.tenant),
    owner = coalesce($15::text, fathom_sessions.owner),
    forked_from = coalesce($18::text, fathom_sessions.forked_from),
    cost_usd = fathom_sessions.cost_usd + EXCLUDED.cost_usd`

// AppendIndexed implements persistence.SessionIndex.
func (j *Journal) AppendIndexed(ctx context.Context, stream string, expectedSeq uint64, recs []persistence.Record, entry persistence.IndexEntry) (uint64, error) {
	if err := j.indexEntry(stream, recs, &entry); err != nil {
		return 0, err
	}
	return j.append(ctx, stream, expectedSeq, recs, &entry)
}

var _ persistence.AsyncIndexAppender = (*Journal)(nil)

// AppendIndexedAsync implements persistence.AsyncIndexAppender: the statement is built
// on the caller and queued to the committers (group.go), the committer that ran it calls
// done. No goroutine waits for the commit.
func (j *Journal) AppendIndexedAsync(ctx context.Context, stream string, expectedSeq uint64, recs []persistence.Record, entry persistence.IndexEntry, done func(last uint64, err error)) {
	if err := j.indexEntry(stream, recs, &entry); err != nil {
		go done(0, err)
		return
	}
	j.appendAsync(ctx, stream, expectedSeq, recs, &entry, done)
}

// indexEntry validates entry for an indexed append of recs to stream and sets its facts
// from recs (Options.Facts), never from the caller.
func (j *Journal) indexEntry(stream string, recs []persistence.Record, entry *persistence.IndexEntry) error {
	if err := persistence.ValidateIndexEntry(stream, *entry); err != nil {
		return err
	}
	entry.UserID, entry.Goal, entry.CostUSD, entry.Tenant, entry.Owner, entry.Tokens, entry.ArtifactBytes, entry.ForkedFrom = "", "", 0, "", "", 0, 0, ""
	if j.facts != nil {
		f := j.facts(recs)
		entry.CostUSD, entry.Tokens, entry.ArtifactBytes = f.CostUSD, f.Tokens, f.ArtifactBytes
		if f.Started {
			entry.UserID, entry.Goal, entry.Tenant, entry.Owner, entry.ForkedFrom = f.UserID, f.Goal, f.Tenant, f.Owner, f.ForkedFrom
		}
	}
	return nil
}

// factArgs are appendIndexedSQL's $11 to $15 and $18 for e: user, goal, tenant, owner
// and fork source only with a start's (never empty) goal.
func factArgs(e persistence.IndexEntry) (user, goal *string, cost float64, tenant, owner, forkedFrom *string) {
	if e.Goal == "" {
		return nil, nil, e.CostUSD, nil, nil, nil
	}
	if e.Tenant == "" {
		e.Tenant = persistence.DefaultTenant
	}
	return &e.UserID, &e.Goal, e.CostUSD, &e.Tenant, &e.Owner, &e.ForkedFrom
}

// leaseArgs are appendIndexedSQL's $9 and $10 for e.
func leaseArgs(e persistence.IndexEntry) (*string, int64) {
	if e.LeaseOwner == "" || e.LeaseTTL <= 0 {
		return nil, 0
	}
	return &e.LeaseOwner, e.LeaseTTL.Microseconds()
}

func dueAt(e persistence.IndexEntry) *time.Time {
	if e.DueAt.IsZero() {
		return nil
	}
	t := e.DueAt.UTC()
	return &t
}

// RenewLease implements persistence.SessionIndex.
func (j *Journal) RenewLease(ctx context.Context, id, owner string, ttl time.Duration) error {
	if err := j.check(ctx); err != nil {
		return err
	}
	_, err := j.pool.Exec(ctx, `UPDATE fathom_sessions SET lease_owner = $2, lease_expires = now() + $3::bigint * interval '1 microsecond'
		WHERE session_id = $1`, id, owner, ttl.Microseconds())
	if err != nil {
		return fmt.Errorf("renew lease of %s: %w", id, err)
	}
	return nil
}

// ReleaseLease implements persistence.SessionIndex.
func (j *Journal) ReleaseLease(ctx context.Context, id, owner string) error {
	if err := j.check(ctx); err != nil {
		return err
	}
	_, err := j.pool.Exec(ctx, `UPDATE fathom_sessions SET lease_owner = NULL, lease_expires = NULL
		WHERE session_id = $1 AND lease_owner = $2`, id, owner)
	if err != nil {
		return fmt.Errorf("release lease of %s: %w", id, err)
	}
	return nil
}

// LeaseHolder implements persistence.SessionIndex.
func (j *Journal) LeaseHolder(ctx context.Context, id string) (string, error) {
	if err := j.check(ctx); err != nil {
		return "", err
	}
	var owner string
	err := j.pool.QueryRow(ctx, `SELECT coalesce(lease_owner, '') FROM fathom_sessions WHERE session_id = $1 AND lease_expires >= now()`, id).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read lease of %s: %w", id, err)
	}
	return owner, nil
}

// BreakLeases implements persistence.SessionIndex.
func (j *Journal) BreakLeases(ctx context.Context, owner string) (int, error) {
	if err := j.check(ctx); err != nil {
		return 0, err
	}
	tag, err := j.pool.Exec(ctx, `UPDATE fathom_sessions SET lease_owner = NULL, lease_expires = NULL
		WHERE lease_owner = $1 AND lease_expires >= now()`, owner)
	if err != nil {
		return 0, fmt.Errorf("break the leases of %s: %w", owner, err)
	}
	return int(tag.RowsAffected()), nil
}

const indexColumns = `session_id, status, due_at, seq, updated_at, coalesce(lease_owner, ''), lease_expires, user_id, goal, created_at, cost_usd, tenant, owner, forked_from`

// Due implements persistence.SessionIndex.
func (j *Journal) Due(ctx context.Context, limit int) ([]persistence.IndexEntry, error) {
	if err := j.check(ctx); err != nil {
		return nil, err
	}
	rows, err := j.pool.Query(ctx, `SELECT `+indexColumns+` FROM fathom_sessions
		WHERE due_at IS NOT NULL AND due_at <= now() AND (lease_expires IS NULL OR lease_expires < now())
		ORDER BY due_at LIMIT $1`, limitOrAll(limit))
	if err != nil {
		return nil, fmt.Errorf("due sessions: %w", err)
	}
	return collectIndex(rows, "due sessions")
}

// listSQL is ListSessions's query: $1 status, $2 user, $3 since, $4 until, $5 goal text,
// $6 id prefix ("" or NULL: any), $7/$8 the position to continue after (NULL: the
// newest), $9 the limit, $10 tenant, $11 owner and $12 fork source ("": any).
const listSQL = `SELECT ` + indexColumns + ` FROM fathom_sessions
WHERE ($1 = '' OR status = $1) AND ($2 = '' OR user_id = $2)
  AND ($3::timestamptz IS NULL OR created_at >= $3) AND ($4::timestamptz IS NULL OR created_at < $4)
  AND ($5 = '' OR strpos(lower(goal), lower($5)) > 0)
  AND ($6 = '' OR left(session_id, length($6)) = $6)
  AND ($7::timestamptz IS NULL OR (created_at, session_id) < ($7, $8::text))
  AND ($10 = '' OR tenant = $10) AND ($11 = '' OR owner = $11) AND ($12 = '' OR forked_from = $12)
ORDER BY created_at DESC, session_id DESC LIMIT $9`

// ListSessions implements persistence.SessionIndex.
func (j *Journal) ListSessions(ctx context.Context, q persistence.ListQuery) ([]persistence.IndexEntry, error) {
	if err := j.check(ctx); err != nil {
		return nil, err
	}
	var afterAt *time.Time
	afterID := ""
	if q.After != nil {
		t := q.After.CreatedAt.UTC()
		afterAt, afterID = &t, q.After.SessionID
	}
	rows, err := j.pool.Query(ctx, listSQL, q.Status, q.UserID, optTime(q.Since), optTime(q.Until), q.GoalContains,
		q.IDPrefix, afterAt, afterID, limitOrAll(q.Limit), q.Tenant, q.Owner, q.ForkedFrom)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return collectIndex(rows, "list sessions")
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func limitOrAll(limit int) *int64 {
	if limit <= 0 {
		return nil // LIMIT NULL: no limit
	}
	n := int64(limit)
	return &n
}

func collectIndex(rows pgx.Rows, what string) ([]persistence.IndexEntry, error) {
	var out []persistence.IndexEntry
	var (
		e         persistence.IndexEntry
		due, exp  *time.Time
		seq       int64
		updatedAt time.Time
		createdAt time.Time
	)
	_, err := pgx.ForEachRow(rows, []any{&e.SessionID, &e.Status, &due, &seq, &updatedAt, &e.LeaseOwner, &exp,
		&e.UserID, &e.Goal, &createdAt, &e.CostUSD, &e.Tenant, &e.Owner, &e.ForkedFrom}, func() error {
		r := e
		r.Seq, r.UpdatedAt, r.CreatedAt = uint64(seq), updatedAt.UTC(), createdAt.UTC()
		if due != nil {
			r.DueAt = due.UTC()
		}
		if exp != nil {
			r.LeaseExpires = exp.UTC()
		}
		out = append(out, r)
		due, exp = nil, nil
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

var _ persistence.TenantIndex = (*Journal)(nil)

// CountSessions implements persistence.TenantIndex: one COUNT over the (tenant, status)
// index (migration 0009).
func (j *Journal) CountSessions(ctx context.Context, tenant string, statuses []string) (int, error) {
	if err := j.check(ctx); err != nil {
		return 0, err
	}
	var n int64
	err := j.pool.QueryRow(ctx, `SELECT count(*) FROM fathom_sessions WHERE tenant = $1 AND status = ANY($2::text[])`, tenant, statuses).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count sessions of tenant %s: %w", tenant, err)
	}
	return int(n), nil
}

var _ persistence.LeaseCounter = (*Journal)(nil)

// LeaseCounts implements persistence.LeaseCounter: one GROUP BY over the live leases.
func (j *Journal) LeaseCounts(ctx context.Context) (map[string]persistence.LeaseCount, error) {
	if err := j.check(ctx); err != nil {
		return nil, err
	}
	rows, err := j.pool.Query(ctx, `SELECT lease_owner, count(*), count(*) FILTER (WHERE status = ANY($1::text[]))
		FROM fathom_sessions WHERE lease_owner IS NOT NULL AND lease_expires >= now() GROUP BY lease_owner`, persistence.RunningStatuses)
	if err != nil {
		return nil, fmt.Errorf("count leases: %w", err)
	}
	defer rows.Close()
	out := map[string]persistence.LeaseCount{}
	for rows.Next() {
		var owner string
		var leases, running int64
		if err := rows.Scan(&owner, &leases, &running); err != nil {
			return nil, fmt.Errorf("count leases: %w", err)
		}
		out[owner] = persistence.LeaseCount{Leases: int(leases), Running: int(running)}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count leases: %w", err)
	}
	return out, nil
}

// TenantUsage implements persistence.TenantIndex.
func (j *Journal) TenantUsage(ctx context.Context, tenant string, day time.Time) (persistence.TenantUsage, error) {
	if err := j.check(ctx); err != nil {
		return persistence.TenantUsage{}, err
	}
	var (
		tokens, bytes int64
		u             persistence.TenantUsage
	)
	err := j.pool.QueryRow(ctx, `SELECT tokens, cost_usd, artifact_bytes FROM fathom_tenant_usage WHERE tenant = $1 AND day = $2::date`,
		tenant, persistence.UsageDay(day).Format(time.DateOnly)).Scan(&tokens, &u.CostUSD, &bytes)
	if errors.Is(err, pgx.ErrNoRows) {
		return persistence.TenantUsage{}, nil
	}
	if err != nil {
		return persistence.TenantUsage{}, fmt.Errorf("usage of tenant %s: %w", tenant, err)
	}
	u.Tokens, u.ArtifactBytes = uint64(max(tokens, 0)), uint64(max(bytes, 0))
	return u, nil
}

var _ persistence.SessionDeleter = (*Journal)(nil)

// DeleteSession implements persistence.SessionDeleter: one transaction locks the index
// row, checks its status and deletes the stream's batches, snapshots and the row.
func (j *Journal) DeleteSession(ctx context.Context, id, by string) error {
	if err := j.check(ctx); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, j.pool, func(tx pgx.Tx) error {
		var status, tenant, owner string
		err := tx.QueryRow(ctx, `SELECT status, tenant, owner FROM fathom_sessions WHERE session_id = $1 FOR UPDATE`, id).Scan(&status, &tenant, &owner)
		if errors.Is(err, pgx.ErrNoRows) {
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM fathom_event_batches WHERE stream_id = $1)`, id).Scan(&exists); err != nil {
				return err
			}
			if !exists {
				return persistence.ErrNotFound
			}
			return fmt.Errorf("%w: it has no index row", persistence.ErrNotTerminal)
		}
		if err != nil {
			return err
		}
		if !persistence.TerminalStatus(status) {
			return fmt.Errorf("%w: it is %s", persistence.ErrNotTerminal, status)
		}
		for _, q := range []string{
			`DELETE FROM fathom_event_batches WHERE stream_id = $1`,
			`DELETE FROM fathom_snapshots WHERE stream_id = $1`,
			`DELETE FROM fathom_sessions WHERE session_id = $1`,
		} {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO fathom_tombstones (session_id, tenant, owner, deleted_by) VALUES ($1, $2, $3, $4)
			ON CONFLICT (session_id) DO UPDATE SET tenant = EXCLUDED.tenant, owner = EXCLUDED.owner,
			deleted_by = EXCLUDED.deleted_by, deleted_at = now()`, id, tenant, owner, by)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	return nil
}

// Tombstone implements persistence.SessionDeleter.
func (j *Journal) Tombstone(ctx context.Context, id string) (persistence.Tombstone, bool, error) {
	if err := j.check(ctx); err != nil {
		return persistence.Tombstone{}, false, err
	}
	t := persistence.Tombstone{SessionID: id}
	err := j.pool.QueryRow(ctx, `SELECT tenant, owner, deleted_by, deleted_at FROM fathom_tombstones WHERE session_id = $1`, id).
		Scan(&t.Tenant, &t.Owner, &t.DeletedBy, &t.DeletedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return persistence.Tombstone{}, false, nil
	}
	if err != nil {
		return persistence.Tombstone{}, false, fmt.Errorf("tombstone of %s: %w", id, err)
	}
	t.DeletedAt = t.DeletedAt.UTC()
	return t, true, nil
}

var _ persistence.StatusCounter = (*Journal)(nil)

// CountByStatus implements persistence.StatusCounter.
func (j *Journal) CountByStatus(ctx context.Context) (map[string]int64, error) {
	if err := j.check(ctx); err != nil {
		return nil, err
	}
	rows, err := j.pool.Query(ctx, `SELECT status, count(*) FROM fathom_sessions GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count sessions: %w", err)
	}
	out := map[string]int64{}
	var (
		status string
		n      int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&status, &n}, func() error { out[status] = n; return nil }); err != nil {
		return nil, fmt.Errorf("count sessions: %w", err)
	}
	return out, nil
}

// SessionStatus implements persistence.SessionDeleter.
func (j *Journal) SessionStatus(ctx context.Context, id string) (string, string, bool, error) {
	if err := j.check(ctx); err != nil {
		return "", "", false, err
	}
	var status, tenant string
	err := j.pool.QueryRow(ctx, `SELECT status, tenant FROM fathom_sessions WHERE session_id = $1`, id).Scan(&status, &tenant)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", "", false, nil
	case err != nil:
		return "", "", false, fmt.Errorf("status of session %s: %w", id, err)
	}
	if tenant == "" {
		tenant = persistence.DefaultTenant
	}
	return status, tenant, true, nil
}
