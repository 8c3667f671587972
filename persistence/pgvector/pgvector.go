// Package pgvector is the PostgreSQL persistence.VectorStore: embeddings in the
// fathom_vectors table (migrations/0004_vectors.sql), searched by cosine distance through
// an HNSW index (vector_cosine_ops), with pgx v5 and pgvector-go.
//
// # Schema and migrations
//
// Every journal applies every migration, and a journal must work on a server without
// pgvector, so 0004_vectors.sql creates the extension and the table only where the
// extension is installed (and does nothing elsewhere). Open applies the pending
// migrations (postgres.Migrate), runs 0004 again (it is idempotent: this covers a server
// where pgvector was installed after the journal migrated) and fails with ErrNoExtension
// if the extension is still missing. The table's embedding column has no fixed
// dimension; Open creates the HNSW index of the configured dimension as a partial
// expression index (fathom_vectors_hnsw_<dims>), so changing the embedding model needs
// no schema change, and queries use the same expression.
//
// # Tenants
//
// The tenant is a column of the primary key (tenant, stream_id, seq), added by
// 0011_vector_tenants.sql, which Open also runs again after 0004. Every statement names
// the tenant. Vectors stored before tenancy took their session's tenant from the
// session index in that migration; those of streams without an index row have the
// tenant ” and are found (and deleted) under the stream's tenant, whichever it is. An
// upsert under the tenant replaces such a vector of the same stream and seq.
//
// # Text search
//
// The store is a persistence.TextSearcher: 0013_vector_text.sql adds a tsvector column
// (tsv) with a GIN index, which 0016_vector_text_by_stream.sql replaces by a GIN index
// on (stream_id, tsv) where btree_gin can be created, so a search reads its stream's
// postings only; 0017_text_index_no_pending.sql turns the index's fastupdate off, so a
// search never reads a pending list of entries (every stream's) not yet merged into it.
// Upsert and Import fill it with the terms of Vector.Text
// (persistence.Tokenize, with positions), not with a PostgreSQL text search
// configuration, so both stores index the same terms and identifiers stay whole.
// SearchText ORs the query's terms into a tsquery and ranks the stream's matching rows
// by ts_rank_cd (normalised by document length: option 1), each against the OR of only
// the query terms it holds: the same score, without the cost ts_rank_cd pays for every
// term of its query on every row (textRankSQL). Whole identifiers are weighted A, other
// terms D (textVector).
//
// # Search
//
// A search filters by tenant and stream and orders by cosine distance. For a session of a few
// thousand messages the planner scans the stream's rows by primary key and sorts them
// (exact); for big streams it walks the HNSW index. hnsw.ef_search is set on every
// connection (Config.EfSearch), and hnsw.iterative_scan = relaxed_order lets filtered
// index scans keep going until k rows of the stream are found; results are re-sorted
// by score.
package pgvector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	pgv "github.com/pgvector/pgvector-go"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/fathom-agents/fathom/migrations"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/postgres"
)

// ErrNoExtension means the server has no usable pgvector extension (not installed, or
// not ours to create). Compare with errors.Is.
var ErrNoExtension = errors.New("pgvector: the vector extension is not available on the server")

// ErrDimensions means the table's embedding column has a fixed dimension other than the
// configured one. Compare with errors.Is.
var ErrDimensions = errors.New("pgvector: dimension mismatch")

// MaxDimensions is the largest dimension an HNSW index of the vector type supports.
const MaxDimensions = 2000

// The HNSW parameters DefaultConfig chooses. DefaultEfSearch is what reaches recall@10 ≥
// 0.95 against the exact scan at the node's default embedding dimension (256) with the
// default build parameters (TestRecallAgainstExact measures it). Measured on 10,000
// random unit vectors of 256 dimensions (the hardest case: no clusters), recall@10 was
// 0.41 at ef_search 40 (pgvector's default), 0.66 at 100, 0.86 at 200, 0.93 at 300,
// 0.97 at 400 (0.966 on one build: too close to the bar for a default), 0.98 at 500 and
// 0.99 at 600; doubling ef_construction to 128 doubled the build time and gained about
// 0.01, so the build parameters stay at pgvector's defaults.
const (
	DefaultM              = 16
	DefaultEfConstruction = 64
	DefaultEfSearch       = 500
)

// MaxEfSearch is the largest hnsw.ef_search pgvector accepts.
const MaxEfSearch = 1000

