package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/testissuer"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newJWT(t *testing.T, cfg auth.JWTConfig) *auth.JWT {
	t.Helper()
	j, err := auth.NewJWT(context.Background(), cfg)
	if err != nil {
		t.Fatalf("NewJWT: %v", err)
	}
	return j
}

func TestJWTValidTokenIsItsPrincipal(t *testing.T) {
	iss := testissuer.New(t)
	j := newJWT(t, auth.JWTConfig{Issuer: iss.URL(), Audience: testissuer.DefaultAudience})
	ctx := context.Background()
	cases := []struct {
		name   string
		claims map[string]any
		want   auth.Principal
	}{
		{"roles list", iss.Claims("alice", "acme", "operator", "viewer"),
			auth.Principal{Subject: "alice", Tenant: "acme", Roles: []auth.Role{auth.RoleOperator, auth.RoleViewer}}},
		{"no roles is a member", iss.Claims("bob", "acme"), auth.Principal{Subject: "bob", Tenant: "acme"}},
		{"unknown roles are ignored", iss.Claims("carol", "beta", "superuser", "admin", "admin"),
			auth.Principal{Subject: "carol", Tenant: "beta", Roles: []auth.Role{auth.RoleAdmin}}},
	}
	single := iss.Claims("dave", "acme")
	single["roles"] = "viewer"
	cases = append(cases, struct {
		name   string
		claims map[string]any
		want   auth.Principal
	}{"one role as a string", single, auth.Principal{Subject: "dave", Tenant: "acme", Roles: []auth.Role{auth.RoleViewer}}})
	for _, c := range cases {
		p, err := j.Authenticate(ctx, iss.Sign(t, c.claims))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if p.Subject != c.want.Subject || p.Tenant != c.want.Tenant || !slices.Equal(p.Roles, c.want.Roles) {
			t.Errorf("%s: principal %+v, want %+v", c.name, p, c.want)
		}
	}
	if p, _ := j.Authenticate(ctx, iss.Sign(t, iss.Claims("bob", "acme"))); !p.Has(auth.RoleMember) || p.Admin() {
		t.Errorf("a token without roles: %+v, want a member", p)
	}
}

func TestJWTCustomClaims(t *testing.T) {
	iss := testissuer.New(t)
	j := newJWT(t, auth.JWTConfig{Issuer: iss.URL(), TenantClaim: "https://fathom.example/org", RolesClaim: "realm_access.roles"})
	c := iss.Claims("alice", "ignored")
	c["https://fathom.example/org"] = "acme"
	c["realm_access"] = map[string]any{"roles": []string{"operator"}}
	p, err := j.Authenticate(context.Background(), iss.Sign(t, c))
	if err != nil {
		t.Fatal(err)
	}
	if p.Tenant != "acme" || !slices.Equal(p.Roles, []auth.Role{auth.RoleOperator}) {
		t.Fatalf("principal %+v, want tenant acme from the namespaced claim and operator from the nested one", p)
	}
}

