package testissuer_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/fathom-agents/fathom/internal/testissuer"
)

var noRedirects = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

const (
	verifier    = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk-this-is-long-enough"
	redirectURI = "http://127.0.0.1:1/console/"
)

// authorize asks for a code and returns the redirect's query.
func authorize(t *testing.T, iss *testissuer.Issuer, challenge string) url.Values {
	t.Helper()
	q := url.Values{"response_type": {"code"}, "client_id": {"console"}, "redirect_uri": {redirectURI}, "state": {"s1"},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "scope": {"openid profile"}}
	resp, err := noRedirects.Get(iss.AuthorizeURL() + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil || !strings.HasPrefix(loc.String(), redirectURI+"?") {
		t.Fatalf("authorize: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return loc.Query()
}

// exchange posts form to the token endpoint and returns the status and body.
func exchange(t *testing.T, iss *testissuer.Issuer, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := noRedirects.PostForm(iss.TokenURL(), form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("token endpoint without CORS")
	}
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestAuthorizationCodeWithPKCE(t *testing.T) {
	iss := testissuer.New(t)
	sum := sha256.Sum256([]byte(verifier))
	challenge := base64.RawURLEncoding.EncodeToString(sum[:])

	if q := authorize(t, iss, challenge); q.Get("error") != "access_denied" || q.Get("state") != "s1" {
		t.Fatalf("authorize before Login: %v, want access_denied", q)
	}
	iss.Login("alice", "acme", "operator")
	form := func(code string, change ...string) url.Values {
		f := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {"console"}, "redirect_uri": {redirectURI}, "code_verifier": {verifier}}
		for i := 0; i+1 < len(change); i += 2 {
			f.Set(change[i], change[i+1])
		}
		return f
	}
	for _, bad := range [][]string{
		{"code_verifier", strings.Repeat("x", 43)},
		{"client_id", "other"},
		{"redirect_uri", "http://127.0.0.1:1/elsewhere/"},
	} {
		q := authorize(t, iss, challenge)
		if st, out := exchange(t, iss, form(q.Get("code"), bad...)); st != 400 || out["error"] != "invalid_grant" {
			t.Errorf("exchange with %s=%s: %d %v, want 400 invalid_grant", bad[0], bad[1], st, out)
		}
		// A refused code is spent.
		if st, _ := exchange(t, iss, form(q.Get("code"))); st != 400 {
			t.Errorf("a code refused once was exchanged afterwards: %d", st)
		}
	}

	q := authorize(t, iss, challenge)
	st, out := exchange(t, iss, form(q.Get("code")))
	if st != 200 || out["token_type"] != "Bearer" {
		t.Fatalf("exchange: %d %v", st, out)
	}
	if st, _ := exchange(t, iss, form(q.Get("code"))); st != 400 {
		t.Errorf("a code was exchanged twice: %d", st)
	}
	if n := iss.TokensIssued(); n != 1 {
		t.Errorf("TokensIssued %d, want 1", n)
	}
	var jwks jose.JSONWebKeySet
	if err := json.Unmarshal(iss.PublicJWKS(), &jwks); err != nil {
		t.Fatal(err)
	}
	for name, aud := range map[string]string{"id_token": "console", "access_token": testissuer.DefaultAudience} {
		jws, err := jose.ParseSigned(out[name].(string), []jose.SignatureAlgorithm{jose.RS256})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		payload, err := jws.Verify(jwks)
		if err != nil {
			t.Fatalf("%s does not verify: %v", name, err)
		}
		var c map[string]any
		_ = json.Unmarshal(payload, &c)
		if c["sub"] != "alice" || c["tenant"] != "acme" || c["aud"] != aud || c["iss"] != iss.URL() {
			t.Errorf("%s claims %v, want alice of acme for %s", name, c, aud)
		}
	}
}
