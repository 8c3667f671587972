package pgvector_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/pgvector"
	"github.com/fathom-agents/fathom/persistence/postgres"
	"github.com/fathom-agents/fathom/persistence/vectormem"
	"github.com/fathom-agents/fathom/persistence/vectortest"
)

func open(t testing.TB, dsn string, dims, efSearch int) *pgvector.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := pgvector.Open(ctx, pgvector.Config{DSN: dsn, Dimensions: dims, EfSearch: efSearch})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	vectortest.Run(t, func(t *testing.T, dims int) persistence.VectorStore {
		s := open(t, dsn, dims, 0)
		// One database for the suite: each subtest starts from an empty table.
		if _, err := s.Pool().Exec(context.Background(), "TRUNCATE fathom_vectors"); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestRecallAgainstExact: recall@10 of the HNSW index against the exact scan on 10,000
// random unit vectors (the hardest case for HNSW: no clusters) at the production
// settings: the dimension of the node's default embedder and the store's default
// ef_search and build parameters, with the query plan checked to use the index.
func TestRecallAgainstExact(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 10,000 vectors")
	}
	const n, queries, k = 10000, 100, 10
	dims := hashembed.DefaultDimensions
	dsn := testenv.PostgresDSN(t)
	loader := open(t, dsn, dims, 0)
	defer loader.Close()
	exact, _ := vectormem.New(dims)
	r := rand.New(rand.NewSource(42))
	vecs := vectortest.RandomUnit(r, n, dims)
	batch := make([]persistence.Vector, n)
	for i, v := range vecs {
		batch[i] = persistence.Vector{Seq: uint64(i + 1), Values: v}
	}
	ctx := context.Background()
	start := time.Now()
	// Bulk load as a projection rebuild would: COPY without the index, then Open builds
	// it in one pass (much faster than 10,000 incremental index inserts).
	if _, err := loader.Pool().Exec(ctx, fmt.Sprintf("DROP INDEX fathom_vectors_hnsw_%d", dims)); err != nil {
		t.Fatal(err)
	}
	if err := loader.Import(ctx, "default", "big", batch); err != nil {
		t.Fatal(err)
	}
	// At 10,000 rows and a high ef_search the planner rightly prefers an exact scan and
	// sort of the stream (a few ms); this test is about the index, so rule those out.
	for _, set := range []string{"enable_seqscan = off", "enable_sort = off"} {
		if _, err := loader.Pool().Exec(ctx, "ALTER DATABASE "+dbName(t, dsn)+" SET "+set); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, dsn, dims, 0) // the defaults, as the node opens it
	defer s.Close()
	if s.EfSearch() != pgvector.DefaultEfSearch {
		t.Fatalf("store opened with ef_search %d, want the default %d", s.EfSearch(), pgvector.DefaultEfSearch)
	}
	if err := exact.Upsert(ctx, "default", "big", batch); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, "ANALYZE fathom_vectors"); err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %d × %d vectors (COPY, then HNSW build) in %v", n, dims, time.Since(start).Round(time.Millisecond))

	// The planner must walk the HNSW index, or this measures nothing.
	q := vectortest.RandomUnit(r, 1, dims)[0]
	var plan strings.Builder
	rows, err := s.Pool().Query(ctx, fmt.Sprintf("EXPLAIN SELECT seq FROM fathom_vectors WHERE stream_id = 'big' AND dims = %d ORDER BY (embedding::vector(%d)) <=> $1 LIMIT 10", dims, dims), vecString(q))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		_ = rows.Scan(&line)
		plan.WriteString(line + "\n")
	}
	if !strings.Contains(plan.String(), fmt.Sprintf("fathom_vectors_hnsw_%d", dims)) {
		t.Fatalf("search does not use the HNSW index:\n%s", plan.String())
	}

	found := 0
	start = time.Now()
	for _, q := range vectortest.RandomUnit(r, queries, dims) {
		got, err := s.Search(ctx, "default", "big", q, k)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := exact.Search(ctx, "default", "big", q, k)
		set := map[uint64]bool{}
		for _, h := range got {
			set[h.Seq] = true
		}
		for _, h := range want {
			if set[h.Seq] {
				found++
			}
		}
	}
	recall := float64(found) / float64(queries*k)
	t.Logf("recall@%d = %.3f over %d queries (%d dimensions, ef_search %d), %v per query", k, recall, queries, dims, s.EfSearch(), (time.Since(start) / queries).Round(time.Microsecond))
	if recall < 0.95 {
		t.Fatalf("recall@%d = %.3f < 0.95 at the default ef_search %d and %d dimensions", k, recall, s.EfSearch(), dims)
	}
}

func dbName(t testing.TB, dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

func vecString(v []float32) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconvF(x))
	}
	b.WriteByte(']')
	return b.String()
}

