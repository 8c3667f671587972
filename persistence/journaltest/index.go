package journaltest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/persistence"
)

// runIndex is the conformance suite of persistence.SessionIndex, run by Run for journals
// that implement it. Other tests may share the store, so every check looks only at the
// suite's own streams (prefix).
func runIndex(t *testing.T, use func(*testing.T) persistence.Journal, stream func() string, prefix string) {
	ctx := context.Background()
	index := func(t *testing.T) persistence.SessionIndex {
		t.Helper()
		return use(t).(persistence.SessionIndex)
	}
	past := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond) // PostgreSQL keeps microseconds

	t.Run("IndexRowIsWrittenWithTheAppend", func(t *testing.T) {
		ix, s := index(t), stream()
		last, err := ix.AppendIndexed(ctx, s, 0, recs("a", 3), persistence.IndexEntry{SessionID: s, Status: persistence.StatusRunning, DueAt: past})
		mustNil(t, err)
		if last != 3 {
			t.Fatalf("last = %d, want 3", last)
		}
		e := entryOf(t, ix, s)
		if e.Status != persistence.StatusRunning || e.Seq != 3 || !e.DueAt.Equal(past) || e.UpdatedAt.IsZero() {
			t.Fatalf("index row %+v", e)
		}
		if !dueHas(t, ix, s) {
			t.Fatalf("%s is due and unleased but Due does not return it", s)
		}
		// The row follows the next indexed append.
		_, err = ix.AppendIndexed(ctx, s, 3, recs("b", 1), persistence.IndexEntry{SessionID: s, Status: persistence.StatusCompleted})
		mustNil(t, err)
		if e := entryOf(t, ix, s); e.Status != persistence.StatusCompleted || e.Seq != 4 || !e.DueAt.IsZero() {
			t.Fatalf("index row after completion %+v", e)
		}
		if dueHas(t, ix, s) {
			t.Fatalf("terminal %s is returned by Due", s)
		}
	})

	t.Run("ConflictLeavesTheIndexAlone", func(t *testing.T) {
		ix, s := index(t), stream()
		_, err := ix.AppendIndexed(ctx, s, 0, recs("a", 2), persistence.IndexEntry{SessionID: s, Status: persistence.StatusAwaitingHuman})
		mustNil(t, err)
		for _, expected := range []uint64{0, 1, 5} {
			_, err = ix.AppendIndexed(ctx, s, expected, recs("x", 1), persistence.IndexEntry{SessionID: s, Status: persistence.StatusFailed})
			if !errors.Is(err, persistence.ErrConflict) {
				t.Fatalf("append after %d: %v, want ErrConflict", expected, err)
			}
		}
		if e := entryOf(t, ix, s); e.Status != persistence.StatusAwaitingHuman || e.Seq != 2 {
			t.Fatalf("index row after conflicts %+v", e)
		}
		if got := load(t, ix.(persistence.Journal), s, 0); len(got) != 2 {
			t.Fatalf("%d records after conflicts, want 2", len(got))
		}
	})

	t.Run("InvalidEntryStoresNothing", func(t *testing.T) {
		ix, s := index(t), stream()
		for _, e := range []persistence.IndexEntry{{SessionID: s, Status: "sleeping"}, {SessionID: s + "-other", Status: persistence.StatusRunning}} {
			if _, err := ix.AppendIndexed(ctx, s, 0, recs("a", 1), e); !errors.Is(err, persistence.ErrInvalid) {
				t.Fatalf("entry %+v: %v, want ErrInvalid", e, err)
			}
		}
		if seq, err := ix.(persistence.Journal).LastSeq(ctx, s); err != nil || seq != 0 {
			t.Fatalf("LastSeq = %d, %v after refused appends", seq, err)
		}
	})

	t.Run("LeaseHidesADueSession", func(t *testing.T) {
		ix, s := index(t), stream()
		_, err := ix.AppendIndexed(ctx, s, 0, recs("a", 1), persistence.IndexEntry{SessionID: s, Status: persistence.StatusRunning, DueAt: past})
		mustNil(t, err)
		mustNil(t, ix.RenewLease(ctx, s, "member-a", time.Minute))
		if e := entryOf(t, ix, s); e.LeaseOwner != "member-a" || time.Until(e.LeaseExpires) < 30*time.Second {
			t.Fatalf("leased row %+v", e)
		}
		if dueHas(t, ix, s) {
			t.Fatal("a session with a live lease is returned by Due")
		}
		// An append keeps the lease; another member's release does nothing.
		_, err = ix.AppendIndexed(ctx, s, 1, recs("b", 1), persistence.IndexEntry{SessionID: s, Status: persistence.StatusRunning, DueAt: past})
		mustNil(t, err)
		mustNil(t, ix.ReleaseLease(ctx, s, "member-b"))
		if e := entryOf(t, ix, s); e.LeaseOwner != "member-a" || dueHas(t, ix, s) {
			t.Fatalf("lease lost by an append or another member's release: %+v", e)
		}
		mustNil(t, ix.ReleaseLease(ctx, s, "member-a"))
		if e := entryOf(t, ix, s); e.LeaseOwner != "" || !dueHas(t, ix, s) {
			t.Fatalf("released lease still hides the session: %+v", e)
		}
		// A lease that is not renewed lapses.
		mustNil(t, ix.RenewLease(ctx, s, "member-b", 50*time.Millisecond))
		deadline := time.Now().Add(10 * time.Second)
		for !dueHas(t, ix, s) {
			if time.Now().After(deadline) {
				t.Fatalf("a lease of 50ms still hides the session after 10s: %+v", entryOf(t, ix, s))
			}
			time.Sleep(20 * time.Millisecond) // polling the store for the lease to lapse
		}
		// An append by a live writer takes the lease.
		_, err = ix.AppendIndexed(ctx, s, 2, recs("c", 1), persistence.IndexEntry{SessionID: s, Status: persistence.StatusRunning, DueAt: past, LeaseOwner: "member-c", LeaseTTL: time.Minute})
		mustNil(t, err)
		if e := entryOf(t, ix, s); e.LeaseOwner != "member-c" || time.Until(e.LeaseExpires) < 30*time.Second || dueHas(t, ix, s) {
			t.Fatalf("an append with a lease did not take it: %+v", e)
		}
		// Renewing an unknown session is no error and creates nothing.
		mustNil(t, ix.RenewLease(ctx, s+"-unknown", "member-a", time.Minute))
		for _, e := range list(t, ix, "", s, 0) {
			if e.SessionID == s+"-unknown" {
				t.Fatalf("renewing an unknown session created %+v", e)
			}
		}
	})

	t.Run("FutureAndNoDueTimeAreNotDue", func(t *testing.T) {
		ix := index(t)
		future, never := stream(), stream()
		_, err := ix.AppendIndexed(ctx, future, 0, recs("a", 1), persistence.IndexEntry{SessionID: future, Status: persistence.StatusAwaitingHuman, DueAt: time.Now().Add(time.Hour)})
		mustNil(t, err)
		_, err = ix.AppendIndexed(ctx, never, 0, recs("a", 1), persistence.IndexEntry{SessionID: never, Status: persistence.StatusAwaitingHuman})
		mustNil(t, err)
		if dueHas(t, ix, future) || dueHas(t, ix, never) {
			t.Fatal("a session due in an hour or never is returned by Due")
		}
	})

	t.Run("ListByStatusWithCursor", func(t *testing.T) {
		ix := index(t)
		var running []string
		for i := 0; i < 5; i++ {
			s, status := stream(), persistence.StatusRunning
			if i%2 == 1 {
				status = persistence.StatusFailed
			} else {
				running = append(running, s)
			}
			_, err := ix.AppendIndexed(ctx, s, 0, recs("a", 1), persistence.IndexEntry{SessionID: s, Status: status, DueAt: past})
			mustNil(t, err)
		}
		var got []string
		after := running[0][:len(running[0])-1] // just before the first of these streams
		for page := 0; page < 10; page++ {
			es := list(t, ix, persistence.StatusRunning, after, 2)
			for _, e := range es {
				if e.Status != persistence.StatusRunning {
					t.Fatalf("status filter returned %+v", e)
				}
				if strings.HasPrefix(e.SessionID, prefix) && e.SessionID >= running[0] && e.SessionID <= running[len(running)-1] {
					got = append(got, e.SessionID)
				}
			}
			if len(es) < 2 {
				break
			}
			after = es[len(es)-1].SessionID
		}
		if strings.Join(got, ",") != strings.Join(running, ",") {
			t.Fatalf("paged running sessions %v, want %v", got, running)
		}
	})
}

func entryOf(t *testing.T, ix persistence.SessionIndex, s string) persistence.IndexEntry {
	t.Helper()
	es := list(t, ix, "", s[:len(s)-1], 0)
	for _, e := range es {
		if e.SessionID == s {
			return e
		}
	}
	t.Fatalf("%s is not in the session index", s)
	return persistence.IndexEntry{}
}

func list(t *testing.T, ix persistence.SessionIndex, status, after string, limit int) []persistence.IndexEntry {
	t.Helper()
	es, err := ix.ListSessions(context.Background(), status, after, limit)
	mustNil(t, err)
	return es
}

func dueHas(t *testing.T, ix persistence.SessionIndex, s string) bool {
	t.Helper()
	es, err := ix.Due(context.Background(), 0)
	mustNil(t, err)
	for i, e := range es {
		if i > 0 && e.DueAt.Before(es[i-1].DueAt) {
			t.Fatalf("Due is not ordered by due time: %v before %v", es[i-1].DueAt, e.DueAt)
		}
		if e.SessionID == s {
			return true
		}
	}
	return false
}