// migrationFiles are the migrations that create the table, key it by tenant and index
// its text; Open runs them again, in order (they do nothing where the extension was
// missing when they were applied), except a file whose done query answers true: 0013
// once the text column exists, so its all-streams index, which 0016 replaces, is not
// built again on every start, and 0017 once the text index has fastupdate off.
var migrationFiles = []struct{ name, done string }{
	{name: "0004_vectors.sql"},
	{name: "0011_vector_tenants.sql"},
	{name: "0013_vector_text.sql", done: "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('fathom_vectors') AND attname = 'tsv')"},
	{name: "0016_vector_text_by_stream.sql"},
	{name: "0017_text_index_no_pending.sql", done: `SELECT NOT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
		WHERE i.indrelid = to_regclass('fathom_vectors') AND a.amname = 'gin' AND NOT coalesce(c.reloptions @> ARRAY['fastupdate=off'], false))`},
}

// legacyTenant is the tenant of vectors stored before tenancy whose session the
// migration could not find.
const legacyTenant = ""

// schemaLock is the advisory lock key held while Open creates the extension, table and
// index ("fvec" in ASCII), so nodes starting together do not race.
const schemaLock = 0x66766563

// Config configures a Store.
type Config struct {
	// DSN is the PostgreSQL connection string (required).
	DSN string
	// Dimensions is the length of every vector, 1..MaxDimensions (required).
	Dimensions int
	// M and EfConstruction are the HNSW build parameters, used when Open creates the
	// index. Defaults DefaultM and DefaultEfConstruction.
	M, EfConstruction int
	// EfSearch is hnsw.ef_search, the candidate list of an index scan: higher is more
	// accurate and slower, 1..MaxEfSearch. It should be at least the k of searches. It
	// is set on every pooled connection as it connects. Default DefaultEfSearch.
	EfSearch int
	// MaxConns bounds the connection pool. Default 8.
	MaxConns int32
	// ConnectTimeout bounds connecting. Default 5 s.
	ConnectTimeout time.Duration
}

// DefaultConfig returns the defaults for dims-dimensional vectors at dsn.
func DefaultConfig(dsn string, dims int) Config {
	return Config{DSN: dsn, Dimensions: dims, M: DefaultM, EfConstruction: DefaultEfConstruction, EfSearch: DefaultEfSearch, MaxConns: 8, ConnectTimeout: 5 * time.Second}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.DSN == "" {
		return fmt.Errorf("pgvector: %w: DSN required", persistence.ErrInvalid)
	}
	if c.Dimensions < 1 || c.Dimensions > MaxDimensions {
		return fmt.Errorf("pgvector: %w: dimensions must be 1..%d, got %d", persistence.ErrInvalid, MaxDimensions, c.Dimensions)
	}
	if c.EfSearch < 1 || c.EfSearch > MaxEfSearch {
		return fmt.Errorf("pgvector: %w: ef_search must be 1..%d, got %d", persistence.ErrInvalid, MaxEfSearch, c.EfSearch)
	}
	if c.M < 2 || c.EfConstruction < 2*c.M || c.MaxConns < 1 || c.ConnectTimeout <= 0 {
		return fmt.Errorf("pgvector: %w: need M ≥ 2, ef_construction ≥ 2·M, max conns ≥ 1, connect timeout > 0, got M %d, ef_construction %d, max conns %d, connect timeout %v",
			persistence.ErrInvalid, c.M, c.EfConstruction, c.MaxConns, c.ConnectTimeout)
	}
	return nil
}

// Store is the pgvector store. It is safe for concurrent use.
type Store struct {
	cfg    Config
	pool   *pgxpool.Pool
	closed atomic.Bool

	searchSQL string
}

var (
	_ persistence.TextSearcher = (*Store)(nil)
	_ persistence.VectorSeqs   = (*Store)(nil)
)

