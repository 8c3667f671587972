package pgvector_test

import (
	"context"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/vectortest"
)

// BenchmarkHNSWQuery100k: top-10 searches through the HNSW index over 100,000 random
// vectors in one stream (default 256 dimensions; FATHOM_BENCH_VECTOR_DIMS overrides,
// e.g. 1536), reporting p50 and p99 latency. Loading takes a while: COPY, then one
// index build.
func BenchmarkHNSWQuery100k(b *testing.B) {
	const n, k = 100000, 10
	dims := 256
	if v, err := strconv.Atoi(os.Getenv("FATHOM_BENCH_VECTOR_DIMS")); err == nil && v > 0 {
		dims = v
	}
	dsn := testenv.PostgresDSN(b)
	ctx := context.Background()
	loader := open(b, dsn, dims, 0)
	defer loader.Close()
	idx := "fathom_vectors_hnsw_" + strconv.Itoa(dims)
	if _, err := loader.Pool().Exec(ctx, "DROP INDEX "+idx); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewSource(7))
	start := time.Now()
	for off := 0; off < n; off += 10000 {
		vecs := vectortest.RandomUnit(r, 10000, dims)
		batch := make([]persistence.Vector, len(vecs))
		for i, v := range vecs {
			batch[i] = persistence.Vector{Seq: uint64(off + i + 1), Values: v}
		}
		if err := loader.Import(ctx, "default", "bench", batch); err != nil {
			b.Fatal(err)
		}
	}
	copied := time.Since(start)
	if _, err := loader.Pool().Exec(ctx, "ALTER DATABASE "+dbName(b, dsn)+" SET maintenance_work_mem = '512MB'"); err != nil {
		b.Fatal(err)
	}
	s := open(b, dsn, dims, 0) // builds the index
	defer s.Close()
	if _, err := s.Pool().Exec(ctx, "ANALYZE fathom_vectors"); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d × %d vectors: COPY %v, index build %v", n, dims, copied.Round(time.Millisecond), (time.Since(start) - copied).Round(time.Millisecond))

	queries := vectortest.RandomUnit(r, 1000, dims)
	var plan strings.Builder
	rows, err := s.Pool().Query(ctx, "EXPLAIN SELECT seq FROM fathom_vectors WHERE stream_id = 'bench' AND dims = "+strconv.Itoa(dims)+
		" ORDER BY (embedding::vector("+strconv.Itoa(dims)+")) <=> $1 LIMIT 10", vecString(queries[0]))
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var line string
		_ = rows.Scan(&line)
		plan.WriteString(line + "\n")
	}
	if !strings.Contains(plan.String(), idx) {
		b.Fatalf("the search does not use %s:\n%s", idx, plan.String())
	}

	b.Run("top10", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		i := 0
		for b.Loop() {
			t0 := time.Now()
			hits, err := s.Search(ctx, "default", "bench", queries[i%len(queries)], k)
			if err != nil || len(hits) != k {
				b.Fatalf("%v, %d hits", err, len(hits))
			}
			lat = append(lat, time.Since(t0))
			i++
		}
		sort.Slice(lat, func(a, c int) bool { return lat[a] < lat[c] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	})
}