// TestJWTRefusesBadTokens: every bad token is ErrUnauthenticated, for its own reason.
func TestJWTRefusesBadTokens(t *testing.T) {
	iss := testissuer.New(t)
	other := testissuer.New(t)
	j := newJWT(t, auth.JWTConfig{Issuer: iss.URL(), Audience: testissuer.DefaultAudience})
	ok := iss.Claims("alice", "acme")
	badTenant := iss.Claims("alice", "../etc")
	otherIss := iss.Claims("alice", "acme")
	otherIss["iss"] = other.URL()
	cases := []struct {
		name, tok, reason string
	}{
		{"forged signature", iss.Sign(t, ok, testissuer.Forged()), "signature"},
		{"alg none", iss.Sign(t, ok, testissuer.AlgNone()), "malformed jwt"},
		{"expired", iss.Sign(t, ok, testissuer.Expired()), "expired"},
		{"nbf in the future", iss.Sign(t, ok, testissuer.NotBefore(time.Now().Add(time.Hour))), "not valid before"},
		{"another audience", iss.Sign(t, ok, testissuer.Audience("someone-else")), "audience"},
		{"another issuer", iss.Sign(t, otherIss), "issued by a different provider"},
		{"another issuer's token", other.Sign(t, other.Claims("alice", "acme")), "signature"},
		{"another issuer's key under our kid", other.Sign(t, ok, testissuer.WithKID(iss.Current().ID)), "signature"},
		{"unknown kid", iss.Sign(t, ok, testissuer.UnknownKey()), "signature"},
		{"no sub", iss.Sign(t, ok, testissuer.Without("sub")), "sub"},
		{"no tenant", iss.Sign(t, ok, testissuer.Without("tenant")), "no tenant"},
		{"tenant not a name", iss.Sign(t, badTenant), "tenant"},
		{"no exp", iss.Sign(t, ok, testissuer.Without("exp")), "no exp"},
		{"payload swapped", swapPayload(iss.Sign(t, ok), iss.Sign(t, iss.Claims("alice", "acme", "admin"))), "signature"},
	}
	for _, c := range cases {
		p, err := j.Authenticate(context.Background(), c.tok)
		if !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("%s: principal %+v, err %v; want ErrUnauthenticated", c.name, p, err)
			continue
		}
		if !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: refused as %q, want a reason with %q", c.name, err, c.reason)
		}
	}
}

// swapPayload puts b's payload under a's header and signature.
func swapPayload(a, b string) string {
	pa := strings.Split(a, ".")
	pb := strings.Split(b, ".")
	return pa[0] + "." + pb[1] + "." + pa[2]
}

func TestJWTClockSkew(t *testing.T) {
	iss := testissuer.New(t)
	clk := &clock{t: time.Now()}
	j := newJWT(t, auth.JWTConfig{Issuer: iss.URL(), Now: clk.Now})
	c := iss.Claims("alice", "acme")
	c["exp"] = clk.Now().Add(-10 * time.Second).Unix()
	c["nbf"] = clk.Now().Add(10 * time.Second).Unix()
	tok := iss.Sign(t, c)
	if _, err := j.Authenticate(context.Background(), tok); err != nil {
		t.Fatalf("10s past exp and 10s before nbf, within the default 30s skew: %v", err)
	}
	clk.Add(time.Minute)
	if _, err := j.Authenticate(context.Background(), tok); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("a minute later: %v, want ErrUnauthenticated", err)
	}
}

func TestJWTNotMine(t *testing.T) {
	iss := testissuer.New(t)
	j := newJWT(t, auth.JWTConfig{Issuer: iss.URL()})
	for _, cred := range []string{"", "secret-token", "fk_abc_def", "a.b.c", "a.b", strings.Repeat("x", 20) + ".." + "y"} {
		if _, err := j.Authenticate(context.Background(), cred); !errors.Is(err, auth.ErrNotMine) {
			t.Errorf("%q: %v, want ErrNotMine", cred, err)
		}
	}
	// In a chain, a static token still passes and a bad JWT stops the chain.
	c := auth.Chain{j, auth.Static{Token: "secret-token"}}
	if p, err := c.Authenticate(context.Background(), "secret-token"); err != nil || !p.Admin() {
		t.Fatalf("static token through the chain: %+v, %v", p, err)
	}
	if _, err := c.Authenticate(context.Background(), iss.Sign(t, iss.Claims("a", "b"), testissuer.Expired())); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("expired JWT through the chain: %v", err)
	}
}

