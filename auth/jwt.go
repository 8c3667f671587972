package auth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
)

// Defaults of JWTConfig.
const (
	// DefaultTenantClaim is the claim that names a JWT's tenant.
	DefaultTenantClaim = "tenant"
	// DefaultRolesClaim is the claim that lists a JWT's roles.
	DefaultRolesClaim = "roles"
	// DefaultClockSkew is how far exp and nbf may be off the node's clock.
	DefaultClockSkew = 30 * time.Second
	// DefaultHTTPTimeout bounds one request to the issuer (discovery, JWKS).
	DefaultHTTPTimeout = 10 * time.Second
	// DefaultMinRefresh is how often the JWKS may be fetched again once RefreshBurst
	// fetches have been spent, so a flood of tokens naming made-up keys does not flood
	// the issuer.
	DefaultMinRefresh = 5 * time.Second
	// RefreshBurst is how many JWKS fetches may follow each other without waiting
	// MinRefresh: a key rotation right after a fetch still verifies at once unless
	// made-up key ids have spent them.
	RefreshBurst = 3
	// MaxJWTLen bounds a credential the JWT verifier parses.
	MaxJWTLen = 16 << 10
	// maxIssuerBody bounds a discovery document or JWKS.
	maxIssuerBody = 1 << 20
)

// signingAlgs are the algorithms a JWT may be signed with: asymmetric only (no HS*, no
// none), so a public key can never be used as an HMAC secret.
var signingAlgs = []string{
	oidc.RS256, oidc.RS384, oidc.RS512, oidc.PS256, oidc.PS384, oidc.PS512,
	oidc.ES256, oidc.ES384, oidc.ES512, oidc.EdDSA,
}