// TestJournalWithoutExtension: on a database where pgvector cannot be created (here: a
// role that may not create the untrusted extension), the journal still migrates and
// works, Open fails with ErrNoExtension, and once an administrator creates the
// extension Open succeeds with no other step.
func TestJournalWithoutExtension(t *testing.T) {
	admin := testenv.PostgresAdminDSN(t)
	dsn := testenv.PostgresDSN(t)
	ctx := context.Background()
	u, _ := url.Parse(dsn)
	db := strings.TrimPrefix(u.Path, "/")
	role := "fv_" + db
	adminDB := *u
	au, _ := url.Parse(admin)
	adminDB.User = au.User
	conn, err := pgx.Connect(ctx, adminDB.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"ALTER DATABASE " + db + " OWNER TO " + role,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), admin)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
			_, _ = c.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
			c.Close(context.Background())
		}
	})
	ru := *u
	ru.User = url.User(role)
	roleDSN := ru.String()

	j, err := postgres.Open(ctx, roleDSN, postgres.Options{})
	if err != nil {
		t.Fatalf("journal without pgvector: %v", err)
	}
	if _, err := j.Append(ctx, "s", 0, []persistence.Record{{Type: "session_started", Data: []byte("x")}}); err != nil {
		t.Fatalf("append without pgvector: %v", err)
	}
	j.Close()
	if _, err := pgvector.Open(ctx, pgvector.Config{DSN: roleDSN, Dimensions: 4}); !errors.Is(err, pgvector.ErrNoExtension) {
		t.Fatalf("Open without the extension: %v, want ErrNoExtension", err)
	}
	if _, err := conn.Exec(ctx, "CREATE EXTENSION vector"); err != nil {
		t.Fatal(err)
	}
	s, err := pgvector.Open(ctx, pgvector.Config{DSN: roleDSN, Dimensions: 4})
	if err != nil {
		t.Fatalf("Open after the extension was created: %v", err)
	}
	defer s.Close()
	if err := s.Upsert(ctx, "default", "s", []persistence.Vector{{Seq: 1, Values: []float32{1, 2, 3, 4}}}); err != nil {
		t.Fatal(err)
	}
}

