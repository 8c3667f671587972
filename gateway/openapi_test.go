package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	jsv "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fathom-agents/fathom/gateway/a2a"
	"github.com/fathom-agents/fathom/gateway/agui"
	"github.com/fathom-agents/fathom/gateway/mcpserver"
	"github.com/fathom-agents/fathom/internal/testenv"
)

// openAPIGW is a gateway with the adapters Node.Gateway mounts (the MCP server, A2A,
// AG-UI), as a node serves it.
func openAPIGW(t *testing.T, o gwOpts) *gw {
	t.Helper()
	g := startGW(t, o)
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
	g := openAPIGW(t, gwOpts{})
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

// openAPISchemas compiles the response schemas of the served document.
type openAPISchemas struct {
	t   *testing.T
	c   *jsv.Compiler
	doc map[string]any
}

const openAPIURL = "mem://openapi.json"

func loadOpenAPISchemas(t *testing.T, g *gw) *openAPISchemas {
	t.Helper()
	_, _, raw := fetch(t, g, "GET", "/v1/openapi.json", "", "")
	doc, err := jsv.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsv.NewCompiler()
	c.DefaultDraft(jsv.Draft2020)
	if err := c.AddResource(openAPIURL, doc); err != nil {
		t.Fatal(err)
	}
	return &openAPISchemas{t: t, c: c, doc: doc.(map[string]any)}
}

// check validates body, the answer of method path (the documented path, e.g.
// /v1/sessions/{id}) with status, against the schema openapi.json documents for it.
func (s *openAPISchemas) check(method, path string, status int, ctype string, body []byte) {
	s.t.Helper()
	esc := strings.NewReplacer("~", "~0", "/", "~1").Replace
	resp, ok := s.doc["paths"].(map[string]any)[path].(map[string]any)[strings.ToLower(method)].(map[string]any)["responses"].(map[string]any)[itoa(status)].(map[string]any)
	if !ok {
		s.t.Fatalf("openapi.json documents no %d answer of %s %s", status, method, path)
	}
	ptr := "#/paths/" + esc(path) + "/" + strings.ToLower(method) + "/responses/" + itoa(status)
	if ref, ok := resp["$ref"].(string); ok { // a shared response (components/responses/Error)
		ptr = ref
	}
	if !strings.HasPrefix(ctype, "application/json") {
		s.t.Fatalf("%s %s answered Content-Type %q, want application/json", method, path, ctype)
	}
	sch, err := s.c.Compile(openAPIURL + ptr + "/content/application~1json/schema")
	if err != nil {
		s.t.Fatalf("compile the schema of %s %s %d: %v", method, path, status, err)
	}
	inst, err := jsv.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	if err := sch.Validate(inst); err != nil {
		s.t.Errorf("%s %s %d does not match openapi.json: %v\nbody: %.600s", method, path, status, err, body)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestOpenAPIResponseSchemas: the main routes' real answers (start, list, state,
// timeline, whoami, errors) match the schemas GET /v1/openapi.json documents for them,
// which list every field these answers carry (additionalProperties false).
func TestOpenAPIResponseSchemas(t *testing.T) {
	g := openAPIGW(t, gwOpts{})
	s := loadOpenAPISchemas(t, g)

	status, ctype, body := fetch(t, g, "POST", "/v1/sessions", token, `{"goal":"document the gateway","user_id":"u1"}`)
	s.check("POST", "/v1/sessions", status, ctype, body)
	var started struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(body, &started); err != nil || started.SessionID == "" {
		t.Fatalf("start = %d %s", status, body)
	}
	id := started.SessionID

	deadline := time.Now().Add(30 * time.Second)
	for {
		status, ctype, body = fetch(t, g, "GET", "/v1/sessions/"+id, readToken, "")
		if status == 200 && bytes.Contains(body, []byte(`"SESSION_STATUS_COMPLETED"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s did not complete: %d %.300s", id, status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.check("GET", "/v1/sessions/{id}", status, ctype, body)

	status, ctype, body = fetch(t, g, "GET", "/v1/sessions?limit=10", readToken, "")
	if !bytes.Contains(body, []byte(id)) {
		t.Fatalf("list = %d %s, want %s in it", status, body, id)
	}
	s.check("GET", "/v1/sessions", status, ctype, body)

	status, ctype, body = fetch(t, g, "GET", "/v1/sessions/"+id+"/timeline", readToken, "")
	s.check("GET", "/v1/sessions/{id}/timeline", status, ctype, body)

	for _, tok := range []string{token, readToken} {
		status, ctype, body = fetch(t, g, "GET", "/v1/whoami", tok, "")
		s.check("GET", "/v1/whoami", status, ctype, body)
	}

	// Errors: an unknown session, no token, a bad body.
	status, ctype, body = fetch(t, g, "GET", "/v1/sessions/s-missing", readToken, "")
	s.check("GET", "/v1/sessions/{id}", status, ctype, body)
	if status != 404 {
		t.Fatalf("unknown session = %d %s", status, body)
	}
	status, ctype, body = fetch(t, g, "GET", "/v1/sessions", "", "")
	s.check("GET", "/v1/sessions", status, ctype, body)
	if status != 401 {
		t.Fatalf("list without a token = %d %s", status, body)
	}
	status, ctype, body = fetch(t, g, "POST", "/v1/sessions", token, `{"goal":`)
	s.check("POST", "/v1/sessions", status, ctype, body)
	if status != 400 {
		t.Fatalf("start with a bad body = %d %s", status, body)
	}
}

// waitSessionStatus polls session id's state until its status is want.
func waitSessionStatus(t *testing.T, g *gw, id, want string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() bool {
		status, _, body := fetch(t, g, "GET", "/v1/sessions/"+id, readToken, "")
		return status == 200 && bytes.Contains(body, []byte(`"status":"`+want+`"`))
	}, "session %s never reached %s", id, want)
}

// TestOpenAPICommandSchemas: the commands' real answers (set and clear breakpoints, a
// follow-up message, cancel, delete) match the schemas GET /v1/openapi.json documents.
func TestOpenAPICommandSchemas(t *testing.T) {
	g := openAPIGW(t, gwOpts{delayMS: 100}) // a session runs long enough to cancel it
	s := loadOpenAPISchemas(t, g)
	start := func(goal string) string {
		t.Helper()
		status, _, body := fetch(t, g, "POST", "/v1/sessions", token, `{"goal":"`+goal+`"}`)
		var started struct {
			SessionID string `json:"session_id"`
		}
		if err := json.Unmarshal(body, &started); err != nil || status != 201 {
			t.Fatalf("start = %d %s", status, body)
		}
		return started.SessionID
	}
	id := start("document the commands")
	waitSessionStatus(t, g, id, "SESSION_STATUS_COMPLETED")

	status, ctype, body := fetch(t, g, "POST", "/v1/sessions/"+id+"/messages", token, `{"content":"and once more"}`)
	if status != 202 {
		t.Fatalf("send = %d %s", status, body)
	}
	s.check("POST", "/v1/sessions/{id}/messages", status, ctype, body)
	waitSessionStatus(t, g, id, "SESSION_STATUS_COMPLETED")

	other := start("to be cancelled") // still running: every model answer takes 100ms
	status, ctype, body = fetch(t, g, "POST", "/v1/sessions/"+other+"/breakpoints", token, `{"position":"before","step_type":"write"}`)
	if status != 200 {
		t.Fatalf("set breakpoint = %d %s", status, body)
	}
	s.check("POST", "/v1/sessions/{id}/breakpoints", status, ctype, body)
	status, ctype, body = fetch(t, g, "DELETE", "/v1/sessions/"+other+"/breakpoints", token, "")
	if status != 200 {
		t.Fatalf("clear breakpoints = %d %s", status, body)
	}
	s.check("DELETE", "/v1/sessions/{id}/breakpoints", status, ctype, body)
	status, ctype, body = fetch(t, g, "POST", "/v1/sessions/"+other+"/cancel", token, `{"reason":"test"}`)
	if status != 200 {
		t.Fatalf("cancel = %d %s", status, body)
	}
	s.check("POST", "/v1/sessions/{id}/cancel", status, ctype, body)

	status, ctype, body = fetch(t, g, "DELETE", "/v1/sessions/"+id, token, "")
	s.check("DELETE", "/v1/sessions/{id}", status, ctype, body)
	if status != 200 {
		t.Fatalf("delete = %d %s", status, body)
	}
}
