package quota_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/config"
	"github.com/fathom-agents/fathom/internal/quota"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/bolt"
)

// crossings records the crossings.
type crossings struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *crossings) Crossed(tenant, q string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[tenant+"/"+q]++
}

func (c *crossings) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// TestWaitToolCallHonoursContext: a tool call over the tenant's rate waits; its context
// ending ends the wait with the context's error; other tenants have their own rate.
func TestWaitToolCallHonoursContext(t *testing.T) {
	obs := &crossings{n: map[string]int{}}
	e := quota.New(quota.Config{Default: config.TenantLimits{ToolCallsPerMinute: 1}, Observer: obs})
	if err := e.WaitToolCall(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := e.WaitToolCall(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("second call within the minute: %v after %s, want the context's deadline", err, time.Since(start))
	}
	if obs.get("a/"+quota.QuotaToolCalls) != 1 {
		t.Fatalf("crossings %v", obs.n)
	}
	if err := e.WaitToolCall(ctx, "b"); err != nil && ctx.Err() == nil {
		t.Fatalf("another tenant waited: %v", err)
	}
}

// TestAdmitStartCountsTheIndex: the count comes from the session index; starts admitted
// since are added, ended sessions taken off; each refusal is a crossing.
func TestAdmitStartCountsTheIndex(t *testing.T) {
	j, err := bolt.Open(filepath.Join(t.TempDir(), "j.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, id := range []string{"s-1", "s-2"} {
		if _, err := j.AppendIndexed(t.Context(), id, 0, []persistence.Record{{Type: "x", Data: []byte("x")}},
			persistence.IndexEntry{SessionID: id, Status: persistence.StatusRunning}); err != nil {
			t.Fatal(err)
		}
	}
	obs := &crossings{n: map[string]int{}}
	e := quota.New(quota.Config{Named: map[string]config.TenantLimits{persistence.DefaultTenant: {MaxRunningSessions: 3}}, Index: j, Observer: obs, CountTTL: time.Hour})
	if r, _ := e.AdmitStart(t.Context(), persistence.DefaultTenant); r != "" {
		t.Fatalf("third session refused: %s", r)
	}
	r, after := e.AdmitStart(t.Context(), persistence.DefaultTenant)
	if r == "" || after != quota.DefaultRetryAfter || obs.get("default/"+quota.QuotaRunningSessions) != 1 {
		t.Fatalf("fourth session: %q %s, crossings %v", r, after, obs.n)
	}
	e.Ended(persistence.DefaultTenant)
	if r, _ := e.AdmitStart(t.Context(), persistence.DefaultTenant); r != "" {
		t.Fatalf("a start after one ended refused: %s", r)
	}
	if r, _ := e.AdmitStart(t.Context(), "other-tenant"); r != "" {
		t.Fatalf("a tenant without a limit refused: %s", r)
	}
}
