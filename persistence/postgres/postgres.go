// Package postgres is Fathom's production journal: PostgreSQL through pgx v5. The schema
// lives in the top-level migrations package and is applied by Open (and by
// `fathom migrate`).
//
// An append is one INSERT of all its rows that only selects them when the expected
// sequence is 0 or the row at the expected sequence exists; the primary key
// (stream_id, seq) does the rest. Two appends racing for the same position both try to
// insert expected+1: the second blocks on the first's index entry and, when it commits,
// inserts nothing (ON CONFLICT DO NOTHING), which becomes persistence.ErrConflict; an
// append expecting a position the stream has not reached selects no rows, also a
// conflict. One statement means one round trip, and the stream's head is simply its
// highest seq (an index lookup), so there is no second row to update per append.
// Concurrent appends of different streams share a transaction (group commit, group.go):
// one round trip and one WAL flush for all of them. An indexed append can also be made
// asynchronously (AppendIndexedAsync, persistence.AsyncIndexAppender): prepared on the
// caller, queued to the group commit, its outcome passed to a callback by the committer,
// so the session grains' pipelined appends keep no goroutine waiting on the commit.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fathom-agents/fathom/migrations"
	"github.com/fathom-agents/fathom/persistence"
)

// loadChunk is how many batches (appends) Load reads per query; fn runs between
// queries, holding no connection.
const loadChunk = 1000

// defaultCommitters is Options.Committers' default.
const defaultCommitters = 2

// Options tune the pool.
type Options struct {
	// MaxConns bounds the pool. Zero means 16.
	MaxConns int32
	// ConnectTimeout bounds establishing one connection. Zero means 5s.
	ConnectTimeout time.Duration
	// Committers is how many appends (each possibly a group of concurrent appends, see
	// group.go) may be in flight at once. Zero means 2.
	Committers int
	// Facts reads the session index's facts (user, goal, cost) from each indexed append's
	// records (persistence/indexfacts.Of). Nil keeps none.
	Facts persistence.FactsFunc
}

// Journal is the PostgreSQL implementation of persistence.Journal.
type Journal struct {
	pool    *pgxpool.Pool
	group   *committers // group.go
	closed  atomic.Bool
	facts   persistence.FactsFunc // Options.Facts (index.go)
	observe atomic.Pointer[persistence.AppendObserver]
}

// Journal is a persistence.SessionStore: every capability a node needs.
var _ persistence.SessionStore = (*Journal)(nil)

// Open connects to dsn, checks the server answers and applies pending migrations.
func Open(ctx context.Context, dsn string, opts Options) (*Journal, error) {
	pool, err := connect(ctx, dsn, opts)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	if opts.Committers <= 0 {
		opts.Committers = defaultCommitters
	}
	return &Journal{pool: pool, group: startCommitters(pool, opts.Committers), facts: opts.Facts}, nil
}

func connect(ctx context.Context, dsn string, opts Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: invalid DSN: %w", err) // pgx redacts the password
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 16
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 5 * time.Second
	}
	cfg.MaxConns = opts.MaxConns
	cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	where := cfg.ConnConfig.Host + ":" + strconv.Itoa(int(cfg.ConnConfig.Port))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect to %s: %w", where, err)
	}
	pctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect to %s: %w", where, err)
	}
	return pool, nil
}

// MigrateDSN connects to dsn, applies pending migrations and disconnects.
func MigrateDSN(ctx context.Context, dsn string) error {
	pool, err := connect(ctx, dsn, Options{MaxConns: 2})
	if err != nil {
		return err
	}
	defer pool.Close()
	return Migrate(ctx, pool)
}

// migrationLock is the advisory lock key held while migrating ("fathom" in ASCII).
const migrationLock = 0x66617468_6f6d

