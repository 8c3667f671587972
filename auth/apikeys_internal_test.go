package auth

import (
	"crypto/sha256"
	"testing"
	"time"
)

func TestAPIKeyCacheIsBounded(t *testing.T) {
	a, err := NewAPIKeys(nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &apiKeyEntry{key: APIKey{Name: "n", Tenant: "t"}}
	now := time.Now()
	for i := range APIKeyCacheSize + 100 {
		a.remember(sha256.Sum256([]byte{byte(i), byte(i >> 8), byte(i >> 16)}), e, now)
	}
	if n := len(a.cache); n > APIKeyCacheSize {
		t.Fatalf("cache holds %d keys, bound %d", n, APIKeyCacheSize)
	}
	// Expired entries go first.
	a.cache = map[[sha256.Size]byte]cachedKey{}
	old := now.Add(-2 * APIKeyCacheTTL)
	for i := range APIKeyCacheSize {
		a.remember(sha256.Sum256([]byte{byte(i), byte(i >> 8)}), e, old)
	}
	fresh := sha256.Sum256([]byte("fresh"))
	a.remember(fresh, e, now)
	if _, ok := a.cache[fresh]; !ok || len(a.cache) != 1 {
		t.Fatalf("after expiry: %d entries, fresh kept %v; want only the fresh one", len(a.cache), ok)
	}
}