// TestJWTKeyRotation: after the issuer rotates, a token of the new key verifies at
// once (its unknown kid fetches the JWKS again); tokens of the old key keep verifying
// until the key is retired.
func TestJWTKeyRotation(t *testing.T) {
	iss := testissuer.New(t)
	clk := &clock{t: time.Now()}
	j := newJWT(t, auth.JWTConfig{Issuer: iss.URL(), Now: clk.Now})
	ctx := context.Background()
	oldTok := iss.Sign(t, iss.Claims("alice", "acme"))
	if _, err := j.Authenticate(ctx, oldTok); err != nil {
		t.Fatal(err)
	}
	fetches := iss.JWKSFetches()
	old := iss.Rotate(t)
	newTok := iss.Sign(t, iss.Claims("bob", "acme"))
	// The first token's fetch has just finished: the new key's token is still verified
	// against a fetch that begins after it (TestJWTNewKeyDuringAFetch).
	p, err := j.Authenticate(ctx, newTok)
	if err != nil || p.Subject != "bob" {
		t.Fatalf("token of the new key: %+v, %v", p, err)
	}
	if got := iss.JWKSFetches(); got != fetches+1 {
		t.Fatalf("JWKS fetched %d times for the new key, want once", got-fetches)
	}
	if _, err := j.Authenticate(ctx, oldTok); err != nil {
		t.Fatalf("token of the old key before it is retired: %v", err)
	}
	iss.Retire(old)
	// The cached keys still hold the old key until something makes the verifier
	// fetch again: a token with a kid it does not know.
	fetches = iss.JWKSFetches()
	for i := 0; i < 50 && iss.JWKSFetches() == fetches; i++ {
		if _, err := j.Authenticate(ctx, iss.Sign(t, iss.Claims("x", "acme"), testissuer.UnknownKey())); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("unknown key: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := j.Authenticate(ctx, iss.Sign(t, iss.Claims("carol", "acme"), testissuer.WithKey(old))); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("token of the retired key: %v, want ErrUnauthenticated", err)
	}
	if _, err := j.Authenticate(ctx, newTok); err != nil {
		t.Fatalf("token of the new key after the old one is retired: %v", err)
	}
}

// TestJWTUnknownKidsDoNotFloodTheIssuer: tokens naming made-up key ids fetch the JWKS
// RefreshBurst times in a row at most, then once per MinRefresh.
func TestJWTUnknownKidsDoNotFloodTheIssuer(t *testing.T) {
	iss := testissuer.New(t)
	clk := &clock{t: time.Now()}
	j := newJWT(t, auth.JWTConfig{Issuer: iss.URL(), Now: clk.Now, MinRefresh: time.Minute})
	ctx := context.Background()
	if _, err := j.Authenticate(ctx, iss.Sign(t, iss.Claims("alice", "acme"))); err != nil {
		t.Fatal(err)
	}
	before := iss.JWKSFetches()
	for i := range 20 {
		if _, err := j.Authenticate(ctx, iss.Sign(t, iss.Claims("x", "acme"), testissuer.WithKID("made-up-"+string(rune('a'+i))))); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("made-up kid: %v", err)
		}
	}
	// The first token's fetch spent one of the burst.
	if got := iss.JWKSFetches() - before; got != auth.RefreshBurst-1 {
		t.Fatalf("20 made-up kids within MinRefresh fetched the JWKS %d times, want %d", got, auth.RefreshBurst-1)
	}
	clk.Add(time.Minute)
	// go-oidc hands a just-finished fetch to the next caller too (its in-flight request is
	// cleared after its waiters are woken), so a call may reuse it instead of fetching: a
	// few more made-up kids, then exactly one more fetch is what MinRefresh allows.
	for i := 0; i < 50 && iss.JWKSFetches()-before < auth.RefreshBurst; i++ {
		if _, err := j.Authenticate(ctx, iss.Sign(t, iss.Claims("x", "acme"), testissuer.WithKID(fmt.Sprintf("made-up-z%d", i)))); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // let go-oidc clear its finished fetch
	}
	if got := iss.JWKSFetches() - before; got != auth.RefreshBurst {
		t.Fatalf("made-up kids after MinRefresh fetched the JWKS %d more times, want 1", got-(auth.RefreshBurst-1))
	}
	for i := range 5 { // that one was the minute's budget
		_, _ = j.Authenticate(ctx, iss.Sign(t, iss.Claims("x", "acme"), testissuer.WithKID(fmt.Sprintf("made-up-y%d", i))))
	}
	if got := iss.JWKSFetches() - before; got != auth.RefreshBurst {
		t.Fatalf("more made-up kids within the same minute fetched the JWKS again: %d fetches, want %d", got, auth.RefreshBurst)
	}
}