// JWTConfig configures a JWT verifier. Exactly one key source applies: KeyFile, else
// JWKSURL, else OIDC discovery from Issuer.
type JWTConfig struct {
	// Issuer is the expected iss. Alone, it is also where the keys are found (OIDC
	// discovery: Issuer + "/.well-known/openid-configuration", then its jwks_uri). With
	// JWKSURL or KeyFile it is only checked. Empty with JWKSURL or KeyFile: iss is not
	// checked (the keys alone say who signed).
	Issuer string
	// JWKSURL is the issuer's JSON Web Key Set, fetched without discovery.
	JWKSURL string
	// KeyFile is a file of public keys: PEM blocks (PUBLIC KEY, RSA PUBLIC KEY,
	// CERTIFICATE) or a JWKS JSON document. Read once, at NewJWT.
	KeyFile string
	// Audience, when set, must be one of the token's aud values.
	Audience string
	// TenantClaim names the claim holding the tenant (DefaultTenantClaim when empty).
	// A token without it is refused: a multi-tenant deployment must not put users in a
	// tenant they were not given.
	TenantClaim string
	// RolesClaim names the claim holding the roles, a list of strings or one string
	// (DefaultRolesClaim when empty). Unknown roles are ignored; no known role means
	// RoleMember.
	RolesClaim string
	// ClockSkew is how far exp and nbf may be off the node's clock (DefaultClockSkew
	// when 0; negative: none).
	ClockSkew time.Duration
	// HTTPTimeout bounds each request to the issuer (DefaultHTTPTimeout when 0).
	HTTPTimeout time.Duration
	// MinRefresh paces JWKS fetches (DefaultMinRefresh when 0; negative: unpaced). A
	// token whose key id is unknown fetches the JWKS again; RefreshBurst fetches may
	// follow each other, then one more every MinRefresh (a token bucket per URL); a
	// fetch over the budget answers the last fetched JWKS.
	MinRefresh time.Duration
	// Transport carries the requests to the issuer (http.DefaultTransport when nil).
	Transport http.RoundTripper
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// JWT is an Authenticator of bearer JWTs signed by one issuer.
type JWT struct {
	cfg      JWTConfig
	verifier *oidc.IDTokenVerifier
}

// NewJWT returns the verifier cfg describes. With discovery, it fetches the issuer's
// configuration now (bounded by cfg.HTTPTimeout and ctx) and fails if it cannot; keys
// are fetched on the first token, and again for a key id not seen yet.
func NewJWT(ctx context.Context, cfg JWTConfig) (*JWT, error) {
	if cfg.TenantClaim == "" {
		cfg.TenantClaim = DefaultTenantClaim
	}
	if cfg.RolesClaim == "" {
		cfg.RolesClaim = DefaultRolesClaim
	}
	if cfg.ClockSkew == 0 {
		cfg.ClockSkew = DefaultClockSkew
	}
	cfg.ClockSkew = max(cfg.ClockSkew, 0)
	if cfg.HTTPTimeout <= 0 {
		cfg.HTTPTimeout = DefaultHTTPTimeout
	}
	if cfg.MinRefresh == 0 {
		cfg.MinRefresh = DefaultMinRefresh
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport
	}
	if cfg.JWKSURL != "" && cfg.KeyFile != "" {
		return nil, errors.New("jwt: both a JWKS URL and a key file: give one key source")
	}
	vcfg := &oidc.Config{
		ClientID:             cfg.Audience,
		SkipClientIDCheck:    cfg.Audience == "",
		SkipIssuerCheck:      cfg.Issuer == "",
		SupportedSigningAlgs: signingAlgs,
		// exp and nbf are checked by Authenticate, with ClockSkew.
		SkipExpiryCheck: true,
	}
	tt := &throttledTransport{next: cfg.Transport, every: cfg.MinRefresh, now: cfg.Now, last: map[string]*fetched{}}
	client := &http.Client{Timeout: cfg.HTTPTimeout, Transport: tt}
	octx := oidc.ClientContext(context.WithoutCancel(ctx), client)
	remote := func(url string) oidc.KeySet {
		return newFreshKeys(func() *oidc.RemoteKeySet { return oidc.NewRemoteKeySet(octx, url) }, &tt.gets)
	}
	j := &JWT{cfg: cfg}
	switch {
	case cfg.KeyFile != "":
		keys, err := readKeyFile(cfg.KeyFile)
		if err != nil {
			return nil, err
		}
		j.verifier = oidc.NewVerifier(cfg.Issuer, &oidc.StaticKeySet{PublicKeys: keys}, vcfg)
	case cfg.JWKSURL != "":
		if err := checkURL(cfg.JWKSURL); err != nil {
			return nil, fmt.Errorf("jwt: JWKS URL: %w", err)
		}
		j.verifier = oidc.NewVerifier(cfg.Issuer, remote(cfg.JWKSURL), vcfg)
	case cfg.Issuer != "":
		if err := checkURL(cfg.Issuer); err != nil {
			return nil, fmt.Errorf("jwt: issuer: %w", err)
		}
		dctx, cancel := context.WithTimeout(ctx, cfg.HTTPTimeout)
		defer cancel()
		p, err := oidc.NewProvider(oidc.ClientContext(dctx, client), cfg.Issuer)
		if err != nil {
			return nil, fmt.Errorf("jwt: discover issuer %s: %w", cfg.Issuer, err)
		}
		var meta struct {
			JWKSURL string `json:"jwks_uri"`
		}
		if err := p.Claims(&meta); err != nil || meta.JWKSURL == "" {
			return nil, fmt.Errorf("jwt: issuer %s: its configuration names no jwks_uri", cfg.Issuer)
		}
		j.verifier = oidc.NewVerifier(cfg.Issuer, remote(meta.JWKSURL), vcfg)
	default:
		return nil, errors.New("jwt: no key source: give an issuer, a JWKS URL or a key file")
	}
	return j, nil
}

// checkURL accepts absolute http and https URLs.
func checkURL(s string) error {
	if !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
		return fmt.Errorf("%q is not an http(s) URL", s)
	}
	return nil
}

// LooksLikeJWT reports whether cred has a JWS compact form: three dot-separated
// base64url parts whose first decodes to a JSON object with an alg. Anything else is
// another authenticator's kind.
func LooksLikeJWT(cred string) bool {
	if len(cred) > MaxJWTLen || strings.Count(cred, ".") != 2 {
		return false
	}
	head, rest, _ := strings.Cut(cred, ".")
	payload, sig, _ := strings.Cut(rest, ".")
	if payload == "" {
		return false
	}
	for _, part := range []string{payload, sig} {
		if _, err := base64.RawURLEncoding.DecodeString(part); err != nil {
			return false
		}
	}
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return false
	}
	var h struct {
		Alg *string `json:"alg"`
	}
	return json.Unmarshal(raw, &h) == nil && h.Alg != nil
}