// Migrate applies the migrations not yet recorded in fathom_schema_migrations, in file
// order, each in its own transaction, holding an advisory lock, then records the journal
// format (persistence.Format). A database with a migration this binary does not know,
// or of a newer format, is refused with a *persistence.FormatError and left as it is.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrationLock)); err != nil {
		return fmt.Errorf("postgres: migrate: take lock: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", int64(migrationLock))
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS fathom_schema_migrations (
		version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	applied := map[int]bool{}
	rows, err := conn.Query(ctx, "SELECT version FROM fathom_schema_migrations")
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	for _, v := range versions {
		applied[int(v)] = true
	}
	files, known, err := migrationFiles()
	if err != nil {
		return err
	}
	if newest := slices.Max(append(versions, 0)); int(newest) > known {
		return &persistence.FormatError{Journal: "postgres", Found: int(newest), Known: known, What: "schema migration"}
	}
	for _, f := range files {
		if applied[f.version] {
			continue
		}
		sql, err := fs.ReadFile(migrations.FS, f.name)
		if err != nil {
			return err
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO fathom_schema_migrations (version, name) VALUES ($1, $2)", f.version, f.name)
			return err
		})
		if err != nil {
			return fmt.Errorf("postgres: migration %s: %w", f.name, err)
		}
	}
	return stampFormat(ctx, conn)
}

type migrationFile struct {
	name    string
	version int
}

// migrationFiles returns the embedded migrations in order and the highest version.
func migrationFiles() ([]migrationFile, int, error) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return nil, 0, err
	}
	sort.Strings(names)
	files := make([]migrationFile, 0, len(names))
	known := 0
	for _, f := range names {
		num, _, ok := strings.Cut(f, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, 0, fmt.Errorf("postgres: migration file %s is not named NNNN_name.sql", f)
		}
		files = append(files, migrationFile{name: f, version: v})
		known = max(known, v)
	}
	return files, known, nil
}

// stampFormat refuses a journal whose recorded format (fathom_format, migration 0007) is
// newer than persistence.Format, and raises an older one to it.
func stampFormat(ctx context.Context, conn *pgxpool.Conn) error {
	var found int
	if err := conn.QueryRow(ctx, "SELECT format FROM fathom_format").Scan(&found); err != nil {
		return fmt.Errorf("postgres: read journal format: %w", err)
	}
	if found > persistence.Format {
		return &persistence.FormatError{Journal: "postgres", Found: found, Known: persistence.Format, What: "format"}
	}
	if found < persistence.Format {
		if _, err := conn.Exec(ctx, "UPDATE fathom_format SET format = $1 WHERE format < $1", persistence.Format); err != nil {
			return fmt.Errorf("postgres: record journal format: %w", err)
		}
	}
	return nil
}

// Pool is the journal's connection pool (for health checks and tools).
func (j *Journal) Pool() *pgxpool.Pool { return j.pool }

func (j *Journal) check(ctx context.Context) error {
	if j.closed.Load() {
		return persistence.ErrClosed
	}
	return ctx.Err()
}

// appendSQL stores one append as one row of fathom_event_batches (migrations/0002). It
// inserts nothing unless the stream's head is $2: the batch holding seq $2 (the one with
// the greatest first_seq <= $2) must end at $2; an append racing past the same head meets
// the primary key and inserts nothing either (so it never aborts the appends it shares a
// group commit with). $6 is the events' checksums (migrations/0007).
var appendSQL = batchSQL("$3", "$4::bytea[]", "$5::timestamptz[]", "$6::bigint[]")

// appendOneSQL is appendSQL for the common single-event append: the arrays are built by
// the server from scalar parameters, which saves the client the array encoding.
var appendOneSQL = batchSQL("ARRAY[$3::text]", "ARRAY[$4::bytea]", "ARRAY[$5::timestamptz]", "ARRAY[$6::bigint]")

// batchSQL is the guarded batch INSERT of appendSQL with the given array expressions.
func batchSQL(types, data, ats, crcs string) string {
	return `
INSERT INTO fathom_event_batches (stream_id, first_seq, last_seq, types, data, ats, crcs)
SELECT $1, $2 + 1, $2 + cardinality(` + types + `::text[]), ` + types + `, ` + data + `, ` + ats + `, ` + crcs + `
WHERE $2 = 0 OR (SELECT last_seq FROM fathom_event_batches
                 WHERE stream_id = $1 AND first_seq <= $2 ORDER BY first_seq DESC LIMIT 1) = $2
ON CONFLICT DO NOTHING`
}

// Append implements persistence.Journal.
func (j *Journal) Append(ctx context.Context, stream string, expectedSeq uint64, recs []persistence.Record) (uint64, error) {
	return j.append(ctx, stream, expectedSeq, recs, nil)
}