// TestTwoDimensions: stores of two dimensions share the table, each with its own index,
// and do not see each other's vectors (nor count them stored).
func TestTwoDimensions(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	a, b := open(t, dsn, 3, 0), open(t, dsn, 5, 0)
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	if err := a.Upsert(ctx, "default", "s", []persistence.Vector{{Seq: 1, Values: []float32{1, 0, 0}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Upsert(ctx, "default", "s", []persistence.Vector{{Seq: 2, Values: []float32{1, 0, 0, 0, 0}}}); err != nil {
		t.Fatal(err)
	}
	if hits, err := a.Search(ctx, "default", "s", []float32{1, 0, 0}, 5); err != nil || len(hits) != 1 || hits[0].Seq != 1 {
		t.Fatalf("3-d store: %+v %v", hits, err)
	}
	if seqs, err := a.StoredSeqs(ctx, "default", "s", nil); err != nil || len(seqs) != 1 || seqs[0] != 1 {
		t.Fatalf("3-d store's stored seqs %v, %v; want [1]", seqs, err)
	}
	if seqs, err := b.StoredSeqs(ctx, "default", "s", []uint64{1, 2}); err != nil || len(seqs) != 1 || seqs[0] != 2 {
		t.Fatalf("5-d store's stored seqs among [1 2] %v, %v; want [2]", seqs, err)
	}
	if _, err := pgvector.Open(ctx, pgvector.Config{DSN: dsn, Dimensions: 3000}); !errors.Is(err, persistence.ErrInvalid) {
		t.Fatalf("3000 dims: %v", err)
	}
	if dims, err := a.IndexedDimensions(ctx); err != nil || len(dims) != 2 || dims[0] != 3 || dims[1] != 5 {
		t.Fatalf("indexed dimensions %v, %v; want [3 5]", dims, err)
	}
}

// TestFixedColumnDimension: a column altered to a fixed dimension (vector(N)) refuses a
// store of another dimension with ErrDimensions, and takes one of N.
func TestFixedColumnDimension(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	s := open(t, dsn, 4, 0)
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, "ALTER TABLE fathom_vectors ALTER COLUMN embedding TYPE vector(4)"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := pgvector.Open(ctx, pgvector.Config{DSN: dsn, Dimensions: 8})
	if !errors.Is(err, pgvector.ErrDimensions) || !strings.Contains(err.Error(), "vector(4)") {
		t.Fatalf("8 dims on a vector(4) column: %v", err)
	}
	open(t, dsn, 4, 0).Close()
}

// TestEfSearchOnEveryPooledConnection: hnsw.ef_search is a per-session setting, so the
// configured value must hold on every connection of the pool, not only the first: all
// MaxConns connections, held at once, report it.
func TestEfSearchOnEveryPooledConnection(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	ctx := context.Background()
	for _, ef := range []int{0, 321} {
		s, err := pgvector.Open(ctx, pgvector.Config{DSN: dsn, Dimensions: 4, EfSearch: ef, MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		want := ef
		if want == 0 {
			want = pgvector.DefaultEfSearch
		}
		var held []*pgxpool.Conn
		for range 4 {
			c, err := s.Pool().Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
		for i, c := range held {
			var got string
			if err := c.QueryRow(ctx, "SHOW hnsw.ef_search").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != strconv.Itoa(want) {
				t.Errorf("ef_search %d: connection %d of the pool has hnsw.ef_search %s", ef, i, got)
			}
			c.Release()
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pgvector.Open(ctx, pgvector.Config{DSN: dsn, Dimensions: 4, EfSearch: 1001}); !errors.Is(err, persistence.ErrInvalid) || !strings.Contains(err.Error(), "ef_search") {
		t.Fatalf("ef_search 1001: %v", err)
	}
}

// TestVectorsFromBeforeTenancy: a table of vectors stored before tenancy (no tenant
// column) is migrated by Open (0011_vector_tenants.sql): a stream with a session index
// row takes its session's tenant and is found only under it; a stream without one keeps
// no tenant and is still found for the stream, replaced by an upsert under a tenant and
// removed by a delete; StoredSeqs counts it for the stream under any tenant (besides
// the tenant's own).
func TestVectorsFromBeforeTenancy(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	ctx := context.Background()
	s := open(t, dsn, 2, 0)
	for _, q := range []string{ // back to the schema of 0004
		"ALTER TABLE fathom_vectors DROP COLUMN tenant",
		"ALTER TABLE fathom_vectors ADD PRIMARY KEY (stream_id, seq)",
		"DELETE FROM fathom_schema_migrations WHERE name = '0011_vector_tenants.sql'",
		`INSERT INTO fathom_vectors (stream_id, seq, dims, embedding, meta) VALUES
			('acme-1', 1, 2, '[1,0]', '{"who":"acme"}'), ('orphan', 1, 2, '[0,1]', '{"who":"old"}')`,
		`INSERT INTO fathom_sessions (session_id, status, seq, updated_at, created_at, tenant) VALUES ('acme-1', 'completed', 1, now(), now(), 'acme')`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	s = open(t, dsn, 2, 0) // migrates
	defer s.Close()
	var tenant string
	if err := s.Pool().QueryRow(ctx, "SELECT tenant FROM fathom_vectors WHERE stream_id = 'acme-1'").Scan(&tenant); err != nil || tenant != "acme" {
		t.Fatalf("acme-1's vector has tenant %q (%v), want its session's, acme", tenant, err)
	}
	find := func(tenant, stream string) []persistence.VectorHit {
		t.Helper()
		hits, err := s.Search(ctx, tenant, stream, []float32{1, 1}, 5)
		if err != nil {
			t.Fatal(err)
		}
		return hits
	}
	if hits := find("acme", "acme-1"); len(hits) != 1 || hits[0].Meta["who"] != "acme" {
		t.Fatalf("acme's migrated stream: %+v", hits)
	}
	if hits := find("globex", "acme-1"); len(hits) != 0 {
		t.Fatalf("globex finds acme's migrated stream: %+v", hits)
	}
	if hits := find("default", "orphan"); len(hits) != 1 || hits[0].Meta["who"] != "old" {
		t.Fatalf("a stream from before tenancy without an index row: %+v", hits)
	}
	if err := s.Upsert(ctx, "default", "orphan", []persistence.Vector{{Seq: 1, Values: []float32{1, 0}, Meta: map[string]string{"who": "new"}}}); err != nil {
		t.Fatal(err)
	}
	if hits := find("default", "orphan"); len(hits) != 1 || hits[0].Meta["who"] != "new" {
		t.Fatalf("after an upsert under its tenant: %+v", hits)
	}
	if _, err := s.Pool().Exec(ctx, "INSERT INTO fathom_vectors (tenant, stream_id, seq, dims, embedding) VALUES ('', 'orphan', 2, 2, '[0,1]')"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tenant      string
		among, want []uint64
	}{{"default", nil, []uint64{1, 2}}, {"default", []uint64{2, 3}, []uint64{2}}, {"globex", nil, []uint64{2}}} {
		if seqs, err := s.StoredSeqs(ctx, c.tenant, "orphan", c.among); err != nil || fmt.Sprint(seqs) != fmt.Sprint(c.want) {
			t.Fatalf("stored seqs of %s's stream with a vector from before tenancy, among %v: %v, %v; want %v", c.tenant, c.among, seqs, err, c.want)
		}
	}
	if err := s.DeleteStream(ctx, "default", "orphan"); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM fathom_vectors WHERE stream_id = 'orphan'").Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d vectors of the deleted stream left (%v)", left, err)
	}
}

// TestTextIndexByStream: Open leaves text search one GIN index on (stream_id, tsv)
// (0016), not 0013's index of every stream's terms, and a second Open does not build
// that one again (BenchmarkRetrievalLatency100k measures what it buys).
func TestTextIndexByStream(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.PostgresDSN(t)
	for range 2 {
		s := open(t, dsn, 8, 0)
		var byStream, all bool
		if err := s.Pool().QueryRow(ctx, "SELECT to_regclass('fathom_vectors_stream_tsv') IS NOT NULL, to_regclass('fathom_vectors_tsv') IS NOT NULL").Scan(&byStream, &all); err != nil {
			t.Fatal(err)
		}
		if !byStream || all {
			t.Fatalf("indexes after Open: by stream %v, all streams %v; want only by stream", byStream, all)
		}
		s.Close()
	}
}
