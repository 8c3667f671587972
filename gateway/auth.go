package gateway

import (
	"net/http"
	"strings"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/messages"
)

// Scope is what a route needs of the caller's role (the session-level checks, tenant
// and owner, are the session grain's: auth.Policy).
type Scope int

// Scopes, each including the ones before it.
const (
	// ScopeNone allows nothing but the health routes.
	ScopeNone Scope = iota
	// ScopeRead allows reading sessions: state, timeline, state_at, subscribe (viewer).
	ScopeRead
	// ScopeWrite allows starting sessions and acting on them (member, operator).
	ScopeWrite
	// ScopeAdmin allows the node-wide routes: the restarts feed, the cluster view (admin).
	ScopeAdmin
)

// String names the scope as the documentation does.
func (s Scope) String() string {
	switch s {
	case ScopeRead:
		return "read"
	case ScopeWrite:
		return "write"
	case ScopeAdmin:
		return "admin"
	}
	return "none"
}

// scopeOf is the most a principal's roles allow at the route level.
func scopeOf(p auth.Principal) Scope {
	switch {
	case p.Admin():
		return ScopeAdmin
	case p.CanWrite():
		return ScopeWrite
	}
	return ScopeRead
}

// Subprotocol is the WebSocket subprotocol of this API. A browser, which cannot set an
// Authorization header on a WebSocket, offers it together with "bearer.<token>"; the
// server selects Subprotocol and never echoes the token.
const Subprotocol = "fathom.v1"

// subprotocolTokenPrefix marks the token entry of Sec-WebSocket-Protocol.
const subprotocolTokenPrefix = "bearer."

// authEnabled reports whether any credential is configured; without one every request
// is auth.Anonymous, an admin (development only: `fathom node` refuses it off loopback).
func (h *Handler) authEnabled() bool {
	return h.cfg.Token != "" || h.cfg.ReadToken != "" || h.cfg.Authenticator != nil
}

// principalOf authenticates the request: the credential of "Authorization: Bearer T",
// or for WebSocket upgrades also of a "bearer.T" entry of Sec-WebSocket-Protocol,
// through the static tokens and then Config.Authenticator. ok is false when a credential
// is required and the request carries none or one nobody accepts (the reason is logged
// at debug level, never answered).
func (h *Handler) principalOf(r *http.Request) (auth.Principal, bool) {
	if !h.authEnabled() {
		return auth.Anonymous, true
	}
	tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found {
		tok, found = subprotocolToken(r)
	}
	if !found || tok == "" {
		return auth.Principal{}, false
	}
	p, err := h.authn.Authenticate(r.Context(), tok)
	if err != nil {
		h.cfg.Logger.Debug("credential refused", "error", err, "remote", r.RemoteAddr)
		return auth.Principal{}, false
	}
	return p, true
}

func subprotocolToken(r *http.Request) (string, bool) {
	for _, line := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(line, ",") {
			if tok, ok := strings.CutPrefix(strings.TrimSpace(p), subprotocolTokenPrefix); ok {
				return tok, true
			}
		}
	}
	return "", false
}

// require wraps an HTTP handler with the credential check: 401 without a valid
// credential, 403 when the principal's roles are below need. The handler finds the
// principal in the request's context (auth.FromContext).
func (h *Handler) require(need Scope, next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := h.principalOf(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="fathom"`)
			writeError(w, errorf(CodeUnauthenticated, "missing or invalid bearer token"))
			return
		}
		if scope := scopeOf(p); scope < need {
			writeError(w, errorf(CodePermissionDenied, "this credential is %s-only; the operation needs %s", scope, need))
			return
		}
		next(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}

// callerOf is the principal of a request require let through, as grain requests carry it.
func callerOf(r *http.Request) *messages.Principal {
	p, ok := auth.FromContext(r.Context())
	if !ok {
		return nil
	}
	return auth.ToMessage(p)
}