func (j *Journal) append(ctx context.Context, stream string, expectedSeq uint64, recs []persistence.Record, entry *persistence.IndexEntry) (last uint64, err error) {
	if o := j.observe.Load(); o != nil {
		defer func(start time.Time) { (*o)(time.Since(start), len(recs), err) }(time.Now())
	}
	sql, args, err := j.prepare(ctx, stream, expectedSeq, recs, entry)
	if err != nil {
		return 0, err
	}
	tag, err := j.group.exec(ctx, sql, args...)
	return appended(stream, expectedSeq, len(recs), tag, err)
}

// appendAsync is append with its outcome passed to done (exactly once, on another
// goroutine) instead of returned: the statement is prepared on the caller and submitted
// to the committers, whose completion calls done. Nothing waits for the commit.
func (j *Journal) appendAsync(ctx context.Context, stream string, expectedSeq uint64, recs []persistence.Record, entry *persistence.IndexEntry, done func(last uint64, err error)) {
	a := &asyncAppend{stream: stream, expectedSeq: expectedSeq, n: len(recs), observe: j.observe.Load(), done: done}
	if a.observe != nil {
		a.start = time.Now()
	}
	sql, args, err := j.prepare(ctx, stream, expectedSeq, recs, entry)
	if err != nil {
		go a.fail(err)
		return
	}
	a.ctx, a.sql, a.args, a.groupReq.done = ctx, sql, args, a
	if err := j.group.submit(&a.groupReq); err != nil {
		go a.complete(pgconn.CommandTag{}, err)
	}
}

// asyncAppend is one append of appendAsync: its committers' request and what its
// completion needs, in one allocation.
type asyncAppend struct {
	groupReq
	stream      string
	expectedSeq uint64
	n           int
	start       time.Time
	observe     *persistence.AppendObserver
	done        func(last uint64, err error)
}

// complete is the committers' outcome of the statement.
func (a *asyncAppend) complete(tag pgconn.CommandTag, err error) {
	last, err := appended(a.stream, a.expectedSeq, a.n, tag, err)
	if err != nil {
		a.fail(err)
		return
	}
	if a.observe != nil {
		(*a.observe)(time.Since(a.start), a.n, nil)
	}
	a.done(last, nil)
}

// fail ends the append with err.
func (a *asyncAppend) fail(err error) {
	if a.observe != nil {
		(*a.observe)(time.Since(a.start), a.n, err)
	}
	a.done(0, err)
}

// prepare checks an append and builds its statement: appendIndexedSQL with entry,
// else appendOneSQL or appendSQL.
func (j *Journal) prepare(ctx context.Context, stream string, expectedSeq uint64, recs []persistence.Record, entry *persistence.IndexEntry) (string, []any, error) {
	if err := persistence.ValidateAppend(stream, expectedSeq, recs); err != nil {
		return "", nil, err
	}
	if err := j.check(ctx); err != nil {
		return "", nil, err
	}
	if expectedSeq > math.MaxInt64-uint64(len(recs)) {
		return "", nil, fmt.Errorf("%w: sequence overflow", persistence.ErrInvalid)
	}
	now := time.Now().UTC()
	types := make([]string, len(recs))
	datas := make([][]byte, len(recs))
	ats := make([]time.Time, len(recs))
	crcs := make([]int64, len(recs))
	for i, r := range recs {
		types[i], datas[i], ats[i] = r.Type, r.Data, r.At
		if r.At.IsZero() {
			ats[i] = now
		}
		if datas[i] == nil {
			datas[i] = []byte{}
		}
		crcs[i] = int64(persistence.RecordChecksum(stream, expectedSeq+1+uint64(i), r.Type, datas[i]))
	}
	switch {
	case entry != nil: // index.go
		owner, ttl := leaseArgs(*entry)
		user, goal, cost, tenant, sowner, forkedFrom := factArgs(*entry)
		return appendIndexedSQL, []any{stream, int64(expectedSeq), types, datas, ats, crcs, entry.Status, dueAt(*entry), owner, ttl,
			user, goal, cost, tenant, sowner, int64(min(entry.Tokens, math.MaxInt64)), int64(min(entry.ArtifactBytes, math.MaxInt64)), forkedFrom}, nil
	case len(recs) == 1:
		return appendOneSQL, []any{stream, int64(expectedSeq), types[0], datas[0], ats[0], crcs[0]}, nil
	default:
		return appendSQL, []any{stream, int64(expectedSeq), types, datas, ats, crcs}, nil
	}
}