// Authenticate implements Authenticator: ErrNotMine for a credential that is not a
// JWT, the token's principal, or an error wrapping ErrUnauthenticated whose text says
// why (for logs, never for the client).
func (j *JWT) Authenticate(ctx context.Context, cred string) (Principal, error) {
	if !LooksLikeJWT(cred) {
		return Principal{}, ErrNotMine
	}
	p, err := j.authenticate(ctx, cred)
	if err != nil {
		return Principal{}, fmt.Errorf("verify jwt: %s: %w", err, ErrUnauthenticated)
	}
	return p, nil
}

func (j *JWT) authenticate(ctx context.Context, cred string) (Principal, error) {
	tok, err := j.verifier.Verify(ctx, cred)
	if err != nil {
		return Principal{}, err
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return Principal{}, fmt.Errorf("read claims: %w", err)
	}
	now := j.cfg.Now()
	if tok.Expiry.IsZero() {
		return Principal{}, errors.New("no exp")
	}
	if now.After(tok.Expiry.Add(j.cfg.ClockSkew)) {
		return Principal{}, fmt.Errorf("expired at %s", tok.Expiry.UTC().Format(time.RFC3339))
	}
	if v, ok := claims["nbf"]; ok {
		n, ok := v.(float64)
		if !ok {
			return Principal{}, errors.New("nbf is not a number")
		}
		if nbf := time.Unix(int64(n), 0); now.Add(j.cfg.ClockSkew).Before(nbf) {
			return Principal{}, fmt.Errorf("not valid before %s", nbf.UTC().Format(time.RFC3339))
		}
	}
	if err := CheckSubject(tok.Subject); err != nil {
		return Principal{}, fmt.Errorf("sub: %w", err)
	}
	p := Principal{Subject: tok.Subject}
	tenant, ok := claim(claims, j.cfg.TenantClaim).(string)
	if !ok {
		return Principal{}, fmt.Errorf("no tenant: claim %q missing or not a string", j.cfg.TenantClaim)
	}
	if err := CheckTenant(tenant); err != nil {
		return Principal{}, fmt.Errorf("claim %q: %w", j.cfg.TenantClaim, err)
	}
	p.Tenant = tenant
	p.Roles = knownRoles(claim(claims, j.cfg.RolesClaim))
	return p, nil
}

