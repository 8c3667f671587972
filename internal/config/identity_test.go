package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/config"
)

const bcryptHash = "$2a$04$a8XPgJ8YqOY2r7y3uFuUC.HT.GudJe6TMDpsbdwogsU4QttRhlxJy"

func TestIdentitySection(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fathom.yaml")
	data := `oidc_issuer: https://login.example.com/realms/fathom
oidc_audience: fathom
tenant_claim: org
roles_claim: realm_access.roles
jwt_key_file: keys.pem
console_oidc_client_id: fathom-console
api_keys:
  - id: 5f0c2a9d41e7b386
    name: ci-bot
    tenant: acme
    roles: [operator, viewer]
    hash: '` + bcryptHash + `'
  - {id: ops-1, name: ops, tenant: beta, hash: '$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTI'}
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Identity{
		OIDCIssuer: "https://login.example.com/realms/fathom", OIDCAudience: "fathom", TenantClaim: "org", RolesClaim: "realm_access.roles",
		JWTKeyFile: filepath.Join(dir, "keys.pem"), ConsoleOIDCClientID: "fathom-console",
		APIKeys: []auth.APIKey{
			{ID: "5f0c2a9d41e7b386", Name: "ci-bot", Tenant: "acme", Roles: []auth.Role{auth.RoleOperator, auth.RoleViewer}, Hash: bcryptHash},
			{ID: "ops-1", Name: "ops", Tenant: "beta", Hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTI"},
		},
	}
	if !reflect.DeepEqual(f.Identity, want) {
		t.Fatalf("got %+v\nwant %+v", f.Identity, want)
	}
	if _, err := auth.NewAPIKeys(f.Identity.APIKeys); err != nil {
		t.Fatalf("the file's keys: %v", err)
	}
}

func TestIdentitySectionErrors(t *testing.T) {
	key := func(extra string) string {
		return "api_keys:\n  - id: k1\n    name: ci\n    tenant: acme\n    hash: '" + bcryptHash + "'\n" + extra
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"plain-text hash", "api_keys:\n  - id: k1\n    name: ci\n    tenant: acme\n    hash: hunter2\n", "fathom.yaml:5: api_keys[0].hash: hash: want an argon2id"},
		{"missing hash", "api_keys:\n  - id: k1\n    name: ci\n    tenant: acme\n", "fathom.yaml:2: api_keys[0]: set hash"},
		{"unknown role", key("    roles: [root]\n"), `fathom.yaml:6: api_keys[0].roles[0]: unknown role "root"`},
		{"unknown key", key("    secret: x\n"), "fathom.yaml:6: api_keys[0].secret: unknown key (want hash, id, name, roles, tenant)"},
		{"bad tenant", "api_keys:\n  - id: k1\n    name: ci\n    tenant: a/b\n", "fathom.yaml:4: api_keys[0].tenant: tenant \"a/b\""},
		{"id with underscore", "api_keys:\n  - id: a_b\n", "fathom.yaml:2: api_keys[0].id: api key id \"a_b\""},
		{"duplicate id", key("  - id: k1\n    name: other\n    tenant: acme\n    hash: '" + bcryptHash + "'\n"), `fathom.yaml:6: api_keys[1].id: duplicate id "k1" (first at line 2)`},
		{"not a list", "api_keys: {id: k1}\n", "fathom.yaml:1: api_keys: must be a list"},
		{"issuer not a URL", "oidc_issuer: login.example.com\n", `fathom.yaml:1: oidc_issuer: "login.example.com" is not an http:// or https:// URL`},
		{"empty claim", "tenant_claim: ''\n", "fathom.yaml:1: tenant_claim: must not be empty"},
	} {
		_, err := config.Parse("fathom.yaml", []byte(tc.yaml))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %s...", tc.name, err, tc.want)
		}
	}
}
