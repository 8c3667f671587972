package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/testissuer"
)

// TestNodeAcceptsJWTsAndAPIKeys drives `fathom node` with --oidc-issuer pointing at a
// test issuer and an API key made by `fathom apikey new`: valid credentials are their
// principals on GET /v1/whoami, every bad one is 401.
func TestNodeAcceptsJWTsAndAPIKeys(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	r := fathom(t, cleanEnv(), "apikey", "new", "--tenant", "beta", "--name", "ci-bot", "--role", "operator")
	if r.code != 0 {
		t.Fatalf("apikey new: exit %d\n%s", r.code, r.stderr)
	}
	key := regexp.MustCompile(`(?m)^\s+(fk_\S+)$`).FindStringSubmatch(r.stdout)
	entry := r.stdout[strings.Index(r.stdout, "api_keys:"):]
	if key == nil || !strings.Contains(entry, "hash: '$argon2id$") || strings.Contains(entry, key[1]) {
		t.Fatalf("apikey new printed no key, or no hashed entry without the key:\n%s", r.stdout)
	}
	cfg := filepath.Join(t.TempDir(), "fathom.yaml")
	if err := os.WriteFile(cfg, []byte(entry), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startNode(t, cleanEnv("FATHOM_OIDC_AUDIENCE="+testissuer.DefaultAudience), "--data-dir", t.TempDir(),
		"--oidc-issuer", iss.URL(), "--config", cfg, "--token", "static-admin")
	defer p.stop(t)
	for _, c := range []struct {
		name, cred             string
		subject, tenant, scope string
		roles                  string
	}{
		{"JWT of a member", iss.Sign(t, iss.Claims("alice", "acme")), "alice", "acme", "write", "member"},
		{"JWT of a viewer", iss.Sign(t, iss.Claims("vic", "acme", "viewer")), "vic", "acme", "read", "viewer"},
		{"API key", key[1], "ci-bot", "beta", "write", "operator"},
		{"static token", "static-admin", "token", auth.DefaultTenant, "admin", "admin"},
	} {
		status, out := httpJSON(t, http.MethodGet, p.url+"/v1/whoami", c.cred, nil)
		roles, _ := out["roles"].([]any)
		if status != http.StatusOK || out["subject"] != c.subject || out["tenant"] != c.tenant || out["scope"] != c.scope ||
			len(roles) != 1 || roles[0] != c.roles {
			t.Errorf("%s: %d %v; want 200 %s@%s, scope %s, roles [%s]", c.name, status, out, c.subject, c.tenant, c.scope, c.roles)
		}
	}
	// Key rotation: a token of the new key works at once (its unknown kid fetches the
	// JWKS again), the old key's until the issuer retires it.
	oldTok := iss.Sign(t, iss.Claims("alice", "acme"))
	old := iss.Rotate(t)
	for name, cred := range map[string]string{"new key": iss.Sign(t, iss.Claims("bob", "acme")), "old key": oldTok} {
		if status, out := httpJSON(t, http.MethodGet, p.url+"/v1/whoami", cred, nil); status != http.StatusOK {
			t.Errorf("after the rotation, a token of the %s: %d %v, want 200", name, status, out)
		}
	}
	iss.Retire(old)
	httpJSON(t, http.MethodGet, p.url+"/v1/whoami", iss.Sign(t, iss.Claims("x", "acme"), testissuer.UnknownKey()), nil) // fetches the JWKS again
	if status, out := httpJSON(t, http.MethodGet, p.url+"/v1/whoami", iss.Sign(t, iss.Claims("alice", "acme"), testissuer.WithKey(old)), nil); status != http.StatusUnauthorized {
		t.Errorf("a token of the retired key: %d %v, want 401", status, out)
	}
	claims := iss.Claims("alice", "acme")
	for name, cred := range map[string]string{
		"forged signature":    iss.Sign(t, claims, testissuer.Forged()),
		"alg none":            iss.Sign(t, claims, testissuer.AlgNone()),
		"expired":             iss.Sign(t, claims, testissuer.Expired()),
		"another audience":    iss.Sign(t, claims, testissuer.Audience("other")),
		"unknown kid":         iss.Sign(t, claims, testissuer.UnknownKey()),
		"no tenant":           iss.Sign(t, claims, testissuer.Without("tenant")),
		"API key, bad secret": key[1][:len(key[1])-4] + "0000",
		"opaque":              "not-a-credential",
		"none":                "",
	} {
		if status, out := httpJSON(t, http.MethodGet, p.url+"/v1/whoami", cred, nil); status != http.StatusUnauthorized {
			t.Errorf("%s: %d %v, want 401", name, status, out)
		}
	}
}