// Open prepares the schema (see the package doc) and connects. Zero fields of cfg other
// than DSN and Dimensions take DefaultConfig's values.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	d := DefaultConfig(cfg.DSN, cfg.Dimensions)
	if cfg.M == 0 {
		cfg.M = d.M
	}
	if cfg.EfConstruction == 0 {
		cfg.EfConstruction = max(d.EfConstruction, 2*cfg.M)
	}
	if cfg.EfSearch == 0 {
		cfg.EfSearch = d.EfSearch
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = d.MaxConns
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = d.ConnectTimeout
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := prepareSchema(ctx, cfg); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("pgvector: invalid DSN: %w", err)
	}
	pcfg.MaxConns = cfg.MaxConns
	pcfg.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	efSearch := strconv.Itoa(cfg.EfSearch)
	pcfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if err := pgxvec.RegisterTypes(ctx, conn); err != nil {
			return fmt.Errorf("register vector type: %w", err)
		}
		// relaxed_order exists from pgvector 0.8; on older servers the setting is a
		// harmless unused placeholder.
		_, err := conn.Exec(ctx, "SET hnsw.ef_search = "+efSearch+"; SET hnsw.iterative_scan = relaxed_order")
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("pgvector: connect: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgvector: connect: %w", err)
	}
	dims := strconv.Itoa(cfg.Dimensions)
	expr := "(embedding::vector(" + dims + "))"
	s := &Store{cfg: cfg, pool: pool,
		searchSQL: "SELECT seq, 1 - (" + expr + " <=> $3), meta FROM fathom_vectors WHERE tenant IN ($1, '') AND stream_id = $2 AND dims = " + dims +
			" ORDER BY " + expr + " <=> $3 LIMIT $4"}
	return s, nil
}

// prepareSchema applies the migrations, re-runs migrationFiles and creates the
// dimension's index,
// on a short-lived pool of its own (the store's pool registers the vector type on
// connect, which needs the extension first).
func prepareSchema(ctx context.Context, cfg Config) error {
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return fmt.Errorf("pgvector: invalid DSN: %w", err)
	}
	pcfg.MaxConns = 1
	pcfg.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("pgvector: connect: %w", err)
	}
	defer pool.Close()
	if err := postgres.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("pgvector: %w", err)
	}
	var sqls []string
	for _, f := range migrationFiles {
		sql, err := fs.ReadFile(migrations.FS, f.name)
		if err != nil {
			return fmt.Errorf("pgvector: %w", err)
		}
		sqls = append(sqls, string(sql))
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgvector: connect: %w", err)
	}
	defer conn.Release()
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(schemaLock)); err != nil {
			return fmt.Errorf("pgvector: take schema lock: %w", err)
		}
		for i, sql := range sqls {
			if q := migrationFiles[i].done; q != "" {
				var done bool
				if err := tx.QueryRow(ctx, q).Scan(&done); err != nil {
					return fmt.Errorf("pgvector: %s: check: %w", migrationFiles[i].name, err)
				}
				if done {
					continue
				}
			}
			if _, err := tx.Exec(ctx, sql); err != nil {
				return fmt.Errorf("pgvector: %s: %w", migrationFiles[i].name, err)
			}
		}
		var ok bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass('fathom_vectors') IS NOT NULL AND EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')").Scan(&ok); err != nil {
			return fmt.Errorf("pgvector: check schema: %w", err)
		}
		if !ok {
			return ErrNoExtension
		}
		// The migration's column has no fixed dimension; one altered to a fixed one
		// (vector(N)) takes only N.
		var fixed int
		if err := tx.QueryRow(ctx, "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'fathom_vectors'::regclass AND attname = 'embedding'").Scan(&fixed); err != nil {
			return fmt.Errorf("pgvector: check schema: %w", err)
		}
		if fixed > 0 && fixed != cfg.Dimensions {
			return fmt.Errorf("pgvector: %w: fathom_vectors.embedding is vector(%d), but the store is configured for %d dimensions", ErrDimensions, fixed, cfg.Dimensions)
		}
		dims := strconv.Itoa(cfg.Dimensions)
		idx := fmt.Sprintf("CREATE INDEX IF NOT EXISTS fathom_vectors_hnsw_%s ON fathom_vectors USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WITH (m = %d, ef_construction = %d) WHERE dims = %s",
			dims, dims, cfg.M, cfg.EfConstruction, dims)
		if _, err := tx.Exec(ctx, idx); err != nil {
			return fmt.Errorf("pgvector: create index: %w", err)
		}
		return nil
	})
}

// EfSearch is the hnsw.ef_search every connection of the store searches with.
func (s *Store) EfSearch() int { return s.cfg.EfSearch }

// Dimensions implements persistence.VectorStore.
func (s *Store) Dimensions() int { return s.cfg.Dimensions }

