package pgvector_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/pgvector"
	"github.com/fathom-agents/fathom/persistence/vectortest"
)

// TestSearchTextScoresAsTheWholeQuery: SearchText ranks each row against only the query
// terms it holds; its hits, scores and order are exactly those of ts_rank_cd against
// the OR of all the query's terms, on every query of the evaluation set over every
// message of its session.
func TestSearchTextScoresAsTheWholeQuery(t *testing.T) {
	ctx := context.Background()
	s := open(t, testenv.PostgresDSN(t), 8, 0)
	defer s.Close()
	set, err := vectortest.LoadEval()
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Load(ctx, s, hashembed.New(8).Embed); err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, q := range set.Queries {
		got, err := s.SearchText(ctx, vectortest.Tenant, q.Session, q.Query, 1000)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.Pool().Query(ctx, `SELECT seq, ts_rank_cd(tsv, q, 1) FROM fathom_vectors, CAST($3::text AS tsquery) AS q
			WHERE tenant = $1 AND stream_id = $2 AND tsv @@ q ORDER BY 2 DESC, seq`, vectortest.Tenant, q.Session, pgvector.TextQuery(q.Query))
		if err != nil {
			t.Fatal(err)
		}
		var want []persistence.VectorHit
		for rows.Next() {
			var h persistence.VectorHit
			var seq int64
			if err := rows.Scan(&seq, &h.Score); err != nil {
				t.Fatal(err)
			}
			h.Seq = uint64(seq)
			want = append(want, h)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d hits, ts_rank_cd over the whole query has %d", q.Query, len(got), len(want))
		}
		for i := range want {
			if got[i].Seq != want[i].Seq || got[i].Score != want[i].Score {
				t.Fatalf("%q: hit %d is %d (%v), ts_rank_cd over the whole query ranks %d (%v) there", q.Query, i, got[i].Seq, got[i].Score, want[i].Seq, want[i].Score)
			}
		}
		compared += len(want)
	}
	if compared < 1000 {
		t.Fatalf("only %d hits compared", compared)
	}
}

// TestSearchTextLongQueryOnACommonTerm: a query of many terms, one of which every
// message of the stream holds, costs little more than that one term alone (ts_rank_cd
// against the whole query zeroes ~32 kB per query item for every matching row: here
// 2,000 rows × 79 items, some 5 GB, about a hundred times the one-term query).
func TestSearchTextLongQueryOnACommonTerm(t *testing.T) {
	const rows, terms = 2000, 40
	ctx := context.Background()
	s := open(t, testenv.PostgresDSN(t), 2, 0)
	defer s.Close()
	vecs := make([]persistence.Vector, rows)
	for i := range vecs {
		vecs[i] = persistence.Vector{Seq: uint64(i + 1), Values: []float32{1, float32(i)}, Text: fmt.Sprintf("ticket %d opened by user%d about invoice%d", i, i%37, i%11)}
	}
	if err := s.Import(ctx, "acme", "big", vecs); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, "ANALYZE fathom_vectors"); err != nil {
		t.Fatal(err)
	}
	words := []string{"ticket"}
	for i := 1; i < terms; i++ {
		words = append(words, fmt.Sprintf("absent%d", i))
	}
	long := strings.Join(words, " ")
	fastest := func(query string) time.Duration {
		best := time.Duration(1<<63 - 1)
		for range 3 {
			t0 := time.Now()
			hits, err := s.SearchText(ctx, "acme", "big", query, 20)
			if err != nil || len(hits) != 20 {
				t.Fatalf("%q: %d hits, %v", query, len(hits), err)
			}
			best = min(best, time.Since(t0))
		}
		return best
	}
	one, all := fastest("ticket"), fastest(long)
	t.Logf("one term %v, %d terms %v", one, terms, all)
	if all > 10*one {
		t.Fatalf("a query of %d terms took %v, %.0f× the %v of its one matching term alone; want at most 10×", terms, all, float64(all)/float64(one), one)
	}
}

// TestTextSearchReadsNoPendingList: after a bulk import (COPY) of 5,000 messages, a
// text search's index scan reads a few pages of the GIN index (5), not also a pending
// list of the new entries (0017: fastupdate off; with it on, the scan read 26 pages
// here, and 200 after the 100,000 messages of BenchmarkRetrievalLatency100k).
func TestTextSearchReadsNoPendingList(t *testing.T) {
	ctx := context.Background()
	s := open(t, testenv.PostgresDSN(t), 2, 0)
	defer s.Close()
	// No autovacuum merges the entries while the test looks (a busy table's are
	// merged only so often).
	if _, err := s.Pool().Exec(ctx, "ALTER TABLE fathom_vectors SET (autovacuum_enabled = off)"); err != nil {
		t.Fatal(err)
	}
	for st := range 10 {
		vecs := make([]persistence.Vector, 500)
		for i := range vecs {
			vecs[i] = persistence.Vector{Seq: uint64(i + 1), Values: []float32{1, float32(i)}, Text: fmt.Sprintf("ticket %d of stream %d opened by user%d about invoice%d", i, st, i%37, i%11)}
		}
		if err := s.Import(ctx, "acme", fmt.Sprintf("s-%d", st), vecs); err != nil {
			t.Fatal(err)
		}
	}
	hits, err := s.SearchText(ctx, "acme", "s-3", "invoice7", 100)
	if err != nil || len(hits) != 45 {
		t.Fatalf("%d hits (%v), want the 45 messages about invoice7", len(hits), err)
	}
	got := textIndexPages(t, s, "s-3", "invoice7")
	t.Logf("the index scan read %d pages", got)
	if got > 10 {
		t.Fatalf("a text search's index scan read %d pages of the GIN index; want a few (no pending list)", got)
	}
}

// textIndexPages is how many pages of the text index a search of stream for term reads
// (the GIN bitmap index scan's buffers).
func textIndexPages(t *testing.T, s *pgvector.Store, stream, term string) int {
	t.Helper()
	ctx := context.Background()
	var pages int
	err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off"); err != nil {
			return err
		}
		var plan []map[string]any
		if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT count(*) FROM fathom_vectors WHERE stream_id = $1 AND tsv @@ $2::tsquery",
			stream, "'"+term+"'").Scan(&plan); err != nil {
			return err
		}
		var walk func(n map[string]any) bool
		walk = func(n map[string]any) bool {
			if n["Node Type"] == "Bitmap Index Scan" {
				hit, _ := n["Shared Hit Blocks"].(float64)
				read, _ := n["Shared Read Blocks"].(float64)
				pages = int(hit + read)
				return true
			}
			kids, _ := n["Plans"].([]any)
			for _, k := range kids {
				if m, ok := k.(map[string]any); ok && walk(m) {
					return true
				}
			}
			return false
		}
		if !walk(plan[0]["Plan"].(map[string]any)) {
			return fmt.Errorf("no bitmap index scan in %v", plan)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}
