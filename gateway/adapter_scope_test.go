package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/fathom-agents/fathom/gateway"
)

// TestAdapterScopeAndPublicMount: Do refuses an op the principal may not run (a
// read-only token starting a session through an adapter gets permission_denied, as on
// the HTTP route) and lets it read; a handler mounted with MountPublic answers without
// a credential.
func TestAdapterScopeAndPublicMount(t *testing.T) {
	t.Parallel()
	g := startFake(t, gwOpts{})
	g.h.Mount("POST /v1/test-adapter/start", gateway.ScopeRead, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := map[string]string{}
		if _, err := g.h.Do(r.Context(), gateway.Request{Op: gateway.OpStart, Goal: "Write a haiku"}); err != nil {
			out["code"], out["msg"] = gateway.ErrorCode(err)
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	g.h.MountPublic("GET /v1/test-public", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "public")
	}))
	_, viewer := postJSON(t, g.srv.URL+"/v1/test-adapter/start", readToken, map[string]any{})
	if viewer["code"] != gateway.CodePermissionDenied {
		t.Fatalf("a read-only token started a session through an adapter: %v", viewer)
	}
	_, member := postJSON(t, g.srv.URL+"/v1/test-adapter/start", token, map[string]any{})
	if len(member) != 0 {
		t.Fatalf("the read+write token could not start a session through an adapter: %v", member)
	}
	resp, err := http.Get(g.srv.URL + "/v1/test-public")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(b) != "public" {
		t.Fatalf("public route without a credential: %d %q", resp.StatusCode, b)
	}
}
