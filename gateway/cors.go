package gateway

import (
	"net/http"
	"net/url"
	"strings"
)

// CORS: the origins of Config.AllowedOrigins may call the HTTP routes from a browser as
// well as open WebSockets. A request whose Origin is allowed gets
// Access-Control-Allow-Origin echoing that origin (never "*"), with
// Access-Control-Allow-Credentials only for an origin listed by name (an origin allowed
// through "*" is never told it may send credentials); a preflight (OPTIONS with
// Access-Control-Request-Method) from such an origin is answered 204 with the methods and
// headers the gateway takes. Another origin gets no CORS header at all, and its
// preflight 403: the browser keeps the page from reading anything.

// corsMethods are the methods of the gateway's routes.
const corsMethods = "GET, POST, DELETE, OPTIONS"

// corsHeaders are the request headers the gateway (and the protocol adapters mounted on
// it) read: the credential, JSON bodies, event stream resumption, the MCP transport's.
const corsHeaders = "Authorization, Content-Type, Accept, Last-Event-ID, Mcp-Session-Id, Mcp-Protocol-Version"

// corsExposed are the response headers a browser page may read.
const corsExposed = "Mcp-Session-Id, WWW-Authenticate, Retry-After, ETag, " + RequestIDHeader

// corsMaxAge is how long (seconds) a browser may cache a preflight's answer.
const corsMaxAge = "600"

// corsOrigin reports whether the request's Origin is a cross origin that
// AllowedOrigins allows (allowed), and whether it is listed by name rather than through
// "*" (named). A request without an Origin, or from the gateway's own host, is not a
// cross-origin request: both are false and nothing is added.
func (h *Handler) corsOrigin(r *http.Request) (origin string, allowed, named bool) {
	origin = r.Header.Get("Origin")
	if origin == "" {
		return "", false, false
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return origin, false, false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return origin, false, false
	}
	for _, o := range h.cfg.AllowedOrigins {
		if o == "*" {
			allowed = true
		} else if strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return origin, true, true
		}
	}
	return origin, allowed, false
}

// cors adds the CORS headers of the request's origin to w; it answers a preflight itself
// and then reports true (the request is done).
func (h *Handler) cors(w http.ResponseWriter, r *http.Request) (done bool) {
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	origin, allowed, named := h.corsOrigin(r)
	if origin != "" {
		w.Header().Add("Vary", "Origin")
	}
	if !allowed {
		if preflight && origin != "" {
			writeError(w, errorf(CodePermissionDenied, "origin %q is not allowed (--allowed-origins)", truncate(origin, 80)))
			return true
		}
		return false
	}
	hd := w.Header()
	hd.Set("Access-Control-Allow-Origin", origin)
	if named {
		hd.Set("Access-Control-Allow-Credentials", "true")
	}
	if !preflight {
		hd.Set("Access-Control-Expose-Headers", corsExposed)
		return false
	}
	hd.Add("Vary", "Access-Control-Request-Method")
	hd.Add("Vary", "Access-Control-Request-Headers")
	hd.Set("Access-Control-Allow-Methods", corsMethods)
	hd.Set("Access-Control-Allow-Headers", corsHeaders)
	hd.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
	return true
}
