package node

import (
	"context"
	"testing"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/persistence/pgvector"
)

// TestPgvectorEfSearchReachesTheStore: MemoryConfig.PgvectorEfSearch (--pgvector-ef-search)
// is the ef_search of the store the node opens, on its pooled connections; zero means
// pgvector.DefaultEfSearch.
func TestPgvectorEfSearchReachesTheStore(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	ctx := context.Background()
	for _, c := range []struct{ set, want int }{{0, pgvector.DefaultEfSearch}, {250, 250}} {
		ms, err := startMemory(ctx, MemoryConfig{VectorStore: VectorStorePgvector, PgvectorEfSearch: c.set}, dsn, "")
		if err != nil {
			t.Fatal(err)
		}
		s := ms.vectors.(*pgvector.Store)
		var got int
		if err := s.Pool().QueryRow(ctx, "SELECT current_setting('hnsw.ef_search')::int").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if s.EfSearch() != c.want || got != c.want {
			t.Errorf("PgvectorEfSearch %d: store ef_search %d, connection's %d; want %d", c.set, s.EfSearch(), got, c.want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