// appended is the outcome of an append of n records after expectedSeq to stream whose
// statement returned tag and err: its last seq, or the error (a conflict when the
// statement stored nothing or met the primary key).
func appended(stream string, expectedSeq uint64, n int, tag pgconn.CommandTag, err error) (uint64, error) {
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return 0, fmt.Errorf("append to %s after seq %d: %w", stream, expectedSeq, persistence.ErrConflict)
		}
		return 0, fmt.Errorf("append to %s: %w", stream, err)
	}
	if tag.RowsAffected() != 1 {
		return 0, fmt.Errorf("append to %s after seq %d: %w", stream, expectedSeq, persistence.ErrConflict)
	}
	return expectedSeq + uint64(n), nil
}

// loadSQL reads the batches holding events after $2, oldest first: the batch holding
// seq $2+1 (the greatest first_seq <= $2+1) and every later one.
const loadSQL = `
SELECT first_seq, types, data, ats, crcs FROM fathom_event_batches
WHERE stream_id = $1 AND first_seq >= coalesce(
    (SELECT max(first_seq) FROM fathom_event_batches WHERE stream_id = $1 AND first_seq <= $2 + 1), 1)
ORDER BY first_seq LIMIT $3`

// Load implements persistence.Journal.
func (j *Journal) Load(ctx context.Context, stream string, afterSeq uint64, fn func(persistence.Record) error) error {
	if afterSeq >= math.MaxInt64 {
		return nil
	}
	next := int64(afterSeq)
	for {
		if err := j.check(ctx); err != nil {
			return err
		}
		rows, err := j.pool.Query(ctx, loadSQL, stream, next, loadChunk)
		if err != nil {
			return fmt.Errorf("load %s: %w", stream, err)
		}
		chunk := make([]persistence.Record, 0, 64)
		var (
			first, batches int64
			types          []string
			datas          [][]byte
			ats            []time.Time
			crcs           []int64
		)
		_, err = pgx.ForEachRow(rows, []any{&first, &types, &datas, &ats, &crcs}, func() error {
			batches++
			if len(datas) != len(types) || len(ats) != len(types) || (crcs != nil && len(crcs) != len(types)) {
				return &persistence.RecordError{Stream: stream, Seq: uint64(first),
					Reason: fmt.Sprintf("batch at seq %d: %d types, %d data, %d times, %d checksums", first, len(types), len(datas), len(ats), len(crcs))}
			}
			for i := range types {
				seq := first + int64(i)
				if seq <= next {
					continue
				}
				if crcs != nil {
					if err := persistence.VerifyChecksum(stream, uint64(seq), false, uint32(crcs[i]), persistence.RecordChecksum(stream, uint64(seq), types[i], datas[i])); err != nil {
						return err
					}
				}
				chunk = append(chunk, persistence.Record{Seq: uint64(seq), Type: types[i], Data: datas[i], At: ats[i].UTC()})
			}
			types, datas, ats, crcs = nil, nil, nil, nil
			return nil
		})
		if err != nil {
			return fmt.Errorf("load %s: %w", stream, err)
		}
		for _, rec := range chunk {
			if err := fn(rec); err != nil {
				return err
			}
		}
		if batches < loadChunk || len(chunk) == 0 {
			return nil
		}
		next = int64(chunk[len(chunk)-1].Seq)
	}
}

// LastSeq implements persistence.Journal.
func (j *Journal) LastSeq(ctx context.Context, stream string) (uint64, error) {
	if err := j.check(ctx); err != nil {
		return 0, err
	}
	var last int64
	err := j.pool.QueryRow(ctx, `SELECT coalesce((SELECT last_seq FROM fathom_event_batches
		WHERE stream_id = $1 ORDER BY first_seq DESC LIMIT 1), 0)`, stream).Scan(&last)
	if err != nil {
		return 0, fmt.Errorf("last seq of %s: %w", stream, err)
	}
	return uint64(last), nil
}

