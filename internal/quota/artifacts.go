package quota

import (
	"context"
	"math"

	"github.com/fathom-agents/fathom/persistence/artifact"
)

// periodToday is what a tenant's max_artifact_bytes counts over.
const periodToday = "today (UTC)"

// AdmitArtifact decides a write of size bytes of tenant's artifacts: nil admits it (and
// counts its bytes in the tenant's usage of the day until the next read of the index,
// which counts them once its artifact_written is stored); an *artifact.QuotaError when
// the day's bytes and this write's would pass the tenant's max_artifact_bytes. Each
// refusal is a crossing (logged and counted).
func (e *Enforcer) AdmitArtifact(tenant string, size int64) error {
	limit := e.Limits(tenant).MaxArtifactBytes
	if limit == 0 || size < 0 {
		return nil
	}
	u := entry(e, e.usage, tenant, func() *usageEntry { return &usageEntry{} })
	u.mu.Lock()
	defer u.mu.Unlock()
	e.today(u, tenant)
	used := u.u.ArtifactBytes
	if used+uint64(size) > limit {
		e.crossed(tenant, QuotaArtifactBytes, "an artifact write was refused", "used_bytes", used, "size", size, "limit", limit)
		return &artifact.QuotaError{Quota: QuotaArtifactBytes, Tenant: tenant, Used: clampInt64(used), Size: size, Limit: clampInt64(limit), Period: periodToday}
	}
	u.u.ArtifactBytes += uint64(size)
	return nil
}

// unadmitArtifact takes back the bytes of an admitted write that failed.
func (e *Enforcer) unadmitArtifact(tenant string, size int64) {
	e.mu.Lock()
	u := e.usage[tenant]
	e.mu.Unlock()
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.u.ArtifactBytes -= min(u.u.ArtifactBytes, uint64(size))
}

// Artifacts returns store with the tenants' max_artifact_bytes enforced on its writes
// (AdmitArtifact, by the written Ref's tenant); store itself when no tenant has the
// limit. Reads, lists and deletes pass through.
func (e *Enforcer) Artifacts(store artifact.Store) artifact.Store {
	limited := e.cfg.Default.MaxArtifactBytes > 0
	for _, l := range e.cfg.Named {
		limited = limited || l.MaxArtifactBytes > 0
	}
	if store == nil || !limited {
		return store
	}
	return &artifactStore{Store: store, e: e}
}

// artifactStore is an artifact.Store whose writes are admitted by the tenants' quotas.
type artifactStore struct {
	artifact.Store
	e *Enforcer
}

var _ artifact.Store = (*artifactStore)(nil)

// Write implements artifact.Store: a write over the tenant's max_artifact_bytes is
// refused with an *artifact.QuotaError before it reaches the store.
func (s *artifactStore) Write(ctx context.Context, ref artifact.Ref, content []byte, contentType string) (artifact.Info, error) {
	size := int64(len(content))
	if err := s.e.AdmitArtifact(ref.Tenant, size); err != nil {
		return artifact.Info{}, err
	}
	info, err := s.Store.Write(ctx, ref, content, contentType)
	if err != nil {
		s.e.unadmitArtifact(ref.Tenant, size)
	}
	return info, err
}

func clampInt64(n uint64) int64 { return int64(min(n, math.MaxInt64)) }
