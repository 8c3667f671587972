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
	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/persistence/artifact/local"
)

// TestArtifactsStoreAdmitsWrites: the wrapped store refuses a write that would take the
// tenant's bytes of the UTC day over max_artifact_bytes (a *QuotaError naming it, a
// crossing), admits writes that fit, counts only writes that succeeded, keeps tenants
// apart, and starts afresh the next UTC day.
func TestArtifactsStoreAdmitsWrites(t *testing.T) {
	raw, err := local.Open(filepath.Join(t.TempDir(), "artifacts"), local.Config{MaxSize: 80})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var (
		mu  sync.Mutex
		now = time.Date(2026, 11, 28, 23, 0, 0, 0, time.UTC)
	)
	obs := &crossings{n: map[string]int{}}
	e := quota.New(quota.Config{Named: map[string]config.TenantLimits{"acme": {MaxArtifactBytes: 100}}, Observer: obs,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	s := e.Artifacts(raw)
	write := func(tenant, name string, n int) error {
		_, err := s.Write(context.Background(), artifact.Ref{Tenant: tenant, SessionID: "s1", Type: artifact.TypeData, Filename: name}, make([]byte, n), "")
		return err
	}
	if err := write("acme", "big", 90); !errors.Is(err, artifact.ErrTooLarge) { // the store's own refusal: counts nothing
		t.Fatalf("a write over the store's size limit: %v", err)
	}
	if err := write("acme", "a", 60); err != nil {
		t.Fatal(err)
	}
	err = write("acme", "b", 41)
	var qe *artifact.QuotaError
	if !errors.As(err, &qe) || !errors.Is(err, artifact.ErrQuotaExceeded) || qe.Quota != quota.QuotaArtifactBytes || qe.Used != 60 || qe.Size != 41 || qe.Limit != 100 {
		t.Fatalf("a write past the day's 100 bytes: %v", err)
	}
	if obs.get("acme/"+quota.QuotaArtifactBytes) != 1 {
		t.Fatalf("crossings %v", obs.n)
	}
	if _, _, err := raw.Read(context.Background(), "acme", "s1/data/b"); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("the refused write reached the store: %v", err)
	}
	if err := write("acme", "c", 40); err != nil {
		t.Fatalf("a write that fits the day's last 40 bytes: %v", err)
	}
	if err := write("globex", "d", 80); err != nil {
		t.Fatalf("a tenant without the limit: %v", err)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour) // the next UTC day
	mu.Unlock()
	if err := write("acme", "e", 60); err != nil {
		t.Fatalf("the next UTC day: %v", err)
	}
	if quota.New(quota.Config{}).Artifacts(raw) != artifact.Store(raw) {
		t.Fatal("a store is wrapped though no tenant has max_artifact_bytes")
	}
}