// SaveSnapshot implements persistence.Journal.
func (j *Journal) SaveSnapshot(ctx context.Context, stream string, snap persistence.Snapshot) error {
	if stream == "" {
		return fmt.Errorf("%w: empty stream id", persistence.ErrInvalid)
	}
	if err := j.check(ctx); err != nil {
		return err
	}
	if snap.At.IsZero() {
		snap.At = time.Now().UTC()
	}
	if snap.Data == nil {
		snap.Data = []byte{}
	}
	// A snapshot only shortens recovery: losing the last one in a server crash just
	// means replaying a few more durable events. So it commits asynchronously and costs
	// no WAL flush of its own; the next synchronous commit (an event append) flushes it
	// along, and event appends never wait for snapshots. The transaction is one batch,
	// one round trip: a statement that fails skips the rest up to the batch's end, COMMIT
	// included, and the pool discards a connection left inside a transaction.
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL synchronous_commit = off")
	b.Queue(`INSERT INTO fathom_snapshots (stream_id, seq, data, at, crc) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (stream_id, seq) DO UPDATE SET data = EXCLUDED.data, at = EXCLUDED.at, crc = EXCLUDED.crc`,
		stream, int64(snap.Seq), snap.Data, snap.At, int64(persistence.RecordChecksum(stream, snap.Seq, "snapshot", snap.Data)))
	b.Queue("COMMIT")
	err := j.pool.SendBatch(ctx, b).Close()
	if err != nil {
		return fmt.Errorf("save snapshot of %s at %d: %w", stream, snap.Seq, err)
	}
	return nil
}

// LoadSnapshot implements persistence.Journal.
func (j *Journal) LoadSnapshot(ctx context.Context, stream string, maxSeq uint64) (persistence.Snapshot, bool, error) {
	if err := j.check(ctx); err != nil {
		return persistence.Snapshot{}, false, err
	}
	if maxSeq > math.MaxInt64 {
		maxSeq = math.MaxInt64
	}
	var s persistence.Snapshot
	var seq int64
	var crc *int64
	err := j.pool.QueryRow(ctx, `SELECT seq, data, at, crc FROM fathom_snapshots
		WHERE stream_id = $1 AND seq <= $2 ORDER BY seq DESC LIMIT 1`, stream, int64(maxSeq)).Scan(&seq, &s.Data, &s.At, &crc)
	if errors.Is(err, pgx.ErrNoRows) {
		return persistence.Snapshot{}, false, nil
	}
	if err != nil {
		return persistence.Snapshot{}, false, fmt.Errorf("load snapshot of %s: %w", stream, err)
	}
	s.Seq, s.At = uint64(seq), s.At.UTC()
	if crc != nil {
		if err := persistence.VerifyChecksum(stream, s.Seq, true, uint32(*crc), persistence.RecordChecksum(stream, s.Seq, "snapshot", s.Data)); err != nil {
			return persistence.Snapshot{}, false, fmt.Errorf("load snapshot of %s: %w", stream, err)
		}
	}
	return s, true, nil
}

// ListStreams implements persistence.Journal.
func (j *Journal) ListStreams(ctx context.Context, prefix string) ([]persistence.StreamInfo, error) {
	if err := j.check(ctx); err != nil {
		return nil, err
	}
	rows, err := j.pool.Query(ctx, `SELECT stream_id, max(seq), min(at), max(at) FROM fathom_events
		WHERE starts_with(stream_id, $1) GROUP BY stream_id ORDER BY stream_id`, prefix)
	if err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	var out []persistence.StreamInfo
	var si persistence.StreamInfo
	var last int64
	_, err = pgx.ForEachRow(rows, []any{&si.ID, &last, &si.CreatedAt, &si.UpdatedAt}, func() error {
		si.LastSeq, si.CreatedAt, si.UpdatedAt = uint64(last), si.CreatedAt.UTC(), si.UpdatedAt.UTC()
		out = append(out, si)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	return out, nil
}

// Close closes the pool. Calls after Close return persistence.ErrClosed.
func (j *Journal) Close() error {
	if j.closed.Swap(true) {
		return persistence.ErrClosed
	}
	j.group.close()
	j.pool.Close()
	return nil
}

var _ persistence.AppendObservable = (*Journal)(nil)

// ObserveAppends implements persistence.AppendObservable.
func (j *Journal) ObserveAppends(o persistence.AppendObserver) {
	if o == nil {
		j.observe.Store(nil)
		return
	}
	j.observe.Store(&o)
}
