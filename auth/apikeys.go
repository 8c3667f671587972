package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
)

// APIKeyPrefix starts every API key: fk_<id>_<secret>.
const APIKeyPrefix = "fk_"

// Bounds and defaults of API keys.
const (
	// MaxAPIKeyLen bounds a credential the API keys look at.
	MaxAPIKeyLen = 256
	// APIKeyCacheTTL is how long a verified key is remembered (its hash is not
	// verified again meanwhile).
	APIKeyCacheTTL = time.Minute
	// APIKeyCacheSize bounds the remembered keys.
	APIKeyCacheSize = 4096
)

// The hash kinds of an API key.
const (
	// HashArgon2id is argon2id in PHC form: $argon2id$v=19$m=KiB,t=passes,p=lanes$salt$hash.
	HashArgon2id = "argon2id"
	// HashBcrypt is bcrypt ($2a$, $2b$ or $2y$).
	HashBcrypt = "bcrypt"
)

// Argon2id parameters of NewAPIKey (OWASP's minimum: 19 MiB, 2 passes, 1 lane), and
// the bounds of a hash's parameters (a configuration file cannot make one
// verification take a gigabyte).
const (
	argonMemory, argonTime, argonLanes, argonKeyLen, argonSaltLen = 19 * 1024, 2, 1, 32, 16
	maxArgonMemory, maxArgonTime, maxArgonLanes                   = 256 * 1024, 16, 16
)

// APIKey is one static API key: a principal (Name in Tenant with Roles) whose key is
// fk_<ID>_<secret>, stored only as Hash, the secret's argon2id or bcrypt hash.
type APIKey struct {
	// ID selects the key (letters, digits and '-'; not secret).
	ID string
	// Name is the principal's subject.
	Name string
	// Tenant is the principal's tenant.
	Tenant string
	// Roles are the principal's roles (none: RoleMember).
	Roles []Role
	// Hash is the secret's hash (argon2id PHC string or bcrypt).
	Hash string
}

// Check reports what is wrong with k, if anything.
func (k APIKey) Check() error {
	if err := CheckAPIKeyID(k.ID); err != nil {
		return err
	}
	if err := CheckSubject(k.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	if err := CheckTenant(k.Tenant); err != nil {
		return err
	}
	for _, r := range k.Roles {
		if !ValidRole(r) {
			return fmt.Errorf("role %q: want admin, operator, member or viewer", r)
		}
	}
	_, err := parseKeyHash(k.Hash)
	return err
}

// CheckAPIKeyID reports whether id may select an API key: 1 to 64 letters, digits or
// '-'.
func CheckAPIKeyID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("api key id %q: want 1 to 64 letters, digits or '-'", id)
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("api key id %q: want 1 to 64 letters, digits or '-'", id)
		}
	}
	return nil
}

// CheckKeyHash reports whether s is a hash an API key may have.
func CheckKeyHash(s string) error {
	_, err := parseKeyHash(s)
	return err
}

// APIKeys is an Authenticator of static API keys. Only the entry a key's id selects is
// verified; a verified key is remembered for APIKeyCacheTTL under its SHA-256.
type APIKeys struct {
	byID map[string]*apiKeyEntry
	now  func() time.Time
	// sem bounds the hashes verified at once (each argon2id verification holds its
	// memory).
	sem   chan struct{}
	mu    sync.Mutex
	cache map[[sha256.Size]byte]cachedKey
}

type apiKeyEntry struct {
	key  APIKey
	hash keyHash
}

type cachedKey struct {
	e     *apiKeyEntry
	until time.Time
}

// NewAPIKeys returns the Authenticator of keys, refusing a bad entry or a duplicate id.
func NewAPIKeys(keys []APIKey) (*APIKeys, error) {
	a := &APIKeys{
		byID:  make(map[string]*apiKeyEntry, len(keys)),
		now:   time.Now,
		sem:   make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)),
		cache: map[[sha256.Size]byte]cachedKey{},
	}
	for i, k := range keys {
		if err := k.Check(); err != nil {
			return nil, fmt.Errorf("api key %d (%s): %w", i, k.Name, err)
		}
		if _, dup := a.byID[k.ID]; dup {
			return nil, fmt.Errorf("api key %d (%s): duplicate id %q", i, k.Name, k.ID)
		}
		h, _ := parseKeyHash(k.Hash)
		a.byID[k.ID] = &apiKeyEntry{key: k, hash: h}
	}
	return a, nil
}

