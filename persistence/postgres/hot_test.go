package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/persistence"
)

// TestStepsDoNotRewriteTheSessionIndex checks that a running session's appends update
// its fathom_sessions row in place (a heap-only tuple update): no column of any index
// on the table changes from one step to the next, so PostgreSQL writes no index entry
// per append. A running session is due "now" at every append (core.DueAt); the row keeps
// the time it became due (persistence.DueSince). Were the due time rewritten, every
// append would add an entry to each of the table's eight indexes, which grow by pages.
func TestStepsDoNotRewriteTheSessionIndex(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	j := open(t, dsn)
	defer j.Close()
	ctx := context.Background()
	const sessions, steps = 20, 40
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("hot-%d-%d", time.Now().UnixNano(), i)
		_, err := j.AppendIndexed(ctx, ids[i], 0, []persistence.Record{{Type: "session_started", Data: []byte("start")}},
			persistence.IndexEntry{SessionID: ids[i], Status: persistence.StatusRunning, DueAt: time.Now(), LeaseOwner: "m1", LeaseTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
	}
	size := func() int64 {
		var n int64
		if err := j.Pool().QueryRow(ctx, `SELECT pg_indexes_size('fathom_sessions')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := size()
	for s := 1; s <= steps; s++ {
		for _, id := range ids {
			_, err := j.AppendIndexed(ctx, id, uint64(s), []persistence.Record{{Type: "step", Data: []byte("x")}},
				persistence.IndexEntry{SessionID: id, Status: persistence.StatusRunning, DueAt: time.Now(), LeaseOwner: "m1", LeaseTTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// 800 rewrites of eight indexes' entries add pages (three, measured, with
	// PostgreSQL 15's B-tree deduplication); in-place updates add none, bar the odd one
	// that finds its heap page full.
	if grew := size() - before; grew > 8192 {
		t.Fatalf("the session index's indexes grew by %d bytes over %d appends of running sessions: the appends rewrite indexed columns", grew, sessions*steps)
	}
}