// IndexedDimensions returns the dimensions that have an HNSW index (Open creates one per
// configured dimension), in increasing order: the dimensions stores on this database
// were opened with. Vectors of another dimension than the store's are never searched.
func (s *Store) IndexedDimensions(ctx context.Context) ([]int, error) {
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("pgvector: indexed dimensions: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT substr(indexname, length('fathom_vectors_hnsw_') + 1)::int AS dims FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename = 'fathom_vectors' AND indexname ~ '^fathom_vectors_hnsw_[0-9]+$' ORDER BY dims`)
	if err != nil {
		return nil, fmt.Errorf("pgvector: indexed dimensions: %w", err)
	}
	dims, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("pgvector: indexed dimensions: %w", err)
	}
	return dims, nil
}

// Pool returns the store's connection pool (for health checks and tools).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

func (s *Store) check(ctx context.Context) error {
	if s.closed.Load() {
		return persistence.ErrClosed
	}
	return ctx.Err()
}

func encodeMeta(m map[string]string) ([]byte, error) {
	if len(m) == 0 {
		return []byte("{}"), nil
	}
	return json.Marshal(m)
}

// Upsert implements persistence.VectorStore: one transaction, one batch of
// INSERT ... ON CONFLICT DO UPDATE, which also drops the stream's vectors of the same
// seqs stored before tenancy. Vectors are stored normalised.
func (s *Store) Upsert(ctx context.Context, tenant, stream string, vecs []persistence.Vector) error {
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("pgvector: upsert: %w", err)
	}
	if err := persistence.ValidateUpsert(tenant, stream, vecs, s.cfg.Dimensions); err != nil {
		return fmt.Errorf("pgvector: upsert: %w", err)
	}
	if len(vecs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	seqs := make([]int64, len(vecs))
	for i, v := range vecs {
		seqs[i] = int64(v.Seq)
	}
	b.Queue(`DELETE FROM fathom_vectors WHERE tenant = $1 AND stream_id = $2 AND seq = ANY($3)`, legacyTenant, stream, seqs)
	for _, v := range vecs {
		meta, err := encodeMeta(v.Meta)
		if err != nil {
			return fmt.Errorf("pgvector: upsert: encode meta: %w", err)
		}
		b.Queue(`INSERT INTO fathom_vectors (tenant, stream_id, seq, dims, embedding, meta, tsv) VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (tenant, stream_id, seq) DO UPDATE SET dims = EXCLUDED.dims, embedding = EXCLUDED.embedding, meta = EXCLUDED.meta, tsv = EXCLUDED.tsv`,
			tenant, stream, int64(v.Seq), s.cfg.Dimensions, pgv.NewVector(persistence.Normalize(v.Values)), meta, textVector(v.Text))
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
	if err != nil {
		return fmt.Errorf("pgvector: upsert: %w", err)
	}
	return nil
}

// Import bulk-loads vecs into tenant's stream with COPY, far faster than Upsert for
// rebuilding a projection. The seqs must be new to the stream (DeleteStream first to
// rebuild it).
func (s *Store) Import(ctx context.Context, tenant, stream string, vecs []persistence.Vector) error {
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("pgvector: import: %w", err)
	}
	if err := persistence.ValidateUpsert(tenant, stream, vecs, s.cfg.Dimensions); err != nil {
		return fmt.Errorf("pgvector: import: %w", err)
	}
	i := 0
	var rowErr error
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == len(vecs) {
			return nil, nil
		}
		v := vecs[i]
		i++
		meta, err := encodeMeta(v.Meta)
		if err != nil {
			rowErr = err
			return nil, err
		}
		return []any{tenant, stream, int64(v.Seq), s.cfg.Dimensions, pgv.NewVector(persistence.Normalize(v.Values)), meta, textVector(v.Text)}, nil
	})
	_, err := s.pool.CopyFrom(ctx, pgx.Identifier{"fathom_vectors"}, []string{"tenant", "stream_id", "seq", "dims", "embedding", "meta", "tsv"}, src)
	if err != nil {
		if rowErr != nil {
			err = rowErr
		}
		return fmt.Errorf("pgvector: import: %w", err)
	}
	return nil
}