// Len is the number of keys.
func (a *APIKeys) Len() int { return len(a.byID) }

// Authenticate implements Authenticator: ErrNotMine for a credential without
// APIKeyPrefix; the key's principal; or an error wrapping ErrUnauthenticated that
// names the key id at most, never the secret.
func (a *APIKeys) Authenticate(ctx context.Context, cred string) (Principal, error) {
	if !strings.HasPrefix(cred, APIKeyPrefix) {
		return Principal{}, ErrNotMine
	}
	id, secret, ok := strings.Cut(cred[len(APIKeyPrefix):], "_")
	if !ok || id == "" || secret == "" || len(cred) > MaxAPIKeyLen {
		return Principal{}, fmt.Errorf("verify api key: malformed key: %w", ErrUnauthenticated)
	}
	sum := sha256.Sum256([]byte(cred))
	now := a.now()
	a.mu.Lock()
	c, hit := a.cache[sum]
	a.mu.Unlock()
	if hit && now.Before(c.until) {
		return c.e.principal(), nil
	}
	e := a.byID[id]
	if e == nil {
		return Principal{}, fmt.Errorf("verify api key: unknown id %q: %w", id, ErrUnauthenticated)
	}
	select {
	case a.sem <- struct{}{}:
	case <-ctx.Done():
		return Principal{}, fmt.Errorf("verify api key %q: %v: %w", id, ctx.Err(), ErrUnauthenticated)
	}
	good := e.hash.verify([]byte(secret))
	<-a.sem
	if !good {
		return Principal{}, fmt.Errorf("verify api key: wrong secret for id %q: %w", id, ErrUnauthenticated)
	}
	a.remember(sum, e, now)
	return e.principal(), nil
}

// remember caches a verified key, dropping expired entries (else any one) when full.
func (a *APIKeys) remember(sum [sha256.Size]byte, e *apiKeyEntry, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= APIKeyCacheSize {
		for k, c := range a.cache {
			if !now.Before(c.until) {
				delete(a.cache, k)
			}
		}
		for k := range a.cache {
			if len(a.cache) < APIKeyCacheSize {
				break
			}
			delete(a.cache, k)
		}
	}
	a.cache[sum] = cachedKey{e: e, until: now.Add(APIKeyCacheTTL)}
}

func (e *apiKeyEntry) principal() Principal {
	return Principal{Subject: e.key.Name, Tenant: e.key.Tenant, Roles: append([]Role(nil), e.key.Roles...)}
}

// NewAPIKey makes a fresh API key for name in tenant: the key (shown once; never
// stored) and its entry, whose Hash is of kind (HashArgon2id or HashBcrypt).
func NewAPIKey(tenant, name string, roles []Role, kind string) (key string, entry APIKey, err error) {
	idb := make([]byte, 8)
	secret := make([]byte, 32)
	if _, err := rand.Read(idb); err != nil {
		return "", APIKey{}, fmt.Errorf("make api key: %w", err)
	}
	if _, err := rand.Read(secret); err != nil {
		return "", APIKey{}, fmt.Errorf("make api key: %w", err)
	}
	sec := hex.EncodeToString(secret)
	entry = APIKey{ID: hex.EncodeToString(idb), Name: name, Tenant: tenant, Roles: roles}
	if entry.Hash, err = HashAPIKeySecret(sec, kind); err != nil {
		return "", APIKey{}, err
	}
	if err := entry.Check(); err != nil {
		return "", APIKey{}, err
	}
	return APIKeyPrefix + entry.ID + "_" + sec, entry, nil
}

