package testissuer

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"time"
)

// codeTTL is how long an authorization code may wait to be exchanged.
const codeTTL = time.Minute

// verifierRE is RFC 7636's code_verifier: 43 to 128 unreserved characters.
var verifierRE = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// Login makes sub of tenant, with roles (none: a member), the user every later
// authorization signs in as, at once and without a prompt (until the next Login).
// Before any Login, /authorize answers access_denied.
func (i *Issuer) Login(sub, tenant string, roles ...string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.login = &login{sub: sub, tenant: tenant, roles: slices.Clone(roles)}
}

// AuthorizeURL is the URL of the issuer's authorization endpoint.
func (i *Issuer) AuthorizeURL() string { return i.srv.URL + "/authorize" }

// TokenURL is the URL of the issuer's token endpoint.
func (i *Issuer) TokenURL() string { return i.srv.URL + "/token" }

// TokensIssued counts the codes the token endpoint exchanged for tokens so far.
func (i *Issuer) TokensIssued() int64 { return i.tokens.Load() }

// serveAuthorize is the authorization endpoint: it checks the request (response_type
// code, a client_id, an absolute redirect_uri, an S256 code_challenge) and redirects to
// redirect_uri with a code for the logged-in user and the request's state.
func (i *Issuer) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || (redirect.Scheme != "http" && redirect.Scheme != "https") || redirect.Host == "" {
		http.Error(w, "redirect_uri must be an absolute http(s) URL", http.StatusBadRequest)
		return
	}
	if q.Get("client_id") == "" {
		http.Error(w, "client_id is required", http.StatusBadRequest)
		return
	}
	back := func(params url.Values) {
		u := *redirect
		v := u.Query()
		for k := range params {
			v.Set(k, params.Get(k))
		}
		if s := q.Get("state"); s != "" {
			v.Set("state", s)
		}
		u.RawQuery = v.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	}
	fail := func(code, desc string) { back(url.Values{"error": {code}, "error_description": {desc}}) }
	switch {
	case q.Get("response_type") != "code":
		fail("unsupported_response_type", "response_type must be code")
		return
	case q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43:
		fail("invalid_request", "a code_challenge with code_challenge_method S256 is required")
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	code := hex.EncodeToString(b)
	now := time.Now()
	i.mu.Lock()
	if i.login == nil {
		i.mu.Unlock()
		fail("access_denied", "no user is logged in (Login)")
		return
	}
	for c, g := range i.codes {
		if now.After(g.expires) {
			delete(i.codes, c)
		}
	}
	i.codes[code] = grant{clientID: q.Get("client_id"), redirectURI: q.Get("redirect_uri"), challenge: q.Get("code_challenge"),
		user: *i.login, expires: now.Add(codeTTL)}
	i.mu.Unlock()
	back(url.Values{"code": {code}})
}

// serveToken is the token endpoint (grant_type authorization_code, public clients): a
// code is exchanged once, when client_id and redirect_uri equal the authorization
// request's and the code_verifier's S256 hash is its code_challenge. It answers an
// id_token (aud: the client_id) and an access_token (aud: DefaultAudience), both JWTs
// with the user's sub, tenant and roles. Browsers may call it from any origin.
func (i *Issuer) serveToken(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Cache-Control", "no-store")
	if err := r.ParseForm(); err != nil {
		tokenError(w, "invalid_request", "the body must be application/x-www-form-urlencoded")
		return
	}
	f := r.PostForm
	if f.Get("grant_type") != "authorization_code" {
		tokenError(w, "unsupported_grant_type", "grant_type must be authorization_code")
		return
	}
	i.mu.Lock()
	g, ok := i.codes[f.Get("code")]
	delete(i.codes, f.Get("code")) // a code is good for one attempt
	i.mu.Unlock()
	verifier := f.Get("code_verifier")
	sum := sha256.Sum256([]byte(verifier))
	switch {
	case !ok || time.Now().After(g.expires):
		tokenError(w, "invalid_grant", "unknown, used or expired code")
		return
	case f.Get("client_id") != g.clientID:
		tokenError(w, "invalid_grant", "client_id is not the authorization request's")
		return
	case f.Get("redirect_uri") != g.redirectURI:
		tokenError(w, "invalid_grant", "redirect_uri is not the authorization request's")
		return
	case !verifierRE.MatchString(verifier) ||
		subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(g.challenge)) != 1:
		tokenError(w, "invalid_grant", "code_verifier does not match the code_challenge")
		return
	}
	idClaims := i.Claims(g.user.sub, g.user.tenant, g.user.roles...)
	idClaims["aud"], idClaims["azp"] = g.clientID, g.clientID
	accessClaims := i.Claims(g.user.sub, g.user.tenant, g.user.roles...)
	accessClaims["client_id"], accessClaims["scope"] = g.clientID, "openid profile"
	key := i.Current()
	var toks [2]string
	for n, c := range []map[string]any{idClaims, accessClaims} {
		payload, err := json.Marshal(c)
		if err == nil {
			toks[n], err = signJWT(key, key.ID, payload)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	i.tokens.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id_token": toks[0], "access_token": toks[1], "token_type": "Bearer", "expires_in": 3600, "scope": "openid profile",
	})
}

// tokenError answers a token request with RFC 6749's error body and status 400.
func tokenError(w http.ResponseWriter, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

// serveCORSPreflight answers browsers' preflight requests to any of the issuer's routes.
func serveCORSPreflight(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
	w.Header().Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
	w.Header().Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}
