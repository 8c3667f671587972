package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/config"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/internal/testissuer"
)

// consoleClientID is the console's client id at the test issuer.
const consoleClientID = "fathom-console"

// consoleConfig returns GET /v1/console/config (without a token) and the CSP of the
// console's page.
func consoleConfig(t *testing.T, n *nodeProc) (cfg map[string]any, csp string) {
	t.Helper()
	st, body := rawHTTP(t, "GET", n.url+"/v1/console/config", "", "")
	if st != 200 {
		t.Fatalf("GET /v1/console/config without a token: %d %s", st, body)
	}
	if err := json.Unmarshal(body, &cfg); err != nil {
		t.Fatalf("GET /v1/console/config: %v: %s", err, body)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(n.url + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return cfg, resp.Header.Get("Content-Security-Policy")
}

// TestConsoleOIDCConfig checks what --console-oidc-client-id (and its variable) tell the
// console without a token, that the console's Content-Security-Policy lets it reach the
// issuer's origin only then, and that the flag needs --oidc-issuer.
func TestConsoleOIDCConfig(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	n := startNode(t, cleanEnv("FATHOM_CONSOLE_OIDC_CLIENT_ID="+consoleClientID), "--data-dir", t.TempDir(), "--oidc-issuer", iss.URL(),
		"--oidc-audience", testissuer.DefaultAudience)
	cfg, csp := consoleConfig(t, n)
	want := map[string]any{"issuer": iss.URL(), "client_id": consoleClientID, "scopes": "openid profile"}
	if got, _ := cfg["oidc"].(map[string]any); len(got) != len(want) || got["issuer"] != want["issuer"] ||
		got["client_id"] != want["client_id"] || got["scopes"] != want["scopes"] {
		t.Fatalf("console config %v, want oidc %v", cfg, want)
	}
	if !strings.Contains(csp, "connect-src 'self' ws: wss: "+iss.URL()+";") {
		t.Fatalf("CSP %q does not let the console connect to the issuer %s", csp, iss.URL())
	}

	// Without a client id: no OIDC sign-in, and the CSP connects to the gateway only.
	plain := startNode(t, cleanEnv(), "--data-dir", t.TempDir(), "--oidc-issuer", iss.URL())
	cfg, csp = consoleConfig(t, plain)
	if v, ok := cfg["oidc"]; !ok || v != nil {
		t.Fatalf("console config without a client id: %v, want {\"oidc\": null}", cfg)
	}
	if !strings.Contains(csp, "connect-src 'self' ws: wss:;") {
		t.Fatalf("CSP without a client id: %q", csp)
	}

	r := fathom(t, cleanEnv(), "node", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--console-oidc-client-id", consoleClientID)
	if r.code != 2 || !strings.Contains(r.stderr, "--oidc-issuer") {
		t.Fatalf("--console-oidc-client-id without --oidc-issuer: exit %d, stderr %s", r.code, r.stderr)
	}
}

// TestConsoleOIDCSignIn drives the console's OIDC sign-in in headless Chromium
// (scripts/console-oidc-e2e.mjs): the console redirects to the test issuer, which signs
// alice of acme in at once, exchanges the code with its PKCE verifier, and shows acme's
// session, not globex's; a redirect back with a tampered state is refused.
func TestConsoleOIDCSignIn(t *testing.T) {
	t.Parallel()
	playwright, chromium := testenv.ConsoleBrowser(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node not found: %v", err)
	}
	iss := testissuer.New(t)
	iss.Login("alice", "acme")
	n := startNode(t, cleanEnv(), "--data-dir", t.TempDir(), "--oidc-issuer", iss.URL(), "--oidc-audience", testissuer.DefaultAudience,
		"--console-oidc-client-id", consoleClientID)
	alice := iss.Sign(t, iss.Claims("alice", "acme"))
	bob := iss.Sign(t, iss.Claims("bob", "globex"))
	for _, s := range []struct{ tok, id string }{{alice, "acme-report"}, {bob, "globex-report"}} {
		if st, out := httpJSON(t, "POST", n.url+"/v1/sessions", s.tok, map[string]any{"session_id": s.id, "goal": "Write a haiku about sign-in"}); st != 201 {
			t.Fatalf("start %s: %d %v", s.id, st, out)
		}
		awaitStatus(t, n, s.tok, s.id, "SESSION_STATUS_COMPLETED")
	}

	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "console-oidc-e2e.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "CONSOLE_URL="+n.url+"/console/", "ISSUER="+iss.URL(), "CLIENT_ID="+consoleClientID,
		"ACME_SESSION=acme-report", "GLOBEX_SESSION=globex-report", "PLAYWRIGHT_DIR="+playwright, "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("console-oidc-e2e:\n%s", out)
	if err != nil {
		t.Fatalf("the console's OIDC sign-in run failed: %v", err)
	}
	if got := iss.TokensIssued(); got != 1 {
		t.Fatalf("the issuer exchanged %d codes, want 1 (the tampered sign-in must not reach the token endpoint)", got)
	}
}

// TestConsoleOIDCClientIDPrecedence: --console-oidc-client-id wins over
// FATHOM_CONSOLE_OIDC_CLIENT_ID, which wins over console_oidc_client_id; the issuer is
// the node's --oidc-issuer (here the file's oidc_issuer).
func TestConsoleOIDCClientIDPrecedence(t *testing.T) {
	file, err := config.Parse("fathom.yaml", []byte("oidc_issuer: https://login.example.com\nconsole_oidc_client_id: from-file\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, env string
		args      []string
		want      string
	}{
		{"flag over env and file", "from-env", []string{"--console-oidc-client-id", "from-flag"}, "from-flag"},
		{"env over file", "from-env", nil, "from-env"},
		{"file", "", nil, "from-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FATHOM_CONSOLE_OIDC_CLIENT_ID", tc.env)
			t.Setenv("FATHOM_OIDC_ISSUER", "")
			fs := flag.NewFlagSet("node", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var f identityFlags
			f.register(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			c, err := f.consoleOIDC(file)
			if err != nil || c == nil || c.ClientID != tc.want || c.Issuer != "https://login.example.com" {
				t.Fatalf("console OIDC %+v, %v; want client %s of https://login.example.com", c, err, tc.want)
			}
		})
	}
}
