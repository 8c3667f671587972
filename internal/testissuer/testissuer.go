// Package testissuer is an OpenID Connect issuer for tests: an httptest server that
// serves discovery (/.well-known/openid-configuration) and its JWKS (/jwks), and signs
// tokens with go-jose — valid ones, and every kind of bad one a verifier must refuse
// (forged signature, alg none, expired, another audience, an unknown key id).
//
//	iss := testissuer.New(t)
//	tok := iss.Sign(iss.Claims("alice", "acme", "operator"))
//	bad := iss.Sign(iss.Claims("alice", "acme"), testissuer.Forged())
//
// Rotate switches the signing key; the old key stays in the JWKS until Retire.
//
// It is also an authorization server for the authorization-code flow with PKCE (a
// browser's sign-in): /authorize approves at once, as the user Login named, and
// redirects back with a code; /token exchanges the code for tokens once the client_id,
// redirect_uri and S256 code_verifier match the authorization request.
//
//	iss.Login("alice", "acme")
package testissuer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// DefaultAudience is the aud of Claims.
const DefaultAudience = "fathom"

// Key is one signing key of the issuer.
type Key struct {
	// ID is the key's kid.
	ID string
	// Alg is the algorithm it signs with (RS256 or ES256).
	Alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

// PublicPEM is k's public key as a PEM PUBLIC KEY block (for --jwt-key-file).
func (k *Key) PublicPEM() []byte {
	der, err := x509.MarshalPKIXPublicKey(k.priv.Public())
	if err != nil {
		panic(err) // RSA and EC public keys always marshal
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// Issuer is a running test issuer.
type Issuer struct {
	srv     *httptest.Server
	alg     jose.SignatureAlgorithm
	mu      sync.Mutex
	keys    []*Key // published in the JWKS
	current *Key
	n       int
	fetches atomic.Int64
	login   *login           // who /authorize signs in as; nil: access_denied
	codes   map[string]grant // issued codes not yet exchanged
	tokens  atomic.Int64
}

// login is the user of the next authorizations.
type login struct {
	sub, tenant string
	roles       []string
}

// grant is an authorization code's request, checked when the code is exchanged.
type grant struct {
	clientID, redirectURI, challenge string
	user                             login
	expires                          time.Time
}

// Option configures New.
type Option func(*Issuer)

// WithAlgorithm makes the issuer sign with alg: jose.RS256 (the default) or jose.ES256.
func WithAlgorithm(alg jose.SignatureAlgorithm) Option { return func(i *Issuer) { i.alg = alg } }

// New starts an issuer, stopped when t ends.
func New(t testing.TB, opts ...Option) *Issuer {
	t.Helper()
	i := &Issuer{alg: jose.RS256, codes: map[string]grant{}}
	for _, o := range opts {
		o(i)
	}
	i.current = i.newKey(t)
	i.keys = []*Key{i.current}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", i.serveDiscovery)
	mux.HandleFunc("GET /jwks", i.serveJWKS)
	mux.HandleFunc("GET /authorize", i.serveAuthorize)
	mux.HandleFunc("POST /token", i.serveToken)
	mux.HandleFunc("OPTIONS /", serveCORSPreflight)
	// Set i.srv before the server starts: its handlers read it (URL), and Start's
	// goroutines are what orders that read after this write.
	i.srv = httptest.NewUnstartedServer(mux)
	i.srv.Start()
	t.Cleanup(i.srv.Close)
	return i
}

// URL is the issuer URL (the iss of its tokens and the --oidc-issuer to give).
func (i *Issuer) URL() string { return i.srv.URL }

// JWKSURL is the URL of the issuer's JWKS (the --jwks-url to give).
func (i *Issuer) JWKSURL() string { return i.srv.URL + "/jwks" }

// JWKSFetches counts the requests for the JWKS so far.
func (i *Issuer) JWKSFetches() int64 { return i.fetches.Load() }

// Current is the key the issuer signs with.
func (i *Issuer) Current() *Key {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.current
}

// Rotate makes a new key the signing key and publishes it; the old key stays
// published (tokens it signed keep verifying) until Retire. It returns the old key.
func (i *Issuer) Rotate(t testing.TB) (old *Key) {
	t.Helper()
	k := i.newKey(t)
	i.mu.Lock()
	defer i.mu.Unlock()
	old, i.current = i.current, k
	i.keys = append(i.keys, k)
	return old
}

// Retire removes k from the JWKS.
func (i *Issuer) Retire(k *Key) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.keys = slices.DeleteFunc(i.keys, func(x *Key) bool { return x == k })
}

// PublicJWKS is the JWKS document the issuer serves now.
func (i *Issuer) PublicJWKS() []byte {
	i.mu.Lock()
	defer i.mu.Unlock()
	var set jose.JSONWebKeySet
	for _, k := range i.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.ID, Algorithm: string(k.Alg), Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		panic(err) // public keys of known types always marshal
	}
	return b
}

// Claims are a valid token's claims: iss, aud DefaultAudience, sub, tenant, roles
// (omitted when none), iat now and exp in an hour.
func (i *Issuer) Claims(sub, tenant string, roles ...string) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss": i.URL(), "aud": DefaultAudience, "sub": sub, "tenant": tenant,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	if len(roles) > 0 {
		c["roles"] = roles
	}
	return c
}