func TestJWTKeySources(t *testing.T) {
	iss := testissuer.New(t)
	other := testissuer.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	pemFile := filepath.Join(dir, "keys.pem")
	if err := os.WriteFile(pemFile, iss.Current().PublicPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	jwksFile := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwksFile, iss.PublicJWKS(), 0o600); err != nil {
		t.Fatal(err)
	}
	good := iss.Sign(t, iss.Claims("alice", "acme"))
	foreign := other.Sign(t, other.Claims("alice", "acme"))
	for _, cfg := range []auth.JWTConfig{
		{JWKSURL: iss.JWKSURL()},
		{JWKSURL: iss.JWKSURL(), Issuer: iss.URL()},
		{KeyFile: pemFile},
		{KeyFile: jwksFile, Issuer: iss.URL()},
	} {
		j := newJWT(t, cfg)
		if p, err := j.Authenticate(ctx, good); err != nil || p.Subject != "alice" {
			t.Errorf("%+v: valid token: %+v, %v", cfg, p, err)
		}
		if _, err := j.Authenticate(ctx, foreign); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("%+v: another issuer's token: %v, want ErrUnauthenticated", cfg, err)
		}
	}
	j := newJWT(t, auth.JWTConfig{JWKSURL: iss.JWKSURL(), Issuer: "https://elsewhere.example"})
	if _, err := j.Authenticate(ctx, good); !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), "different provider") {
		t.Errorf("JWKS URL with another --oidc-issuer: %v, want refused for its iss", err)
	}
	for _, bad := range []auth.JWTConfig{
		{},
		{JWKSURL: iss.JWKSURL(), KeyFile: pemFile},
		{KeyFile: filepath.Join(dir, "missing.pem")},
		{JWKSURL: "file:///etc/passwd"},
	} {
		if _, err := auth.NewJWT(ctx, bad); err == nil {
			t.Errorf("NewJWT(%+v): no error", bad)
		}
	}
}

// TestJWTDiscoveryTimesOut: an issuer that never answers fails NewJWT within
// HTTPTimeout.
func TestJWTDiscoveryTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	start := time.Now()
	_, err := auth.NewJWT(context.Background(), auth.JWTConfig{Issuer: srv.URL, HTTPTimeout: 200 * time.Millisecond})
	if err == nil {
		t.Fatal("NewJWT against a silent issuer: no error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("NewJWT took %s against a silent issuer with a 200ms timeout", d)
	}
}