// Search implements persistence.VectorStore.
func (s *Store) Search(ctx context.Context, tenant, stream string, query []float32, k int) ([]persistence.VectorHit, error) {
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("pgvector: search: %w", err)
	}
	if err := persistence.ValidateSearch(tenant, stream, query, k, s.cfg.Dimensions); err != nil {
		return nil, fmt.Errorf("pgvector: search: %w", err)
	}
	rows, err := s.pool.Query(ctx, s.searchSQL, tenant, stream, pgv.NewVector(persistence.Normalize(query)), k)
	if err != nil {
		return nil, fmt.Errorf("pgvector: search: %w", err)
	}
	var out []persistence.VectorHit
	for rows.Next() {
		var seq int64
		var score float64
		var meta []byte
		if err := rows.Scan(&seq, &score, &meta); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgvector: search: %w", err)
		}
		h := persistence.VectorHit{Seq: uint64(seq), Score: float32(score)}
		if len(meta) > 2 {
			if err := json.Unmarshal(meta, &h.Meta); err != nil {
				rows.Close()
				return nil, fmt.Errorf("pgvector: search: %w: meta of %d: %v", persistence.ErrCorrupt, seq, err)
			}
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgvector: search: %w", err)
	}
	// Iterative index scans may return rows slightly out of order; distances tie in
	// any order. The contract: best first, ties by Seq.
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].Score != out[b].Score {
			return out[a].Score > out[b].Score
		}
		return out[a].Seq < out[b].Seq
	})
	return out, nil
}

// textSearchSQL is the statement ranking a stream's rows that hold any of n query terms
// ($3: the terms, each a quoted tsquery operand; $4: the limit) by ts_rank_cd, best
// first, ties by seq. Each row is ranked against the OR of only the terms it holds
// (textRankSQL), which scores it exactly as the OR of all n terms does, at a fraction of
// the cost.
func textSearchSQL(n int) string {
	return "SELECT seq, " + textRankSQL("tsv", "t", n) + `, meta FROM fathom_vectors, CAST(array_to_string($3::text[], ' | ') AS tsquery) AS q, CAST($3::text[] AS tsquery[]) AS t
	WHERE tenant IN ($1, '') AND stream_id = $2 AND tsv @@ q ORDER BY 2 DESC, seq LIMIT $4`
}

// textRankSQL is the SQL expression of ts_rank_cd(col, q, 1), q the OR of n terms, for a
// row that holds at least one of them: terms names a tsquery[] of the terms, one operand
// each. ts_rank_cd allocates and zeroes some 32 kB per item of its query (operands and
// operators: a query of n ORed terms has 2n-1) on every call, whatever the row holds,
// so ranking the many rows a common term matches against a long query took most of a
// retrieval (a stream of 1,000 messages that all hold one term of a 7-term query: 10 to
// 30 ms). The expression hands it instead the OR of the terms the row holds, found by
// @@ tests, which cost no such allocation: the score is the same, since a term a row
// lacks adds no cover to an OR query (TestSearchTextScoresAsTheWholeQuery compares the
// two over every message of the evaluation set).
func textRankSQL(col, terms string, n int) string {
	var b strings.Builder
	b.WriteString("ts_rank_cd(" + col + ", CAST(array_to_string(ARRAY[")
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "CASE WHEN %s @@ %s[%d] THEN %s[%d]::text END", col, terms, i, terms, i)
	}
	b.WriteString("], ' | ') AS tsquery), 1)")
	return b.String()
}

// SearchText implements persistence.TextSearcher (see the package doc).
func (s *Store) SearchText(ctx context.Context, tenant, stream, query string, k int) ([]persistence.VectorHit, error) {
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("pgvector: search text: %w", err)
	}
	if err := persistence.ValidateTextSearch(tenant, stream, k); err != nil {
		return nil, fmt.Errorf("pgvector: search text: %w", err)
	}
	terms := textTerms(query)
	if len(terms) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, textSearchSQL(len(terms)), tenant, stream, terms, k)
	if err != nil {
		return nil, fmt.Errorf("pgvector: search text: %w", err)
	}
	out, err := scanHits(rows)
	if err != nil {
		return nil, fmt.Errorf("pgvector: search text: %w", err)
	}
	return out, nil
}

