package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/gateway"
)

// corsDo sends method url with the headers hdr and returns the answer (body drained).
func corsDo(t *testing.T, method, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestGatewayCORS: --allowed-origins governs the HTTP routes too. A preflight from a
// listed origin is answered (204, the origin echoed, credentials allowed, the methods and
// headers the routes take) without a credential; the actual request's answer carries the
// echoed origin; an origin allowed only through "*" is echoed too but never told it may
// send credentials (and never gets "*", TestGatewayCORSWildcard); any other origin gets
// no CORS header, and its preflight 403.
func TestGatewayCORS(t *testing.T) {
	t.Parallel()
	listed := "https://console.example"
	g := startFake(t, gwOpts{cfg: func(c *gateway.Config) { c.AllowedOrigins = []string{listed} }})
	r := preflight(t, g.srv.URL, listed)
	if r.StatusCode != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != listed ||
		r.Header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Fatalf("preflight from a listed origin: %d %v", r.StatusCode, r.Header)
	}
	methods, headers := r.Header.Get("Access-Control-Allow-Methods"), strings.ToLower(r.Header.Get("Access-Control-Allow-Headers"))
	for _, m := range []string{"GET", "POST", "DELETE"} {
		if !strings.Contains(methods, m) {
			t.Fatalf("preflight Allow-Methods %q lacks %s", methods, m)
		}
	}
	for _, h := range []string{"authorization", "content-type", "last-event-id", "mcp-session-id"} {
		if !strings.Contains(headers, h) {
			t.Fatalf("preflight Allow-Headers %q lacks %s", headers, h)
		}
	}

	r = corsDo(t, http.MethodGet, g.srv.URL+"/v1/sessions", map[string]string{"Origin": listed, "Authorization": "Bearer " + token})
	if r.StatusCode != 200 || r.Header.Get("Access-Control-Allow-Origin") != listed || r.Header.Get("Access-Control-Allow-Credentials") != "true" ||
		!strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), gateway.RequestIDHeader) {
		t.Fatalf("a request from a listed origin: %d %v", r.StatusCode, r.Header)
	}

	evil := "https://evil.example"
	if r := preflight(t, g.srv.URL, evil); r.StatusCode != http.StatusForbidden || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight from another origin: %d %v", r.StatusCode, r.Header)
	}
	r = corsDo(t, http.MethodGet, g.srv.URL+"/v1/sessions", map[string]string{"Origin": evil, "Authorization": "Bearer " + token})
	for k := range r.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Fatalf("a request from another origin got %s: %v", k, r.Header)
		}
	}

	// No Origin (not a browser): nothing added, the route answers as always.
	r = corsDo(t, http.MethodGet, g.srv.URL+"/v1/sessions", map[string]string{"Authorization": "Bearer " + token})
	if r.StatusCode != 200 || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("a request without an Origin: %d %v", r.StatusCode, r.Header)
	}
}

// TestGatewayCORSWildcard: with --allowed-origins *, any origin is echoed (never "*")
// and never told it may send credentials.
func TestGatewayCORSWildcard(t *testing.T) {
	t.Parallel()
	wild := startFake(t, gwOpts{cfg: func(c *gateway.Config) { c.AllowedOrigins = []string{"*"} }})
	evil := "https://evil.example"
	r := preflight(t, wild.srv.URL, evil)
	if r.StatusCode != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != evil ||
		r.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("preflight with *: %d %v (the origin echoed, never credentials)", r.StatusCode, r.Header)
	}
	r = corsDo(t, http.MethodGet, wild.srv.URL+"/v1/sessions", map[string]string{"Origin": evil, "Authorization": "Bearer " + token})
	if r.StatusCode != 200 || r.Header.Get("Access-Control-Allow-Origin") != evil || r.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("a request with *: %d %v", r.StatusCode, r.Header)
	}
}

func preflight(t *testing.T, base, origin string) *http.Response {
	t.Helper()
	return corsDo(t, http.MethodOptions, base+"/v1/sessions", map[string]string{
		"Origin": origin, "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "authorization, content-type"})
}
