package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/config"
	"github.com/fathom-agents/fathom/internal/testissuer"
)

// TestIdentityFlagPrecedence: each identity setting comes from its flag, else its
// variable, else its config key.
func TestIdentityFlagPrecedence(t *testing.T) {
	a, b, c := testissuer.New(t), testissuer.New(t), testissuer.New(t)
	file, err := config.Parse("fathom.yaml", []byte("oidc_issuer: "+c.URL()+"\ntenant_claim: org\n"))
	if err != nil {
		t.Fatal(err)
	}
	tok := func(iss *testissuer.Issuer) string {
		cl := iss.Claims("alice", "acme")
		cl["org"] = "from-org"
		return iss.Sign(t, cl)
	}
	for _, tc := range []struct {
		name  string
		env   string
		args  []string
		file  *config.File
		want  *testissuer.Issuer
		other []*testissuer.Issuer
	}{
		{"flag over env and file", b.URL(), []string{"--oidc-issuer", a.URL()}, file, a, []*testissuer.Issuer{b, c}},
		{"env over file", b.URL(), nil, file, b, []*testissuer.Issuer{a, c}},
		{"file", "", nil, file, c, []*testissuer.Issuer{a, b}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FATHOM_OIDC_ISSUER", tc.env)
			fs := flag.NewFlagSet("node", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var f identityFlags
			f.register(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			authn, err := f.authenticator(context.Background(), tc.file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := authn.Authenticate(context.Background(), tok(tc.want))
			if err != nil || p.Tenant != "from-org" {
				t.Fatalf("token of the chosen issuer: %+v, %v; want tenant from-org (the file's tenant_claim)", p, err)
			}
			for _, o := range tc.other {
				if _, err := authn.Authenticate(context.Background(), tok(o)); !errors.Is(err, auth.ErrUnauthenticated) {
					t.Fatalf("token of an issuer not chosen: %v", err)
				}
			}
		})
	}
	t.Run("nothing configured", func(t *testing.T) {
		t.Setenv("FATHOM_OIDC_ISSUER", "")
		var f identityFlags
		f.register(flag.NewFlagSet("node", flag.ContinueOnError))
		if authn, err := f.authenticator(context.Background(), nil); authn != nil || err != nil {
			t.Fatalf("no identity settings: %v, %v; want none", authn, err)
		}
	})
}

// TestNodeIdentityConfigErrors: identity settings that cannot work stop the node at
// start with a message naming them; a JWT issuer counts as authentication for a
// listener beyond loopback.
func TestNodeIdentityConfigErrors(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	keys := filepath.Join(t.TempDir(), "keys.pem")
	if err := os.WriteFile(keys, iss.Current().PublicPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"two key sources", nil, []string{"--jwks-url", iss.JWKSURL(), "--jwt-key-file", keys}, 2, "--jwks-url and --jwt-key-file"},
		{"audience without issuer", []string{"FATHOM_OIDC_AUDIENCE=x"}, nil, 2, "--oidc-audience"},
		{"issuer unreachable", nil, []string{"--oidc-issuer", "http://127.0.0.1:1"}, 1, "discover issuer http://127.0.0.1:1"},
		{"missing key file", nil, []string{"--jwt-key-file", keys + ".missing"}, 1, "key file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := fathom(t, cleanEnv(c.env...), append([]string{"node", "--data-dir", t.TempDir()}, c.args...)...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("exit %d (want %d), stderr does not say %q:\n%s", r.code, c.code, c.want, r.stderr)
			}
		})
	}
	p := startNode(t, cleanEnv("FATHOM_JWT_KEY_FILE="+keys), "--listen", "0.0.0.0:0", "--data-dir", t.TempDir())
	p.stop(t)
	if strings.Contains(p.stderr.String(), "without authentication") {
		t.Errorf("a node with a JWT key file warns that it has no authentication:\n%s", p.stderr)
	}
	if h := fathom(t, cleanEnv(), "node", "-h"); !strings.Contains(h.stderr, "FATHOM_OIDC_ISSUER") || !strings.Contains(h.stderr, "config key roles_claim") {
		t.Fatalf("node -h does not document the identity flags:\n%s", h.stderr)
	}
}

// TestAPIKeyCommand: `fathom apikey new` refuses what would make a bad entry and
// hashes with bcrypt on request.
func TestAPIKeyCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"apikey", "new", "--name", "ci"}, "needs --tenant and --name"},
		{[]string{"apikey", "new", "--tenant", "a/b", "--name", "ci"}, "--tenant: tenant \"a/b\""},
		{[]string{"apikey", "new", "--tenant", "acme", "--name", "ci", "--role", "root"}, `unknown role "root"`},
		{[]string{"apikey", "new", "--tenant", "acme", "--name", "ci", "--hash", "md5"}, `--hash "md5"`},
		{[]string{"apikey"}, "want a subcommand: new"},
	} {
		if r := fathom(t, cleanEnv(), c.args...); r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d (want 2), stderr does not say %q:\n%s", c.args, r.code, c.want, r.stderr)
		}
	}
	r := fathom(t, cleanEnv(), "apikey", "new", "--tenant", "acme", "--name", "ci", "--role", "viewer,operator", "--hash", "bcrypt")
	if r.code != 0 || !strings.Contains(r.stdout, "hash: '$2a$") || !strings.Contains(r.stdout, "roles: [viewer,operator]") {
		t.Fatalf("apikey new --hash bcrypt: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	f, err := config.Parse("fathom.yaml", []byte(r.stdout[strings.Index(r.stdout, "api_keys:"):]))
	if err != nil || len(f.Identity.APIKeys) != 1 {
		t.Fatalf("the printed entry does not parse: %v", err)
	}
}
