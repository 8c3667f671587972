package gateway

import (
	_ "embed"
	"net/http"
)

// OpenAPIDocument is the OpenAPI 3.1 document of every HTTP route of the gateway (its own
// and those Node.Gateway mounts: /mcp, /a2a, the A2A agent card, /v1/agui), as
// GET /v1/openapi.json serves it. The gateway's tests fail when a registered route is
// missing from it, and check its main response schemas against real answers.
//
//go:embed openapi.json
var OpenAPIDocument []byte

// serveOpenAPI serves GET /v1/openapi.json, with no credential check: a client generator
// reads it before it has a token, and it describes the routes, not any session.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(OpenAPIDocument)
}