// TestJWTConcurrentUse: one verifier serves many requests at once, through a key
// rotation (run with -race).
func TestJWTConcurrentUse(t *testing.T) {
	iss := testissuer.New(t)
	j := newJWT(t, auth.JWTConfig{Issuer: iss.URL(), MinRefresh: -1})
	good := iss.Sign(t, iss.Claims("alice", "acme"))
	iss.Rotate(t)
	rotated := iss.Sign(t, iss.Claims("bob", "acme"))
	bad := iss.Sign(t, iss.Claims("x", "acme"), testissuer.UnknownKey())
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 8 {
		wg.Go(func() {
			for range 5 {
				for _, tok := range []string{good, rotated} {
					if _, err := j.Authenticate(context.Background(), tok); err != nil {
						errs <- err
					}
				}
				if _, err := j.Authenticate(context.Background(), bad); !errors.Is(err, auth.ErrUnauthenticated) {
					errs <- fmt.Errorf("unknown key: %v", err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestJWTKeyFetchTimesOut: a JWKS URL that never answers refuses the token within
// HTTPTimeout instead of holding the request.
func TestJWTKeyFetchTimesOut(t *testing.T) {
	iss := testissuer.New(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	j := newJWT(t, auth.JWTConfig{JWKSURL: srv.URL, HTTPTimeout: 200 * time.Millisecond})
	start := time.Now()
	if _, err := j.Authenticate(context.Background(), iss.Sign(t, iss.Claims("alice", "acme"))); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("JWKS URL that never answers: %v, want ErrUnauthenticated", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Authenticate took %s against a silent JWKS URL with a 200ms timeout", d)
	}
}

// TestJWTKeySetTooLarge: a JWKS over 1 MiB is not read.
func TestJWTKeySetTooLarge(t *testing.T) {
	iss := testissuer.New(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		jwks := iss.PublicJWKS()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks[:len(jwks)-2])
		_, _ = w.Write([]byte(`],"pad":"` + strings.Repeat("x", 1<<20) + `"}`))
	}))
	defer srv.Close()
	j := newJWT(t, auth.JWTConfig{JWKSURL: srv.URL})
	if _, err := j.Authenticate(context.Background(), iss.Sign(t, iss.Claims("alice", "acme"))); !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("a 1 MiB JWKS: %v, want refused as too large", err)
	}
}

// gatedTransport holds the answer of the first JWKS fetch after arm until release: the
// issuer has answered (answered is closed) but the verifier has not got the keys yet.
type gatedTransport struct {
	armed    chan struct{}
	answered chan struct{}
	release  chan struct{}
	once     sync.Once
}

func (g *gatedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	select {
	case <-g.armed:
		if strings.HasSuffix(req.URL.Path, "/jwks") {
			g.once.Do(func() {
				close(g.answered)
				<-g.release
			})
		}
	default:
	}
	return resp, err
}

// waitersForKeys counts the goroutines waiting in go-oidc for a JWKS fetch.
func waitersForKeys() int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "(*RemoteKeySet).keysFromRemote(")
}

// TestJWTNewKeyDuringAFetch: a token of a key the issuer publishes while a JWKS fetch
// is on its way (the issuer answered before the new key existed) is accepted: the
// verifier does not judge it by the keys of a fetch that began before the token came.
func TestJWTNewKeyDuringAFetch(t *testing.T) {
	iss := testissuer.New(t)
	g := &gatedTransport{armed: make(chan struct{}), answered: make(chan struct{}), release: make(chan struct{})}
	j := newJWT(t, auth.JWTConfig{Issuer: iss.URL(), Transport: g})
	ctx := context.Background()
	oldTok := iss.Sign(t, iss.Claims("alice", "acme"))
	close(g.armed)
	first := make(chan error, 1)
	go func() { _, err := j.Authenticate(ctx, oldTok); first <- err }()
	select {
	case <-g.answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first token fetched no JWKS")
	}
	iss.Rotate(t) // the issuer publishes a new key after it answered that fetch
	newTok := iss.Sign(t, iss.Claims("bob", "acme"))
	second := make(chan auth.Principal, 1)
	secondErr := make(chan error, 1)
	go func() {
		p, err := j.Authenticate(ctx, newTok)
		second <- p
		secondErr <- err
	}()
	// Both tokens wait on the fetch in flight before it delivers its keys.
	for deadline := time.Now().Add(10 * time.Second); waitersForKeys() < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d verifications wait for the JWKS fetch, want 2", waitersForKeys())
		}
		runtime.Gosched()
	}
	close(g.release)
	if err := <-first; err != nil {
		t.Fatalf("token of the old key: %v", err)
	}
	if p, err := <-second, <-secondErr; err != nil || p.Subject != "bob" {
		t.Fatalf("token of the key published during the fetch: %+v, %v", p, err)
	}
}