// signOpts are what SignOptions change.
type signOpts struct {
	key    *Key
	kid    *string
	forged bool
	none   bool
	claims map[string]any
}

// SignOption changes how Sign signs.
type SignOption func(t testing.TB, i *Issuer, o *signOpts)

// WithKey signs with k (a retired key, say) instead of the current key.
func WithKey(k *Key) SignOption { return func(_ testing.TB, _ *Issuer, o *signOpts) { o.key = k } }

// WithKID puts kid in the header whatever key signs.
func WithKID(kid string) SignOption {
	return func(_ testing.TB, _ *Issuer, o *signOpts) { o.kid = &kid }
}

// Forged signs with a key the issuer never published, under the current key's kid.
func Forged() SignOption { return func(_ testing.TB, _ *Issuer, o *signOpts) { o.forged = true } }

// UnknownKey signs with a key the issuer never published, under a kid not in its JWKS.
func UnknownKey() SignOption {
	return func(t testing.TB, i *Issuer, o *signOpts) {
		k := i.newKey(t)
		k.ID = "unknown-" + k.ID
		o.key = k
	}
}

// AlgNone sends the claims unsigned with the header {"alg":"none"}.
func AlgNone() SignOption { return func(_ testing.TB, _ *Issuer, o *signOpts) { o.none = true } }

// Expired sets exp an hour ago.
func Expired() SignOption {
	return func(_ testing.TB, _ *Issuer, o *signOpts) { o.claims["exp"] = time.Now().Add(-time.Hour).Unix() }
}

// NotBefore sets nbf.
func NotBefore(at time.Time) SignOption {
	return func(_ testing.TB, _ *Issuer, o *signOpts) { o.claims["nbf"] = at.Unix() }
}

// Audience sets aud.
func Audience(aud ...string) SignOption {
	return func(_ testing.TB, _ *Issuer, o *signOpts) { o.claims["aud"] = aud }
}

// Without removes claims (sub, tenant, ...).
func Without(names ...string) SignOption {
	return func(_ testing.TB, _ *Issuer, o *signOpts) {
		for _, n := range names {
			delete(o.claims, n)
		}
	}
}

// Sign returns claims as a compact JWS signed by the current key, changed by opts.
// claims is not modified.
func (i *Issuer) Sign(t testing.TB, claims map[string]any, opts ...SignOption) string {
	t.Helper()
	o := signOpts{key: i.Current(), claims: maps.Clone(claims)}
	for _, opt := range opts {
		opt(t, i, &o)
	}
	payload, err := json.Marshal(o.claims)
	if err != nil {
		t.Fatalf("testissuer: claims: %v", err)
	}
	if o.none {
		enc := base64.RawURLEncoding
		return enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc.EncodeToString(payload) + "."
	}
	key := o.key
	kid := key.ID
	if o.forged {
		key = i.newKey(t)
	}
	if o.kid != nil {
		kid = *o.kid
	}
	s, err := signJWT(key, kid, payload)
	if err != nil {
		t.Fatalf("testissuer: %v", err)
	}
	return s
}

// signJWT signs payload with key under kid as a compact JWS of type JWT.
func signJWT(key *Key, kid string, payload []byte) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: key.Alg, Key: jose.JSONWebKey{Key: key.priv, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("make signer: %w", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		return "", fmt.Errorf("serialize: %w", err)
	}
	return s, nil
}

func (i *Issuer) newKey(t testing.TB) *Key {
	t.Helper()
	var priv crypto.Signer
	var err error
	switch i.alg {
	case jose.RS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		err = fmt.Errorf("algorithm %s not supported", i.alg)
	}
	if err != nil {
		t.Fatalf("testissuer: key: %v", err)
	}
	i.mu.Lock()
	i.n++
	id := fmt.Sprintf("key-%d", i.n)
	i.mu.Unlock()
	return &Key{ID: id, Alg: i.alg, priv: priv}
}

func (i *Issuer) serveDiscovery(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"issuer":                                i.URL(),
		"jwks_uri":                              i.JWKSURL(),
		"authorization_endpoint":                i.URL() + "/authorize",
		"token_endpoint":                        i.URL() + "/token",
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"none"},
		"scopes_supported":                      []string{"openid", "profile"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{string(jose.RS256), string(jose.ES256)},
	})
}

func (i *Issuer) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	i.fetches.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	_, _ = w.Write(i.PublicJWKS())
}
