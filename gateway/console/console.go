// Package console is Fathom's web console: plain HTML, CSS and JavaScript embedded in the
// binary (no build step), served by every node's gateway at /console/.
//
// The pages hold no data: the browser asks for a bearer token (pasted, or obtained
// from an OIDC issuer with the authorization-code flow with PKCE when
// GET /v1/console/config names one) and calls the gateway's
// own API with it (REST, and the WebSocket with the token as a `bearer.` subprotocol), so
// a read token gives a read-only console: GET /v1/whoami tells the page which controls
// to show, and the gateway refuses writes anyway.
//
// Pages (hash routes): #/ the sessions list (filters, live status, cost); #/session/ID
// a session (its transcript per agent, GET /v1/sessions/{id}/transcript, with the
// model's text growing live from the deltas and chroma.css styling its code; live events, plan and sub-agent tree with hand-offs, pending human
// requests answered in place, pause/resume, breakpoints, a time-travel slider over
// state_at and a seq field, fork, cancel, artifacts; from timeline.js a Gantt of the run
// over the gantt op with cost per step and agent, the plan's dependency graph per
// version, and the comparison of two points); #/cluster the members and the live
// restarts feed.
package console

import (
	"embed"
	"io"
	"io/fs"
	"net/http"

	"github.com/fathom-agents/fathom/transcript"
)

//go:embed static
var files embed.FS

// Handler serves the console's files under prefix (e.g. "/console/"). The files are
// public: they carry no session data. Their Content-Security-Policy lets the pages
// connect to their own origin and, besides, to connectOrigins (scheme://host[:port]:
// the OIDC issuer the console signs in with).
func Handler(prefix string, connectOrigins ...string) http.Handler {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	fileServer := http.StripPrefix(prefix, http.FileServer(http.FS(sub)))
	connect := "'self' ws: wss:"
	for _, o := range connectOrigins {
		connect += " " + o
	}
	csp := "default-src 'self'; connect-src " + connect + "; img-src 'self' data: blob:; frame-ancestors 'none'"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", csp)
		if r.URL.Path == prefix+"chroma.css" { // the transcript's highlighted code
			w.Header().Set("Content-Type", "text/css; charset=utf-8")
			_, _ = io.WriteString(w, transcript.CodeCSS())
			return
		}
		fileServer.ServeHTTP(w, r)
	})
}
