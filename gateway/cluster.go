package gateway

import (
	"context"
	"net/http"

	"github.com/fathom-agents/fathom/gateway/console"
)

// ClusterInfo is the body of GET /v1/cluster.
type ClusterInfo struct {
	// Node is this member's cluster address.
	Node string `json:"node"`
	// Members are the addresses of the members this node sees, sorted.
	Members []string `json:"members"`
}

// Whoami is the body of GET /v1/whoami.
type Whoami struct {
	// Scope is what the request's token allows: "read" or "write".
	Scope string `json:"scope"`
	// Auth is false when the gateway has no tokens (development: everything allowed).
	Auth bool `json:"auth"`
}

// whoami serves GET /v1/whoami: the scope of the request's token (the console shows
// write controls only for a write token).
func (h *Handler) whoami(w http.ResponseWriter, r *http.Request) {
	scope, _ := h.scopeOf(r)
	writeJSON(w, http.StatusOK, Whoami{Scope: scope.String(), Auth: h.authEnabled()})
}

// cluster serves GET /v1/cluster from Config.Cluster.
func (h *Handler) cluster(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Cluster == nil {
		writeError(w, errorf(CodeUnsupported, "this gateway knows no cluster"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
	defer cancel()
	info, err := h.cfg.Cluster(ctx)
	if err != nil {
		writeError(w, hidden(CodeUnavailable, "the cluster view is unavailable; retry", err))
		return
	}
	if info.Members == nil {
		info.Members = []string{}
	}
	writeJSON(w, http.StatusOK, info)
}

// consoleRoutes serves the web console (package console) at /console/.
func (h *Handler) consoleRoutes() {
	h.mux.Handle("GET /console/", console.Handler("/console/"))
	h.mux.Handle("GET /console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
}