// HashAPIKeySecret hashes secret (the part of a key after its id) as kind.
func HashAPIKeySecret(secret, kind string) (string, error) {
	switch kind {
	case HashArgon2id:
		salt := make([]byte, argonSaltLen)
		if _, err := rand.Read(salt); err != nil {
			return "", fmt.Errorf("hash api key: %w", err)
		}
		h := argon2.IDKey([]byte(secret), salt, argonTime, argonMemory, argonLanes, argonKeyLen)
		b64 := base64.RawStdEncoding
		return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonLanes,
			b64.EncodeToString(salt), b64.EncodeToString(h)), nil
	case HashBcrypt:
		h, err := bcrypt.GenerateFromPassword([]byte(secret), bcrypt.DefaultCost)
		if err != nil {
			return "", fmt.Errorf("hash api key: %w", err)
		}
		return string(h), nil
	}
	return "", fmt.Errorf("hash kind %q: want %s or %s", kind, HashArgon2id, HashBcrypt)
}

// keyHash verifies a secret against one stored hash.
type keyHash interface {
	verify(secret []byte) bool
}

type bcryptHash []byte

func (h bcryptHash) verify(secret []byte) bool {
	return bcrypt.CompareHashAndPassword(h, secret) == nil
}

type argonHash struct {
	memory, time uint32
	lanes        uint8
	salt, sum    []byte
}

func (h argonHash) verify(secret []byte) bool {
	got := argon2.IDKey(secret, h.salt, h.time, h.memory, h.lanes, uint32(len(h.sum)))
	return subtle.ConstantTimeCompare(got, h.sum) == 1
}

// parseKeyHash reads a bcrypt hash or an argon2id PHC string.
func parseKeyHash(s string) (keyHash, error) {
	switch {
	case strings.HasPrefix(s, "$2a$"), strings.HasPrefix(s, "$2b$"), strings.HasPrefix(s, "$2y$"):
		if _, err := bcrypt.Cost([]byte(s)); err != nil {
			return nil, fmt.Errorf("bad bcrypt hash: %w", err)
		}
		return bcryptHash(s), nil
	case strings.HasPrefix(s, "$argon2id$"):
		return parseArgon2id(s)
	case s == "":
		return nil, errors.New("no hash")
	}
	return nil, errors.New("hash: want an argon2id PHC string ($argon2id$v=19$m=...,t=...,p=...$salt$hash) or a bcrypt hash ($2b$...); `fathom apikey new` makes one")
}

func parseArgon2id(s string) (keyHash, error) {
	bad := func(why string) error { return fmt.Errorf("bad argon2id hash: %s", why) }
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" {
		return nil, bad("want $argon2id$v=19$m=...,t=...,p=...$salt$hash")
	}
	if parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return nil, bad(fmt.Sprintf("version %q, want v=%d", parts[2], argon2.Version))
	}
	var h argonHash
	seen := map[string]bool{}
	for kv := range strings.SplitSeq(parts[3], ",") {
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || seen[k] {
			return nil, bad(fmt.Sprintf("parameter %q", kv))
		}
		seen[k] = true
		switch k {
		case "m":
			h.memory = uint32(n)
		case "t":
			h.time = uint32(n)
		case "p":
			if n > 255 {
				return nil, bad("p too large")
			}
			h.lanes = uint8(n)
		default:
			return nil, bad(fmt.Sprintf("unknown parameter %q", k))
		}
	}
	switch {
	case h.time < 1 || h.time > maxArgonTime:
		return nil, bad(fmt.Sprintf("t=%d: want 1 to %d", h.time, maxArgonTime))
	case h.lanes < 1 || h.lanes > maxArgonLanes:
		return nil, bad(fmt.Sprintf("p=%d: want 1 to %d", h.lanes, maxArgonLanes))
	case h.memory < 8*uint32(h.lanes) || h.memory > maxArgonMemory:
		return nil, bad(fmt.Sprintf("m=%d: want %d to %d KiB", h.memory, 8*uint32(h.lanes), maxArgonMemory))
	}
	var err error
	if h.salt, err = base64.RawStdEncoding.DecodeString(parts[4]); err != nil || len(h.salt) < 8 {
		return nil, bad("salt: want at least 8 bytes, base64 without padding")
	}
	if h.sum, err = base64.RawStdEncoding.DecodeString(parts[5]); err != nil || len(h.sum) < 16 || len(h.sum) > 64 {
		return nil, bad("hash: want 16 to 64 bytes, base64 without padding")
	}
	return h, nil
}