// claim returns claims[name], or, when there is no such claim and name has dots, the
// value at that path of nested objects ("realm_access.roles"). Namespaced claims
// ("https://example.com/roles") are found by their whole name first.
func claim(claims map[string]any, name string) any {
	if v, ok := claims[name]; ok {
		return v
	}
	var cur any = claims
	for part := range strings.SplitSeq(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

// knownRoles reads a roles claim (a list of strings or one string), keeping the known
// roles once each.
func knownRoles(v any) []Role {
	var names []string
	switch v := v.(type) {
	case string:
		names = []string{v}
	case []any:
		for _, s := range v {
			if s, ok := s.(string); ok {
				names = append(names, s)
			}
		}
	}
	var out []Role
	for _, n := range names {
		if r := Role(n); ValidRole(r) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// readKeyFile reads the public keys of a PEM or JWKS file.
func readKeyFile(path string) ([]crypto.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("jwt: key file: %w", err)
	}
	var keys []crypto.PublicKey
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		var set jose.JSONWebKeySet
		if err := json.Unmarshal(t, &set); err != nil {
			return nil, fmt.Errorf("jwt: key file %s: not a JWKS: %w", path, err)
		}
		for _, k := range set.Keys {
			if !k.IsPublic() {
				return nil, fmt.Errorf("jwt: key file %s: key %q is private: give only public keys", path, k.KeyID)
			}
			keys = append(keys, k.Key)
		}
	} else {
		for rest := data; ; {
			var b *pem.Block
			b, rest = pem.Decode(rest)
			if b == nil {
				break
			}
			k, err := pemPublicKey(b)
			if err != nil {
				return nil, fmt.Errorf("jwt: key file %s: %w", path, err)
			}
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("jwt: key file %s: no public key (want PEM PUBLIC KEY blocks or a JWKS)", path)
	}
	return keys, nil
}

func pemPublicKey(b *pem.Block) (crypto.PublicKey, error) {
	switch b.Type {
	case "PUBLIC KEY":
		return x509.ParsePKIXPublicKey(b.Bytes)
	case "RSA PUBLIC KEY":
		return x509.ParsePKCS1PublicKey(b.Bytes)
	case "CERTIFICATE":
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		return c.PublicKey, nil
	}
	return nil, fmt.Errorf("PEM block %q: want PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE", b.Type)
}

// throttledTransport bounds the issuer's answers (maxIssuerBody) and paces GETs of
// each URL with a token bucket (RefreshBurst, one more every `every`): a GET over the
// budget is answered with the URL's last answer, so unknown key ids cannot make the
// node hammer the issuer.
type throttledTransport struct {
	// gets counts the GETs this transport has begun to answer (fetched or paced).
	gets  atomic.Uint64
	next  http.RoundTripper
	every time.Duration
	now   func() time.Time
	mu    sync.Mutex
	last  map[string]*fetched
}

// fetched is the last answer of the issuer at one URL, and that URL's fetch budget.
type fetched struct {
	status int
	header http.Header
	body   []byte
	tokens float64   // fetches allowed now
	at     time.Time // when tokens was computed
}

// allow spends one of the URL's fetches if it has one (f nil: never fetched).
func (t *throttledTransport) allow(f *fetched) bool {
	if f == nil || t.every <= 0 {
		return true
	}
	now := t.now()
	f.tokens = min(RefreshBurst, f.tokens+float64(now.Sub(f.at))/float64(t.every))
	f.at = now
	if f.tokens < 1 {
		return false
	}
	f.tokens--
	return true
}

func (t *throttledTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.gets.Add(1)
	key := req.URL.String()
	t.mu.Lock()
	f := t.last[key]
	ok := t.allow(f)
	var cached fetched
	if f != nil {
		cached = *f
	}
	t.mu.Unlock()
	if !ok {
		return cached.response(req), nil
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIssuerBody+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", req.URL.Redacted(), err)
	}
	if len(body) > maxIssuerBody {
		return nil, fmt.Errorf("read %s: answer larger than %d bytes", req.URL.Redacted(), maxIssuerBody)
	}
	answer := fetched{status: resp.StatusCode, header: resp.Header.Clone(), body: body}
	if resp.StatusCode == http.StatusOK && req.Method == http.MethodGet {
		t.mu.Lock()
		if g := t.last[key]; g != nil {
			answer.tokens, answer.at = g.tokens, g.at
		} else {
			answer.tokens, answer.at = RefreshBurst-1, t.now()
		}
		t.last[key] = &answer
		t.mu.Unlock()
	}
	return answer.response(req), nil
}

func (f fetched) response(req *http.Request) *http.Response {
	return &http.Response{
		Status: fmt.Sprintf("%d %s", f.status, http.StatusText(f.status)), StatusCode: f.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: f.header.Clone(), Body: io.NopCloser(bytes.NewReader(f.body)), ContentLength: int64(len(f.body)), Request: req,
	}
}

// freshKeys is go-oidc's RemoteKeySet, made to verify a token against keys fetched after
// the token was presented. On a key id it has not cached, RemoteKeySet waits for a fetch
// of the JWKS, but it may join a fetch that began before the call (one in flight, or one
// that has just finished and is not yet cleared), whose keys can predate the token's key:
// a token of a key the issuer has just published would be refused once. When a failure
// saw no fetch begin (gets did not move), the token is tried once more on a new
// RemoteKeySet, which has no fetch to join and so fetches (paced like every fetch); when
// that one verifies it, it replaces the old set. A fetch that began during the call, or
// was answered from the pacing's last JWKS, is the answer.
type freshKeys struct {
	cur    atomic.Pointer[oidc.RemoteKeySet]
	newSet func() *oidc.RemoteKeySet
	gets   *atomic.Uint64
}

func newFreshKeys(newSet func() *oidc.RemoteKeySet, gets *atomic.Uint64) *freshKeys {
	f := &freshKeys{newSet: newSet, gets: gets}
	f.cur.Store(newSet())
	return f
}

// VerifySignature implements oidc.KeySet.
func (f *freshKeys) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	ks := f.cur.Load()
	mark := f.gets.Load()
	payload, err := ks.VerifySignature(ctx, jwt)
	if err == nil || f.gets.Load() != mark || ctx.Err() != nil {
		return payload, err
	}
	fresh := f.newSet()
	if payload, err = fresh.VerifySignature(ctx, jwt); err == nil {
		f.cur.CompareAndSwap(ks, fresh)
	}
	return payload, err
}
