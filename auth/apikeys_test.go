package auth_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/fathom-agents/fathom/auth"
)

func TestAPIKeysAcceptAndRefuse(t *testing.T) {
	ctx := context.Background()
	argonKey, argonEntry, err := auth.NewAPIKey("acme", "ci-bot", []auth.Role{auth.RoleOperator}, auth.HashArgon2id)
	if err != nil {
		t.Fatal(err)
	}
	bcryptKey, bcryptEntry, err := auth.NewAPIKey("beta", "reporter", nil, auth.HashBcrypt)
	if err != nil {
		t.Fatal(err)
	}
	// A hash made elsewhere (htpasswd -B, a password manager) of a hand-chosen secret.
	h, err := bcrypt.GenerateFromPassword([]byte("correct-horse"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	manual := auth.APIKey{ID: "ops-1", Name: "ops", Tenant: "acme", Roles: []auth.Role{auth.RoleViewer}, Hash: string(h)}
	if !strings.HasPrefix(argonEntry.Hash, "$argon2id$v=19$") || !strings.HasPrefix(bcryptEntry.Hash, "$2") {
		t.Fatalf("hashes %q, %q: want argon2id and bcrypt", argonEntry.Hash, bcryptEntry.Hash)
	}
	if strings.Contains(argonEntry.Hash, argonKey[strings.LastIndex(argonKey, "_")+1:]) {
		t.Fatal("the entry holds the secret in clear")
	}
	keys, err := auth.NewAPIKeys([]auth.APIKey{argonEntry, bcryptEntry, manual})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  string
		want auth.Principal
	}{
		{argonKey, auth.Principal{Subject: "ci-bot", Tenant: "acme", Roles: []auth.Role{auth.RoleOperator}}},
		{bcryptKey, auth.Principal{Subject: "reporter", Tenant: "beta"}},
		{"fk_ops-1_correct-horse", auth.Principal{Subject: "ops", Tenant: "acme", Roles: []auth.Role{auth.RoleViewer}}},
	} {
		for range 2 { // the second time from the cache
			p, err := keys.Authenticate(ctx, c.key)
			if err != nil || p.Subject != c.want.Subject || p.Tenant != c.want.Tenant || !slices.Equal(p.Roles, c.want.Roles) {
				t.Fatalf("key of %s: %+v, %v; want %+v", c.want.Subject, p, err, c.want)
			}
		}
	}
	argonSecret := argonKey[strings.LastIndex(argonKey, "_")+1:]
	bcryptSecret := bcryptKey[strings.LastIndex(bcryptKey, "_")+1:]
	for name, cred := range map[string]string{
		"argon2id id, wrong secret":   "fk_" + argonEntry.ID + "_" + strings.Repeat("0", len(argonSecret)),
		"bcrypt id, wrong secret":     "fk_" + bcryptEntry.ID + "_" + strings.Repeat("0", len(bcryptSecret)),
		"argon2id id, bcrypt secret":  "fk_" + argonEntry.ID + "_" + bcryptSecret,
		"bcrypt id, argon2id secret":  "fk_" + bcryptEntry.ID + "_" + argonSecret,
		"manual id, secret truncated": "fk_ops-1_correct-hors",
		"unknown id":                  "fk_nope_" + argonSecret,
		"no secret":                   "fk_" + argonEntry.ID + "_",
		"no id":                       "fk__" + argonSecret,
		"no separator":                "fk_" + argonEntry.ID,
		"too long":                    argonKey + strings.Repeat("x", auth.MaxAPIKeyLen),
	} {
		p, err := keys.Authenticate(ctx, cred)
		if !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("%s: %+v, %v; want ErrUnauthenticated", name, p, err)
		}
		if err != nil && strings.Contains(err.Error(), argonSecret) {
			t.Errorf("%s: the error %q shows a secret", name, err)
		}
	}
	for _, cred := range []string{"", "a-static-token", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln"} {
		if _, err := keys.Authenticate(ctx, cred); !errors.Is(err, auth.ErrNotMine) {
			t.Errorf("%q: %v, want ErrNotMine", cred, err)
		}
	}
}

func TestAPIKeysRefuseBadEntries(t *testing.T) {
	_, good, err := auth.NewAPIKey("acme", "ci", nil, auth.HashArgon2id)
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(*auth.APIKey)) []auth.APIKey { k := good; f(&k); return []auth.APIKey{k} }
	for name, keys := range map[string][]auth.APIKey{
		"duplicate id":       {good, good},
		"plain-text hash":    with(func(k *auth.APIKey) { k.Hash = "hunter2" }),
		"no hash":            with(func(k *auth.APIKey) { k.Hash = "" }),
		"huge argon2 memory": with(func(k *auth.APIKey) { k.Hash = strings.Replace(k.Hash, "m=19456", "m=4194304", 1) }),
		"argon2 version":     with(func(k *auth.APIKey) { k.Hash = strings.Replace(k.Hash, "v=19", "v=16", 1) }),
		"argon2 truncated":   with(func(k *auth.APIKey) { k.Hash = k.Hash[:strings.LastIndex(k.Hash, "$")] }),
		"bad bcrypt":         with(func(k *auth.APIKey) { k.Hash = "$2b$10$short" }),
		"unknown role":       with(func(k *auth.APIKey) { k.Roles = []auth.Role{"root"} }),
		"tenant path":        with(func(k *auth.APIKey) { k.Tenant = "../a" }),
		"id with underscore": with(func(k *auth.APIKey) { k.ID = "a_b" }),
		"no name":            with(func(k *auth.APIKey) { k.Name = "" }),
	} {
		if _, err := auth.NewAPIKeys(keys); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, _, err := auth.NewAPIKey("acme", "ci", nil, "md5"); err == nil {
		t.Error("hash kind md5: accepted")
	}
}

// TestAPIKeysConcurrentUse: one key set serves many requests at once (run with -race).
func TestAPIKeysConcurrentUse(t *testing.T) {
	key, e, err := auth.NewAPIKey("acme", "ci", nil, auth.HashArgon2id)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := auth.NewAPIKeys([]auth.APIKey{e})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var failures atomic.Int32
	for i := range 8 {
		wg.Go(func() {
			for range 10 {
				cred := key
				if i%2 == 1 {
					cred = key[:len(key)-1] + "x"
				}
				_, err := keys.Authenticate(context.Background(), cred)
				if (err == nil) != (i%2 == 0) {
					failures.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d wrong answers under concurrency", n)
	}
}
