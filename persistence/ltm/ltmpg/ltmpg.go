// Package ltmpg is the PostgreSQL ltm.Store: items in the fathom_memories table
// (migrations/0015_memories.sql), keyed by tenant, user and id. Every statement names
// the tenant and the user. A vector search is an exact scan of the user's items (the dot
// product of the normalised real[] embeddings, computed in SQL); a text search ranks
// the rows whose tsvector (pgvector.TextVector: the terms of persistence.Tokenize, as
// the session store indexes them) matches the query's terms by ts_rank_cd, each row
// against the OR of only the query terms it holds (pgvector.TextRankSQL: the same score,
// cheaper).
package ltmpg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/ltm"
	"github.com/fathom-agents/fathom/persistence/pgvector"
	"github.com/fathom-agents/fathom/persistence/postgres"
)

// Store is the PostgreSQL memory store.
type Store struct {
	dims   int
	pool   *pgxpool.Pool
	closed atomic.Bool
}

var _ ltm.Store = (*Store)(nil)

// Open applies the migrations and connects to dsn, for dims-dimensional embeddings.
func Open(ctx context.Context, dsn string, dims int) (*Store, error) {
	if dims < 1 {
		return nil, fmt.Errorf("ltmpg: %w: dimensions must be positive, got %d", ltm.ErrInvalid, dims)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("ltmpg: invalid DSN: %w", err)
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ltmpg: connect: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ltmpg: connect: %w", err)
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ltmpg: %w", err)
	}
	return &Store{dims: dims, pool: pool}, nil
}

// Dimensions implements ltm.Store.
func (s *Store) Dimensions() int { return s.dims }

func (s *Store) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return ltm.ErrClosed
	}
	return nil
}

