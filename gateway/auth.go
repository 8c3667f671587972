package gateway

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// Scope is what a bearer token allows.
type Scope int

// Scopes, each including the ones before it.
const (
	// ScopeNone allows nothing but the health routes.
	ScopeNone Scope = iota
	// ScopeRead allows reading sessions: state, timeline, state_at, subscribe.
	ScopeRead
	// ScopeWrite allows everything: start, input, pause, resume, breakpoints, fork.
	ScopeWrite
)

// String names the scope as the documentation does.
func (s Scope) String() string {
	switch s {
	case ScopeRead:
		return "read"
	case ScopeWrite:
		return "write"
	}
	return "none"
}

// Subprotocol is the WebSocket subprotocol of this API. A browser, which cannot set an
// Authorization header on a WebSocket, offers it together with "bearer.<token>"; the
// server selects Subprotocol and never echoes the token.
const Subprotocol = "fathom.v1"

// subprotocolTokenPrefix marks the token entry of Sec-WebSocket-Protocol.
const subprotocolTokenPrefix = "bearer."

// authEnabled reports whether any token is configured; without one every request has
// ScopeWrite (development only: `fathom node` warns).
func (h *Handler) authEnabled() bool { return h.cfg.Token != "" || h.cfg.ReadToken != "" }

// scopeOf returns what the request's token allows: from "Authorization: Bearer T", or
// for WebSocket upgrades also from a "bearer.T" entry of Sec-WebSocket-Protocol.
// ok is false when a token is required and the request carries none or an unknown one.
func (h *Handler) scopeOf(r *http.Request) (Scope, bool) {
	if !h.authEnabled() {
		return ScopeWrite, true
	}
	tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found {
		tok, found = subprotocolToken(r)
	}
	if !found || tok == "" {
		return ScopeNone, false
	}
	switch {
	case h.cfg.Token != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(h.cfg.Token)) == 1:
		return ScopeWrite, true
	case h.cfg.ReadToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(h.cfg.ReadToken)) == 1:
		return ScopeRead, true
	}
	return ScopeNone, false
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

// require wraps an HTTP handler with the token check: 401 without a valid token, 403
// when the token's scope is below need.
func (h *Handler) require(need Scope, next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scope, ok := h.scopeOf(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="fathom"`)
			writeError(w, errorf(CodeUnauthenticated, "missing or invalid bearer token"))
			return
		}
		if scope < need {
			writeError(w, errorf(CodePermissionDenied, "this token is %s-only; the operation needs a %s token", scope, need))
			return
		}
		next(w, r)
	})
}
