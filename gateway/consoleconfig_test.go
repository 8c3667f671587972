package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/gateway"
)

// TestConsoleConfig: GET /v1/console/config answers anyone (a gateway with tokens too)
// the console's OIDC issuer, client id and scopes, and the console's
// Content-Security-Policy lets it connect to that issuer's origin; a bad issuer is
// refused by Validate.
func TestConsoleConfig(t *testing.T) {
	t.Parallel()
	g := startFake(t, gwOpts{cfg: func(c *gateway.Config) {
		c.ConsoleOIDC = &gateway.ConsoleOIDC{Issuer: "https://Login.Example.com/realms/acme", ClientID: "fathom-console"}
	}})
	status, out := call(t, g.srv, "GET", "/v1/console/config", "", nil)
	oidc, _ := out["oidc"].(map[string]any)
	if status != 200 || oidc["issuer"] != "https://Login.Example.com/realms/acme" || oidc["client_id"] != "fathom-console" || oidc["scopes"] != gateway.DefaultConsoleScopes {
		t.Fatalf("GET /v1/console/config without a token = %d %v", status, out)
	}
	resp, err := http.Get(g.srv.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' ws: wss: https://login.example.com;") {
		t.Fatalf("CSP %q does not allow the issuer's origin", csp)
	}
}

// TestConsoleConfigWithoutOIDC: a gateway without console OIDC answers {"oidc": null},
// and a console OIDC setting without a scheme or a client id does not validate. (A test
// of its own: two nodes alive at once in one process race in Proto.Actor's remoting,
// upstream, under -race; on the fakes it runs in parallel.)
func TestConsoleConfigWithoutOIDC(t *testing.T) {
	t.Parallel()
	plain := startFake(t, gwOpts{})
	if status, out := call(t, plain.srv, "GET", "/v1/console/config", "", nil); status != 200 || len(out) != 1 || out["oidc"] != nil {
		t.Fatalf("GET /v1/console/config without OIDC = %d %v, want {\"oidc\": null}", status, out)
	}

	for _, bad := range []*gateway.ConsoleOIDC{{Issuer: "login.example.com", ClientID: "c"}, {Issuer: "https://login.example.com"}} {
		cfg := gateway.DefaultConfig()
		cfg.Sessions, cfg.ConsoleOIDC = plain.fake, bad
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate accepted console OIDC %+v", *bad)
		}
	}
}
