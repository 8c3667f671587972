package testenv_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// httpGet fetches url with a bounded client and returns the status code and body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatalf("build request for %s: %v", url, err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("read body of %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

func TestPostgresVectorHNSW(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to %s: %v", dsn, err)
	}
	defer conn.Close(context.Background())

	for _, stmt := range []string{
		"CREATE EXTENSION IF NOT EXISTS vector",
		"CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(3) NOT NULL)",
		"INSERT INTO items VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[0,0,1]'), (4, '[0.9,0.1,0]')",
		"CREATE INDEX items_embedding_hnsw ON items USING hnsw (embedding vector_cosine_ops)",
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // read-only transaction
	if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
		t.Fatalf("disable seqscan: %v", err)
	}
	rows, err := tx.Query(ctx, "SELECT id FROM items ORDER BY embedding <=> '[0,0.2,1]' LIMIT 2")
	if err != nil {
		t.Fatalf("nearest-neighbour query: %v", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatalf("collect ids: %v", err)
	}
	if len(ids) != 2 || ids[0] != 3 || ids[1] != 2 {
		t.Fatalf("nearest neighbours by cosine distance = %v, want [3 2]", ids)
	}
}

func TestPostgresDSNIsolated(t *testing.T) {
	a, b := testenv.PostgresDSN(t), testenv.PostgresDSN(t)
	if a == b {
		t.Fatalf("two calls to PostgresDSN returned the same database %s", a)
	}
}

func TestConsulHasLeader(t *testing.T) {
	addr := testenv.ConsulAddr(t)
	// The agent elects itself within a second of starting; poll in case the test runs right after.
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body := httpGet(t, "http://"+addr+"/v1/status/leader")
		if status == http.StatusOK && strings.Trim(strings.TrimSpace(body), `"`) != "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("consul at %s has no leader: last answer %d %q", addr, status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestMinIOReady(t *testing.T) {
	m := testenv.MinIOServer(t)
	if m.AccessKey == "" || m.SecretKey == "" {
		t.Fatalf("MinIO credentials are empty: %+v", m)
	}
	status, body := httpGet(t, "http://"+m.Endpoint+"/minio/health/ready")
	if status != http.StatusOK {
		t.Fatalf("GET /minio/health/ready on %s = %d %q, want 200", m.Endpoint, status, body)
	}
}

func TestEventually(t *testing.T) {
	n := 0
	testenv.Eventually(t, 5*time.Second, func() bool { n++; return n >= 3 }, "condition never held")
	if n < 3 {
		t.Fatalf("condition evaluated %d times, want at least 3", n)
	}
}

// TestFaultsGate: a fault test is skipped unless FATHOM_TEST_FAULTS=1, even under
// FATHOM_TEST_REQUIRE_SERVICES=1 (the skip is the run's choice, not a missing service),
// and runs with it.
func TestFaultsGate(t *testing.T) {
	for _, c := range []struct {
		value   string
		skipped bool
	}{{"", true}, {"0", true}, {"1", false}} {
		t.Run("FATHOM_TEST_FAULTS="+c.value, func(t *testing.T) {
			t.Setenv(testenv.EnvFaults, c.value)
			t.Setenv(testenv.EnvRequire, "1")
			ran := false
			t.Run("fault", func(t *testing.T) {
				testenv.Faults(t)
				ran = true
			})
			if ran == c.skipped {
				t.Fatalf("with %s=%q the fault test ran = %v, want %v", testenv.EnvFaults, c.value, ran, !c.skipped)
			}
		})
	}
}
