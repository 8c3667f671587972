package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/gateway/a2a"
	"github.com/fathom-agents/fathom/gateway/agui"
	"github.com/fathom-agents/fathom/gateway/mcpserver"
)

// openAPIGW is a gateway with the adapters Node.Gateway mounts (the MCP server, A2A,
// AG-UI), as a node serves it.
func openAPIGW(t *testing.T) *gw {
	t.Helper()
	g := startGW(t, gwOpts{})
	var mcpAgents []mcpserver.Agent
	var a2aAgents []a2a.AgentInfo
	for _, a := range g.n.Agents() {
		mcpAgents = append(mcpAgents, mcpserver.Agent{Name: a.Name, Description: a.Description, StepType: a.StepType()})
		a2aAgents = append(a2aAgents, a2a.AgentInfo{Name: a.Name, Description: a.Description})
	}
	if _, err := mcpserver.Mount(mcpserver.Config{Gateway: g.h, Agents: mcpAgents}); err != nil {
		t.Fatal(err)
	}
	a2a.Mount(g.h, a2a.Config{Agents: a2aAgents})
	agui.Mount(g.h, nil)
	return g
}

// fetch answers method path with tok (none when empty): status, Content-Type, body.
func fetch(t *testing.T, g *gw, method, path, tok, body string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, g.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := g.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), raw
}

type openAPIDoc struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

// TestOpenAPIDocumentsEveryRoute: GET /v1/openapi.json answers without a token an
// OpenAPI 3.1 document in which every pattern registered on the gateway's mux (its own
// routes and the adapters' mounts) has its path and method, and that documents no
// route the gateway does not serve.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	g := openAPIGW(t)
	status, ctype, raw := fetch(t, g, "GET", "/v1/openapi.json", "", "")
	if status != 200 || ctype != "application/json" {
		t.Fatalf("GET /v1/openapi.json = %d %q %.200s", status, ctype, raw)
	}
	var doc openAPIDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Fatalf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	methods := []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}
	registered := map[string]bool{} // "method path", "* path" for a pattern with no method
	for _, p := range g.h.Patterns() {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			method, path = "*", p
		}
		if path == "/" { // the 404 fallback
			continue
		}
		method = strings.ToLower(method)
		registered[method+" "+path] = true
		ops, ok := doc.Paths[path]
		if !ok {
			t.Errorf("route %q: path %s is not in openapi.json", p, path)
			continue
		}
		if method == "*" {
			if !slices.ContainsFunc(methods, func(m string) bool { return ops[m] != nil }) {
				t.Errorf("route %q: no operation in openapi.json", p)
			}
		} else if ops[method] == nil {
			t.Errorf("route %q: %s %s is not in openapi.json", p, method, path)
		}
	}
	for path, ops := range doc.Paths {
		for _, m := range methods {
			if ops[m] != nil && !registered[m+" "+path] && !registered["* "+path] {
				t.Errorf("openapi.json documents %s %s, which the gateway does not serve", m, path)
			}
		}
	}
}