// scanHits reads (seq, score, meta) rows.
func scanHits(rows pgx.Rows) ([]persistence.VectorHit, error) {
	defer rows.Close()
	var out []persistence.VectorHit
	for rows.Next() {
		var seq int64
		var score float64
		var meta []byte
		if err := rows.Scan(&seq, &score, &meta); err != nil {
			return nil, err
		}
		h := persistence.VectorHit{Seq: uint64(seq), Score: float32(score)}
		if len(meta) > 2 {
			if err := json.Unmarshal(meta, &h.Meta); err != nil {
				return nil, fmt.Errorf("%w: meta of %d: %v", persistence.ErrCorrupt, seq, err)
			}
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// The limits of a tsvector: positions above maxPosition count as maxPosition, and a
// lexeme keeps at most maxPositions of them.
const (
	maxPosition  = 16383
	maxPositions = 255
)

// identifierJoiners are the runes only a whole identifier's term holds (its parts and
// plain words never do).
const identifierJoiners = "-_./:#"

// textVector is the tsvector of text's terms (persistence.Tokenize) with their
// positions. A whole identifier's term (ORD-2024-0042, E_CONN_RESET) has weight A, every
// other term the default D: ts_rank_cd, which knows no term rarity, counts an exact
// identifier ten times a word (weights {0.1, 0.2, 0.4, 1.0}), so a message that names
// it outranks one that shares only its parts.
func textVector(text string) pgtype.TSVector {
	terms := persistence.Tokenize(text)
	pos := map[string][]pgtype.TSVectorPosition{}
	for i, t := range terms {
		if len(pos[t]) < maxPositions {
			p := pgtype.TSVectorPosition{Position: uint16(min(i+1, maxPosition))}
			if strings.ContainsAny(t, identifierJoiners) {
				p.Weight = pgtype.TSVectorWeightA
			}
			pos[t] = append(pos[t], p)
		}
	}
	v := pgtype.TSVector{Valid: true, Lexemes: make([]pgtype.TSVectorLexeme, 0, len(pos))}
	for t, p := range pos {
		v.Lexemes = append(v.Lexemes, pgtype.TSVectorLexeme{Word: t, Positions: p})
	}
	sort.Slice(v.Lexemes, func(a, b int) bool { return v.Lexemes[a].Word < v.Lexemes[b].Word })
	return v
}

// textQuery is the tsquery of query's terms, ORed ("" when it has none).
func textQuery(query string) string { return strings.Join(textTerms(query), " | ") }

// textTerms are query's distinct terms as tsquery operands. Terms hold only letters,
// digits and joiners; quoting keeps the joiners literal.
func textTerms(query string) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range persistence.QueryTerms(query) {
		if seen[t] {
			continue
		}
		seen[t] = true
		out = append(out, "'"+strings.NewReplacer(`'`, `''`, `\`, `\\`).Replace(t)+"'")
	}
	return out
}

// StoredSeqs implements persistence.VectorSeqs: one SELECT over the primary key
// (tenant, stream_id, seq) of the tenant's and the before-tenancy rows of the stream,
// of the store's dimension (the only vectors Search ranks).
func (s *Store) StoredSeqs(ctx context.Context, tenant, stream string, among []uint64) ([]uint64, error) {
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("pgvector: stored seqs: %w", err)
	}
	if err := persistence.ValidateStoredSeqs(tenant, stream); err != nil {
		return nil, fmt.Errorf("pgvector: stored seqs: %w", err)
	}
	if among != nil && len(among) == 0 {
		return nil, nil
	}
	q := "SELECT DISTINCT seq FROM fathom_vectors WHERE tenant IN ($1, '') AND stream_id = $2 AND dims = $3"
	args := []any{tenant, stream, s.cfg.Dimensions}
	if among != nil {
		seqs := make([]int64, len(among))
		for i, seq := range among {
			seqs[i] = int64(seq)
		}
		q += " AND seq = ANY($4)"
		args = append(args, seqs)
	}
	rows, err := s.pool.Query(ctx, q+" ORDER BY seq", args...)
	if err != nil {
		return nil, fmt.Errorf("pgvector: stored seqs: %w", err)
	}
	seqs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (uint64, error) {
		var seq int64
		err := r.Scan(&seq)
		return uint64(seq), err
	})
	if err != nil {
		return nil, fmt.Errorf("pgvector: stored seqs: %w", err)
	}
	return seqs, nil
}

// DeleteStream implements persistence.VectorStore. It removes the tenant's stream's
// vectors of every dimension, and the stream's from before tenancy.
func (s *Store) DeleteStream(ctx context.Context, tenant, stream string) error {
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("pgvector: delete stream: %w", err)
	}
	if err := persistence.ValidateTenant(tenant); err != nil {
		return fmt.Errorf("pgvector: delete stream: %w", err)
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM fathom_vectors WHERE tenant IN ($1, '') AND stream_id = $2", tenant, stream); err != nil {
		return fmt.Errorf("pgvector: delete stream: %w", err)
	}
	return nil
}

// Close implements persistence.VectorStore.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("pgvector: close: %w", persistence.ErrClosed)
	}
	s.pool.Close()
	return nil
}