func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// Put implements ltm.Store.
func (s *Store) Put(ctx context.Context, it ltm.Item) error {
	if err := ltm.ValidateItem(it, s.dims); err != nil {
		return fmt.Errorf("ltmpg: put: %w", err)
	}
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("ltmpg: put: %w", err)
	}
	var meta []byte
	if len(it.Metadata) > 0 {
		var err error
		if meta, err = json.Marshal(it.Metadata); err != nil {
			return fmt.Errorf("ltmpg: put: %w", err)
		}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO fathom_memories (tenant, user_id, id, agent, body, meta, embedding, tsv, session_id, created_at, updated_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (tenant, user_id, id) DO UPDATE SET agent = EXCLUDED.agent, body = EXCLUDED.body, meta = EXCLUDED.meta,
			embedding = EXCLUDED.embedding, tsv = EXCLUDED.tsv, session_id = EXCLUDED.session_id, updated_at = EXCLUDED.updated_at,
			expires_at = EXCLUDED.expires_at`,
		it.Tenant, it.User, it.ID, it.Agent, it.Text, meta, persistence.Normalize(it.Embedding), pgvector.TextVector(it.Text),
		it.SessionID, it.CreatedAt, it.UpdatedAt, ts(it.ExpiresAt))
	if err != nil {
		return fmt.Errorf("ltmpg: put: %w", err)
	}
	return nil
}

// columns are the item columns every read selects, in scanItem's order; visible is
// the filter of a namespace's readable rows ($1 tenant, $2 user, $3 agent).
const (
	columns = `tenant, user_id, agent, id, body, meta, embedding, session_id, created_at, updated_at, expires_at`
	visible = `tenant = $1 AND user_id = $2 AND ($3 = '' OR agent IN ('', $3)) AND (expires_at IS NULL OR expires_at > now())`
)

func scanItem(row pgx.Row, extra ...any) (ltm.Item, error) {
	var it ltm.Item
	var meta []byte
	var exp *time.Time
	dest := append([]any{&it.Tenant, &it.User, &it.Agent, &it.ID, &it.Text, &meta, &it.Embedding, &it.SessionID, &it.CreatedAt, &it.UpdatedAt, &exp}, extra...)
	if err := row.Scan(dest...); err != nil {
		return ltm.Item{}, err
	}
	if len(meta) > 0 {
		if err := json.Unmarshal(meta, &it.Metadata); err != nil {
			return ltm.Item{}, fmt.Errorf("decode metadata: %w", err)
		}
	}
	it.CreatedAt, it.UpdatedAt = it.CreatedAt.UTC(), it.UpdatedAt.UTC()
	if exp != nil {
		it.ExpiresAt = exp.UTC()
	}
	return it, nil
}

// Get implements ltm.Store.
func (s *Store) Get(ctx context.Context, ns ltm.Namespace, id string) (ltm.Item, error) {
	if err := ltm.ValidateNamespace(ns); err != nil {
		return ltm.Item{}, fmt.Errorf("ltmpg: get: %w", err)
	}
	if err := s.check(ctx); err != nil {
		return ltm.Item{}, fmt.Errorf("ltmpg: get: %w", err)
	}
	it, err := scanItem(s.pool.QueryRow(ctx, "SELECT "+columns+" FROM fathom_memories WHERE "+visible+" AND id = $4", ns.Tenant, ns.User, ns.Agent, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return ltm.Item{}, fmt.Errorf("ltmpg: get %s: %w", id, ltm.ErrNotFound)
	}
	if err != nil {
		return ltm.Item{}, fmt.Errorf("ltmpg: get: %w", err)
	}
	return it, nil
}

// Delete implements ltm.Store.
func (s *Store) Delete(ctx context.Context, ns ltm.Namespace, id string) error {
	if err := ltm.ValidateNamespace(ns); err != nil {
		return fmt.Errorf("ltmpg: delete: %w", err)
	}
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("ltmpg: delete: %w", err)
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM fathom_memories WHERE "+visible+" AND id = $4", ns.Tenant, ns.User, ns.Agent, id)
	if err != nil {
		return fmt.Errorf("ltmpg: delete: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("ltmpg: delete %s: %w", id, ltm.ErrNotFound)
	}
	return nil
}

// DeleteUser implements ltm.Store.
func (s *Store) DeleteUser(ctx context.Context, tenant, user string) (int, error) {
	if err := ltm.ValidateNamespace(ltm.Namespace{Tenant: tenant, User: user}); err != nil {
		return 0, fmt.Errorf("ltmpg: delete user: %w", err)
	}
	if err := s.check(ctx); err != nil {
		return 0, fmt.Errorf("ltmpg: delete user: %w", err)
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM fathom_memories WHERE tenant = $1 AND user_id = $2", tenant, user)
	if err != nil {
		return 0, fmt.Errorf("ltmpg: delete user: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

func (s *Store) queryItems(ctx context.Context, sql string, args ...any) ([]ltm.Item, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ltm.Item
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

func (s *Store) queryHits(ctx context.Context, sql string, args ...any) ([]ltm.Hit, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ltm.Hit
	for rows.Next() {
		var h ltm.Hit
		var score float64
		if h.Item, err = scanItem(rows, &score); err != nil {
			return nil, err
		}
		h.Score = float32(score)
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	ltm.SortHits(out)
	return out, nil
}

// List implements ltm.Store.
func (s *Store) List(ctx context.Context, ns ltm.Namespace, limit int) ([]ltm.Item, error) {
	if err := ltm.ValidateNamespace(ns); err != nil {
		return nil, fmt.Errorf("ltmpg: list: %w", err)
	}
	if err := ltm.ValidateK(limit); err != nil {
		return nil, fmt.Errorf("ltmpg: list: %w", err)
	}
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("ltmpg: list: %w", err)
	}
	items, err := s.queryItems(ctx, "SELECT "+columns+" FROM fathom_memories WHERE "+visible+" ORDER BY updated_at DESC, id LIMIT $4",
		ns.Tenant, ns.User, ns.Agent, limit)
	if err != nil {
		return nil, fmt.Errorf("ltmpg: list: %w", err)
	}
	return items, nil
}

// SearchVector implements ltm.Store.
func (s *Store) SearchVector(ctx context.Context, ns ltm.Namespace, vec []float32, k int) ([]ltm.Hit, error) {
	if err := ltm.ValidateNamespace(ns); err != nil {
		return nil, fmt.Errorf("ltmpg: search: %w", err)
	}
	if err := ltm.ValidateK(k); err != nil {
		return nil, fmt.Errorf("ltmpg: search: %w", err)
	}
	if err := persistence.ValidateVector(vec, s.dims); err != nil {
		return nil, fmt.Errorf("ltmpg: search: %w: %v", ltm.ErrInvalid, err)
	}
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("ltmpg: search: %w", err)
	}
	hits, err := s.queryHits(ctx, "SELECT "+columns+", score FROM fathom_memories, "+
		"LATERAL (SELECT sum(a * b)::float8 AS score FROM unnest(embedding, $4::real[]) AS t(a, b)) AS d WHERE "+visible+
		" AND cardinality(embedding) = $6 ORDER BY score DESC, id LIMIT $5",
		ns.Tenant, ns.User, ns.Agent, persistence.Normalize(vec), k, s.dims)
	if err != nil {
		return nil, fmt.Errorf("ltmpg: search: %w", err)
	}
	return hits, nil
}

// SearchText implements ltm.Store.
func (s *Store) SearchText(ctx context.Context, ns ltm.Namespace, text string, k int) ([]ltm.Hit, error) {
	if err := ltm.ValidateNamespace(ns); err != nil {
		return nil, fmt.Errorf("ltmpg: search text: %w", err)
	}
	if err := ltm.ValidateK(k); err != nil {
		return nil, fmt.Errorf("ltmpg: search text: %w", err)
	}
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("ltmpg: search text: %w", err)
	}
	terms := pgvector.TextTerms(text)
	if len(terms) == 0 {
		return nil, nil
	}
	// Each memory is ranked against the OR of only the terms it holds (pgvector.TextRankSQL).
	hits, err := s.queryHits(ctx, "SELECT "+columns+", "+pgvector.TextRankSQL("tsv", "t", len(terms))+"::float8 FROM fathom_memories, "+
		"CAST(array_to_string($4::text[], ' | ') AS tsquery) AS q, CAST($4::text[] AS tsquery[]) AS t WHERE "+visible+
		" AND tsv @@ q ORDER BY 12 DESC, id LIMIT $5", ns.Tenant, ns.User, ns.Agent, terms, k)
	if err != nil {
		return nil, fmt.Errorf("ltmpg: search text: %w", err)
	}
	return hits, nil
}

// PurgeExpired implements ltm.Store.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time) (int, error) {
	if err := s.check(ctx); err != nil {
		return 0, fmt.Errorf("ltmpg: purge: %w", err)
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM fathom_memories WHERE expires_at IS NOT NULL AND expires_at <= $1", now)
	if err != nil {
		return 0, fmt.Errorf("ltmpg: purge: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// Close implements ltm.Store.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("ltmpg: close: %w", ltm.ErrClosed)
	}
	s.pool.Close()
	return nil
}
