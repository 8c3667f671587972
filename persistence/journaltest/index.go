package journaltest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
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

	t.Run("DueSessionKeepsItsDueTime", func(t *testing.T) {
		// A session that stays due keeps the time it became due (persistence.DueSince):
		// its steps do not rewrite the row's due time. A later due time in the future, an
		// earlier one, or none replaces it.
		ix, s := index(t), stream()
		_, err := ix.AppendIndexed(ctx, s, 0, recs("a", 1), persistence.IndexEntry{SessionID: s, Status: persistence.StatusRunning, DueAt: past})
		mustNil(t, err)
		later := past.Add(30 * time.Second)
		_, err = ix.AppendIndexed(ctx, s, 1, recs("b", 1), persistence.IndexEntry{SessionID: s, Status: persistence.StatusRunning, DueAt: later})
		mustNil(t, err)
		if e := entryOf(t, ix, s); !e.DueAt.Equal(past) || e.Seq != 2 {
			t.Fatalf("a session still due: row %+v, want due at %v (when it became due) and seq 2", e, past)
		}
		future := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
		_, err = ix.AppendIndexed(ctx, s, 2, recs("c", 1), persistence.IndexEntry{SessionID: s, Status: persistence.StatusRunning, DueAt: future})
		mustNil(t, err)
		if e := entryOf(t, ix, s); !e.DueAt.Equal(future) {
			t.Fatalf("a session due later: due at %v, want %v", e.DueAt, future)
		}
		if dueHas(t, ix, s) {
			t.Fatalf("%s is due in an hour but Due returns it", s)
		}
		_, err = ix.AppendIndexed(ctx, s, 3, recs("d", 1), persistence.IndexEntry{SessionID: s, Status: persistence.StatusRunning, DueAt: later})
		mustNil(t, err)
		if e := entryOf(t, ix, s); !e.DueAt.Equal(later) {
			t.Fatalf("a session due again: due at %v, want %v", e.DueAt, later)
		}
		_, err = ix.AppendIndexed(ctx, s, 4, recs("e", 1), persistence.IndexEntry{SessionID: s, Status: persistence.StatusRunning, DueAt: past})
		mustNil(t, err)
		if e := entryOf(t, ix, s); !e.DueAt.Equal(past) {
			t.Fatalf("an earlier due time: due at %v, want %v", e.DueAt, past)
		}
		_, err = ix.AppendIndexed(ctx, s, 5, recs("f", 1), persistence.IndexEntry{SessionID: s, Status: persistence.StatusAwaitingHuman})
		mustNil(t, err)
		if e := entryOf(t, ix, s); !e.DueAt.IsZero() {
			t.Fatalf("a session due never: due at %v, want none", e.DueAt)
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
		if h := holder(t, ix, s); h != "" {
			t.Fatalf("LeaseHolder of a session never leased = %q, want none", h)
		}
		mustNil(t, ix.RenewLease(ctx, s, "member-a", time.Minute))
		if e := entryOf(t, ix, s); e.LeaseOwner != "member-a" || time.Until(e.LeaseExpires) < 30*time.Second {
			t.Fatalf("leased row %+v", e)
		}
		if h := holder(t, ix, s); h != "member-a" {
			t.Fatalf("LeaseHolder = %q, want member-a", h)
		}
		if h := holder(t, ix, s+"-unknown"); h != "" {
			t.Fatalf("LeaseHolder of an unknown session = %q, want none", h)
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
		if h := holder(t, ix, s); h != "" {
			t.Fatalf("LeaseHolder of a released lease = %q, want none", h)
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
		if h := holder(t, ix, s); h != "" {
			t.Fatalf("LeaseHolder of a lapsed lease = %q, want none", h)
		}
		// An append by a live writer takes the lease.
		_, err = ix.AppendIndexed(ctx, s, 2, recs("c", 1), persistence.IndexEntry{SessionID: s, Status: persistence.StatusRunning, DueAt: past, LeaseOwner: "member-c", LeaseTTL: time.Minute})
		mustNil(t, err)
		if e := entryOf(t, ix, s); e.LeaseOwner != "member-c" || time.Until(e.LeaseExpires) < 30*time.Second || dueHas(t, ix, s) {
			t.Fatalf("an append with a lease did not take it: %+v", e)
		}
		// Renewing an unknown session is no error and creates nothing.
		mustNil(t, ix.RenewLease(ctx, s+"-unknown", "member-a", time.Minute))
		for _, e := range listQ(t, ix, persistence.ListQuery{IDPrefix: s + "-unknown"}) {
			if e.SessionID == s+"-unknown" {
				t.Fatalf("renewing an unknown session created %+v", e)
			}
		}
	})

	t.Run("BreakLeasesOfADeadMember", func(t *testing.T) {
		ix, s1, s2, s3 := index(t), stream(), stream(), stream()
		for _, s := range []string{s1, s2, s3} {
			_, err := ix.AppendIndexed(ctx, s, 0, recs("a", 1), persistence.IndexEntry{SessionID: s, Status: persistence.StatusRunning, DueAt: past})
			mustNil(t, err)
		}
		dead := "dead-" + s1 // unique to this run: the store may be shared
		mustNil(t, ix.RenewLease(ctx, s1, dead, time.Hour))
		mustNil(t, ix.RenewLease(ctx, s2, dead, time.Hour))
		mustNil(t, ix.RenewLease(ctx, s3, "alive-"+s1, time.Hour))
		if dueHas(t, ix, s1) || dueHas(t, ix, s2) || dueHas(t, ix, s3) {
			t.Fatal("leased sessions are due")
		}
		n, err := ix.BreakLeases(ctx, dead)
		mustNil(t, err)
		if n != 2 || !dueHas(t, ix, s1) || !dueHas(t, ix, s2) || dueHas(t, ix, s3) {
			t.Fatalf("broke %d leases; due: %v %v, the live member's: %v", n, dueHas(t, ix, s1), dueHas(t, ix, s2), dueHas(t, ix, s3))
		}
		if e := entryOf(t, ix, s3); e.LeaseOwner != "alive-"+s1 {
			t.Fatalf("another member's lease changed: %+v", e)
		}
		if n, err := ix.BreakLeases(ctx, dead); err != nil || n != 0 {
			t.Fatalf("breaking again: %d, %v", n, err)
		}
		// The member was alive after all: its next renewal holds the session again.
		mustNil(t, ix.RenewLease(ctx, s1, dead, time.Hour))
		if dueHas(t, ix, s1) {
			t.Fatal("a renewed lease does not hide the session")
		}
	})

	t.Run("LeaseCountsPerOwner", func(t *testing.T) {
		ix := index(t)
		lc, ok := ix.(persistence.LeaseCounter)
		if !ok {
			t.Fatal("the session index implements no persistence.LeaseCounter")
		}
		s1, s2, s3, s4 := stream(), stream(), stream(), stream()
		statuses := []string{persistence.StatusRunning, persistence.StatusAwaitingHuman, persistence.StatusCompleted, persistence.StatusRunning}
		for i, s := range []string{s1, s2, s3, s4} {
			_, err := ix.AppendIndexed(ctx, s, 0, recs("a", 1), persistence.IndexEntry{SessionID: s, Status: statuses[i]})
			mustNil(t, err)
		}
		a, b := "a-"+s1, "b-"+s1 // unique to this run: the store may be shared
		mustNil(t, ix.RenewLease(ctx, s1, a, time.Hour))
		mustNil(t, ix.RenewLease(ctx, s2, a, time.Hour))
		mustNil(t, ix.RenewLease(ctx, s3, a, time.Hour)) // completed: a lease, not a hosted session
		mustNil(t, ix.RenewLease(ctx, s4, b, time.Hour))
		counts, err := lc.LeaseCounts(ctx)
		mustNil(t, err)
		if got := counts[a]; got != (persistence.LeaseCount{Leases: 3, Running: 2}) {
			t.Fatalf("owner a holds %+v, want 3 leases, 2 running", got)
		}
		if got := counts[b]; got != (persistence.LeaseCount{Leases: 1, Running: 1}) {
			t.Fatalf("owner b holds %+v, want 1 lease, 1 running", got)
		}
		// Released, broken and expired leases are not counted.
		mustNil(t, ix.ReleaseLease(ctx, s1, a))
		_, err = ix.BreakLeases(ctx, b)
		mustNil(t, err)
		mustNil(t, ix.RenewLease(ctx, s2, a, time.Nanosecond))
		deadline := time.Now().Add(5 * time.Second)
		for {
			counts, err = lc.LeaseCounts(ctx)
			mustNil(t, err)
			if counts[a] == (persistence.LeaseCount{Leases: 1}) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after release, expiry: owner a holds %+v, want 1 lease (the completed session's)", counts[a])
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, ok := counts[b]; ok {
			t.Fatalf("owner b with its leases broken is listed: %+v", counts[b])
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
		group := stream() + "-"
		var running []string
		for i := 0; i < 5; i++ {
			s, status := fmt.Sprintf("%s%d", group, i), persistence.StatusRunning
			if i%2 == 1 {
				status = persistence.StatusFailed
			} else {
				running = append([]string{s}, running...) // newest first
			}
			_, err := ix.AppendIndexed(ctx, s, 0, recs("a", 1), persistence.IndexEntry{SessionID: s, Status: status, DueAt: past})
			mustNil(t, err)
		}
		var got []string
		q := persistence.ListQuery{Status: persistence.StatusRunning, IDPrefix: group, Limit: 2}
		for page := 0; page < 10; page++ {
			es := listQ(t, ix, q)
			for _, e := range es {
				if e.Status != persistence.StatusRunning {
					t.Fatalf("status filter returned %+v", e)
				}
				got = append(got, e.SessionID)
			}
			if len(es) < 2 {
				break
			}
			last := es[len(es)-1]
			q.After = &persistence.ListPosition{CreatedAt: last.CreatedAt, SessionID: last.SessionID}
		}
		if strings.Join(got, ",") != strings.Join(running, ",") {
			t.Fatalf("paged running sessions %v, want %v (newest first)", got, running)
		}
	})

	t.Run("FactsAndFilters", func(t *testing.T) {
		ix := index(t)
		group := stream() + "-"
		type start struct{ id, user, goal string }
		starts := []start{{group + "a", "ann", "Write a Haiku about the sea"}, {group + "b", "bob", "plan a trip"}, {group + "c", "ann", "summarise the SEA report"}}
		created := map[string]persistence.IndexEntry{}
		for _, st := range starts {
			last, err := ix.AppendIndexed(ctx, st.id, 0, []persistence.Record{StartRecord(st.user, st.goal), CostRecord(0.25)},
				persistence.IndexEntry{SessionID: st.id, Status: persistence.StatusRunning})
			mustNil(t, err)
			// A later batch adds cost and keeps user and goal.
			_, err = ix.AppendIndexed(ctx, st.id, last, []persistence.Record{CostRecord(0.5), CostRecord(0.125)},
				persistence.IndexEntry{SessionID: st.id, Status: persistence.StatusCompleted})
			mustNil(t, err)
			e := entryOf(t, ix, st.id)
			if e.UserID != st.user || e.Goal != st.goal || e.CostUSD != 0.875 || e.CreatedAt.IsZero() || e.CreatedAt.After(e.UpdatedAt) {
				t.Fatalf("facts of %s: %+v, want user %q goal %q cost 0.875", st.id, e, st.user, st.goal)
			}
			created[st.id] = e
		}
		ids := func(q persistence.ListQuery) string {
			q.IDPrefix = group
			var out []string
			for _, e := range listQ(t, ix, q) {
				out = append(out, strings.TrimPrefix(e.SessionID, group))
			}
			return strings.Join(out, ",")
		}
		for _, c := range []struct {
			q    persistence.ListQuery
			want string
		}{
			{persistence.ListQuery{}, "c,b,a"},
			{persistence.ListQuery{UserID: "ann"}, "c,a"},
			{persistence.ListQuery{GoalContains: "sea"}, "c,a"},
			{persistence.ListQuery{GoalContains: "SEA", UserID: "bob"}, ""},
			{persistence.ListQuery{Since: created[group+"b"].CreatedAt}, "c,b"},
			{persistence.ListQuery{Until: created[group+"b"].CreatedAt}, "a"},
			{persistence.ListQuery{Since: created[group+"b"].CreatedAt, Until: created[group+"c"].CreatedAt}, "b"},
			{persistence.ListQuery{Status: persistence.StatusRunning}, ""},
			{persistence.ListQuery{Limit: 1}, "c"},
		} {
			if got := ids(c.q); got != c.want {
				t.Errorf("list %+v = %q, want %q", c.q, got, c.want)
			}
		}
	})

	t.Run("ForkedFrom", func(t *testing.T) {
		ix := index(t)
		src := stream()
		_, err := ix.AppendIndexed(ctx, src, 0, []persistence.Record{StartRecord("ann", "the source")}, persistence.IndexEntry{SessionID: src, Status: persistence.StatusCompleted})
		mustNil(t, err)
		var forks []string
		for range 2 {
			f := stream()
			last, err := ix.AppendIndexed(ctx, f, 0, []persistence.Record{StartRecord("ann", "the source"), ForkRecord(src)},
				persistence.IndexEntry{SessionID: f, Status: persistence.StatusRunning})
			mustNil(t, err)
			// A later batch keeps the fork's source.
			_, err = ix.AppendIndexed(ctx, f, last, []persistence.Record{CostRecord(0.5)}, persistence.IndexEntry{SessionID: f, Status: persistence.StatusCompleted})
			mustNil(t, err)
			forks = append(forks, f)
		}
		if e := entryOf(t, ix, src); e.ForkedFrom != "" {
			t.Fatalf("the source's row: %+v, want no fork source", e)
		}
		var got []string
		for _, e := range listQ(t, ix, persistence.ListQuery{ForkedFrom: src}) {
			if e.ForkedFrom != src || e.Goal != "the source" || e.Status != persistence.StatusCompleted {
				t.Fatalf("fork row %+v", e)
			}
			got = append(got, e.SessionID)
		}
		slices.Sort(got)
		slices.Sort(forks)
		if strings.Join(got, ",") != strings.Join(forks, ",") {
			t.Fatalf("forks of %s: %v, want %v", src, got, forks)
		}
		if es := listQ(t, ix, persistence.ListQuery{ForkedFrom: forks[0]}); len(es) != 0 {
			t.Fatalf("forks of a fork with none: %v", es)
		}
	})

	t.Run("DeleteOnlyTerminalSessions", func(t *testing.T) {
		ix := index(t)
		del := ix.(persistence.SessionDeleter)
		j := ix.(persistence.Journal)
		running, done, bare := stream(), stream(), stream()
		_, err := ix.AppendIndexed(ctx, running, 0, recs("a", 2), persistence.IndexEntry{SessionID: running, Status: persistence.StatusRunning, DueAt: past})
		mustNil(t, err)
		_, err = ix.AppendIndexed(ctx, done, 0, recs("a", 3), persistence.IndexEntry{SessionID: done, Status: persistence.StatusCompleted})
		mustNil(t, err)
		mustNil(t, j.SaveSnapshot(ctx, done, persistence.Snapshot{Seq: 3, Data: []byte("state")}))
		_, err = j.Append(ctx, bare, 0, recs("a", 1)) // a stream with no index row
		mustNil(t, err)

		if st, tenant, ok, err := del.SessionStatus(ctx, running); err != nil || !ok || st != persistence.StatusRunning || tenant == "" {
			t.Fatalf("SessionStatus(running) = %q %q %v %v", st, tenant, ok, err)
		}
		if st, _, ok, err := del.SessionStatus(ctx, bare); err != nil || ok || st != "" {
			t.Fatalf("SessionStatus of a stream without a row = %q %v %v", st, ok, err)
		}
		if err := del.DeleteSession(ctx, running, "alice@acme"); !errors.Is(err, persistence.ErrNotTerminal) {
			t.Fatalf("delete a running session: %v, want ErrNotTerminal", err)
		}
		if err := del.DeleteSession(ctx, bare, "alice@acme"); !errors.Is(err, persistence.ErrNotTerminal) {
			t.Fatalf("delete a stream without an index row: %v, want ErrNotTerminal", err)
		}
		if err := del.DeleteSession(ctx, done+"-never", "alice@acme"); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("delete an unknown session: %v, want ErrNotFound", err)
		}
		if got := load(t, j, running, 0); len(got) != 2 || entryOf(t, ix, running).Status != persistence.StatusRunning {
			t.Fatalf("a refused delete removed something: %d records", len(got))
		}
		if _, ok, err := del.Tombstone(ctx, done); err != nil || ok {
			t.Fatalf("tombstone before the delete: %v %v", ok, err)
		}
		mustNil(t, del.DeleteSession(ctx, done, "alice@acme"))
		if tomb, ok, err := del.Tombstone(ctx, done); err != nil || !ok || tomb.DeletedBy != "alice@acme" ||
			tomb.Tenant != persistence.DefaultTenant || tomb.SessionID != done || tomb.DeletedAt.IsZero() {
			t.Fatalf("tombstone after the delete = %+v %v %v, want deleted by alice@acme, tenant %s", tomb, ok, err, persistence.DefaultTenant)
		}
		if _, ok, err := del.Tombstone(ctx, running); err != nil || ok {
			t.Fatalf("a refused delete left a tombstone: %v %v", ok, err)
		}
		if got := load(t, j, done, 0); len(got) != 0 {
			t.Fatalf("%d records left after delete", len(got))
		}
		if seq, err := j.LastSeq(ctx, done); err != nil || seq != 0 {
			t.Fatalf("LastSeq after delete = %d, %v", seq, err)
		}
		if _, ok, err := j.LoadSnapshot(ctx, done, 3); err != nil || ok {
			t.Fatalf("snapshot after delete: ok %v, %v", ok, err)
		}
		if es := listQ(t, ix, persistence.ListQuery{IDPrefix: done}); len(es) != 0 {
			t.Fatalf("index rows after delete: %+v", es)
		}
		if ss, err := j.ListStreams(ctx, done); err != nil || len(ss) != 0 {
			t.Fatalf("streams after delete: %v, %v", ss, err)
		}
		if err := del.DeleteSession(ctx, done, "alice@acme"); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("second delete: %v, want ErrNotFound", err)
		}
		// The id can be used again from seq 0.
		_, err = ix.AppendIndexed(ctx, done, 0, recs("b", 1), persistence.IndexEntry{SessionID: done, Status: persistence.StatusRunning})
		mustNil(t, err)
	})
}

// StartRecord is the record Facts reads as a session_started of user with goal.
func StartRecord(user, goal string) persistence.Record {
	return persistence.Record{Type: "test_started", Data: []byte(user + "\n" + goal)}
}

// ForkRecord is the record Facts reads as a fork's session_forked of source (in the
// fork's first batch, after its StartRecord).
func ForkRecord(source string) persistence.Record {
	return persistence.Record{Type: "test_forked", Data: []byte(source)}
}

// CostRecord is the record Facts reads as a model call costing usd.
func CostRecord(usd float64) persistence.Record {
	return persistence.Record{Type: "test_cost", Data: []byte(strconv.FormatFloat(usd, 'g', -1, 64))}
}

// TenantStartRecord is the record Facts reads as a session_started of tenant, started
// by owner (its user too) with goal.
func TenantStartRecord(tenant, owner, goal string) persistence.Record {
	return persistence.Record{Type: "test_started_tenant", Data: []byte(tenant + "\n" + owner + "\n" + goal)}
}

// UsageRecord is the record Facts reads as tokens of model usage and artifactBytes of
// artifacts written.
func UsageRecord(tokens, artifactBytes uint64) persistence.Record {
	return persistence.Record{Type: "test_usage", Data: []byte(strconv.FormatUint(tokens, 10) + " " + strconv.FormatUint(artifactBytes, 10))}
}

// Facts is the persistence.FactsFunc the suite's journals must be opened with: it reads
// StartRecord, TenantStartRecord, ForkRecord, CostRecord and UsageRecord (the node's journals read real events with
// persistence/indexfacts.Of).
func Facts(recs []persistence.Record) persistence.SessionFacts {
	var f persistence.SessionFacts
	for _, r := range recs {
		switch r.Type {
		case "test_started":
			f.Started = true
			f.UserID, f.Goal, _ = strings.Cut(string(r.Data), "\n")
		case "test_cost":
			usd, _ := strconv.ParseFloat(string(r.Data), 64)
			f.CostUSD += usd
		case "test_forked":
			f.ForkedFrom = string(r.Data)
		case "test_started_tenant":
			f.Started = true
			parts := strings.SplitN(string(r.Data), "\n", 3)
			f.Tenant, f.Owner, f.UserID, f.Goal = parts[0], parts[1], parts[1], parts[2]
		case "test_usage":
			tok, art, _ := strings.Cut(string(r.Data), " ")
			n, _ := strconv.ParseUint(tok, 10, 64)
			a, _ := strconv.ParseUint(art, 10, 64)
			f.Tokens += n
			f.ArtifactBytes += a
		}
	}
	return f
}

func entryOf(t *testing.T, ix persistence.SessionIndex, s string) persistence.IndexEntry {
	t.Helper()
	es := listQ(t, ix, persistence.ListQuery{IDPrefix: s})
	for _, e := range es {
		if e.SessionID == s {
			return e
		}
	}
	t.Fatalf("%s is not in the session index", s)
	return persistence.IndexEntry{}
}

func listQ(t *testing.T, ix persistence.SessionIndex, q persistence.ListQuery) []persistence.IndexEntry {
	t.Helper()
	es, err := ix.ListSessions(context.Background(), q)
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

// holder is ix.LeaseHolder(s), failing t on an error.
func holder(t *testing.T, ix persistence.SessionIndex, s string) string {
	t.Helper()
	h, err := ix.LeaseHolder(context.Background(), s)
	if err != nil {
		t.Fatalf("LeaseHolder(%s): %v", s, err)
	}
	return h
}
