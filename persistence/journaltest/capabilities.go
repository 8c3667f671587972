package journaltest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/persistence"
)

// runCapabilities is the conformance suite of the parts of persistence.SessionStore
// beyond the session index: StatusCounter, TenantIndex and AppendObservable. The store
// may be shared with other tests, so counts are compared before and after.
func runCapabilities(t *testing.T, use func(*testing.T) persistence.Journal, stream func() string) {
	ctx := context.Background()
	store := func(t *testing.T) persistence.SessionStore {
		t.Helper()
		return use(t).(persistence.SessionStore)
	}

	t.Run("CountByStatus", func(t *testing.T) {
		j := store(t)
		before, err := j.CountByStatus(ctx)
		mustNil(t, err)
		s1, s2, s3 := stream(), stream(), stream()
		for s, status := range map[string]string{s1: persistence.StatusRunning, s2: persistence.StatusRunning, s3: persistence.StatusFailed} {
			_, err := j.AppendIndexed(ctx, s, 0, recs("a", 1), persistence.IndexEntry{SessionID: s, Status: status})
			mustNil(t, err)
		}
		_, err = j.AppendIndexed(ctx, s1, 1, recs("b", 1), persistence.IndexEntry{SessionID: s1, Status: persistence.StatusCompleted})
		mustNil(t, err)
		after, err := j.CountByStatus(ctx)
		mustNil(t, err)
		for status, want := range map[string]int64{persistence.StatusRunning: 1, persistence.StatusFailed: 1, persistence.StatusCompleted: 1, persistence.StatusCancelled: 0} {
			if got := after[status] - before[status]; got != want {
				t.Errorf("%s sessions grew by %d, want %d (before %v, after %v)", status, got, want, before, after)
			}
		}
	})

	t.Run("TenantSessionsAndUsage", func(t *testing.T) {
		j := store(t)
		tenant, other := "tenant-"+stream(), "other-"+stream()
		s1, s2, s3 := stream(), stream(), stream()
		last, err := j.AppendIndexed(ctx, s1, 0, []persistence.Record{TenantStartRecord(tenant, "ann", "one"), CostRecord(0.5), UsageRecord(100, 7)},
			persistence.IndexEntry{SessionID: s1, Status: persistence.StatusRunning})
		mustNil(t, err)
		// A later batch adds to the day's usage and keeps the session's tenant.
		_, err = j.AppendIndexed(ctx, s1, last, []persistence.Record{CostRecord(0.25), UsageRecord(50, 0)}, persistence.IndexEntry{SessionID: s1, Status: persistence.StatusAwaitingHuman})
		mustNil(t, err)
		_, err = j.AppendIndexed(ctx, s2, 0, []persistence.Record{TenantStartRecord(tenant, "bob", "two")}, persistence.IndexEntry{SessionID: s2, Status: persistence.StatusCompleted})
		mustNil(t, err)
		_, err = j.AppendIndexed(ctx, s3, 0, []persistence.Record{TenantStartRecord(other, "cy", "three"), UsageRecord(1000, 1000)}, persistence.IndexEntry{SessionID: s3, Status: persistence.StatusRunning})
		mustNil(t, err)
		if e := entryOf(t, j, s1); e.Tenant != tenant || e.Owner != "ann" || e.CostUSD != 0.75 {
			t.Fatalf("row of %s: %+v, want tenant %s, owner ann, cost 0.75", s1, e, tenant)
		}
		for _, c := range []struct {
			statuses []string
			want     int
		}{{persistence.RunningStatuses, 1}, {[]string{persistence.StatusCompleted}, 1}, {[]string{persistence.StatusFailed}, 0}} {
			if n, err := j.CountSessions(ctx, tenant, c.statuses); err != nil || n != c.want {
				t.Errorf("CountSessions(%v) = %d, %v; want %d", c.statuses, n, err, c.want)
			}
		}
		day := entryOf(t, j, s1).UpdatedAt
		u, err := j.TenantUsage(ctx, tenant, day)
		mustNil(t, err)
		if u != (persistence.TenantUsage{Tokens: 150, CostUSD: 0.75, ArtifactBytes: 7}) {
			t.Fatalf("usage of %s on %s = %+v, want 150 tokens, $0.75, 7 artifact bytes", tenant, persistence.UsageDay(day).Format(time.DateOnly), u)
		}
		if u, err := j.TenantUsage(ctx, tenant, day.AddDate(0, 0, -2)); err != nil || u != (persistence.TenantUsage{}) {
			t.Fatalf("usage two days before = %+v, %v; want none", u, err)
		}
	})

	t.Run("AppendObserver", func(t *testing.T) {
		j := store(t)
		type obs struct {
			records int
			err     error
		}
		var (
			mu   sync.Mutex
			seen []obs
		)
		j.ObserveAppends(func(d time.Duration, n int, err error) {
			if d < 0 {
				t.Errorf("negative append duration %s", d)
			}
			mu.Lock()
			seen = append(seen, obs{n, err})
			mu.Unlock()
		})
		s := stream()
		_, err := j.Append(ctx, s, 0, recs("a", 2))
		mustNil(t, err)
		_, err = j.AppendIndexed(ctx, s, 2, recs("b", 3), persistence.IndexEntry{SessionID: s, Status: persistence.StatusRunning})
		mustNil(t, err)
		_, err = j.Append(ctx, s, 1, recs("c", 1))
		if !errors.Is(err, persistence.ErrConflict) {
			t.Fatalf("append after a stale seq: %v, want ErrConflict", err)
		}
		j.ObserveAppends(nil)
		_, err = j.Append(ctx, s, 5, recs("d", 1))
		mustNil(t, err)
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 3 || seen[0] != (obs{2, nil}) || seen[1] != (obs{3, nil}) || seen[2].records != 1 || !errors.Is(seen[2].err, persistence.ErrConflict) {
			t.Fatalf("observed %+v, want appends of 2 and 3 records, then a conflict of 1 (none after the observer was removed)", seen)
		}
	})
}
