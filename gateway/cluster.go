package gateway

import (
	"context"
	"net/http"

	"github.com/fathom-agents/fathom/auth"
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
	// Scope is what the request's credential allows at the route level: "read",
	// "write" or "admin".
	Scope string `json:"scope"`
	// Auth is false when the gateway has no credentials configured (development:
	// everything allowed).
	Auth bool `json:"auth"`
	// Subject, Tenant and Roles are the principal the credential stands for.
	Subject string   `json:"subject"`
	Tenant  string   `json:"tenant"`
	Roles   []string `json:"roles"`
}

// whoami serves GET /v1/whoami: the scope of the request's token (the console shows
// write controls only for a write token).
func (h *Handler) whoami(w http.ResponseWriter, r *http.Request) {
	p, _ := auth.FromContext(r.Context())
	roles := make([]string, 0, len(p.Roles))
	for _, role := range p.Roles {
		roles = append(roles, string(role))
	}
	if len(roles) == 0 {
		roles = append(roles, string(auth.RoleMember))
	}
	writeJSON(w, http.StatusOK, Whoami{Scope: scopeOf(p).String(), Auth: h.authEnabled(), Subject: p.Subject, Tenant: p.Tenant, Roles: roles})
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
	h.mux.Handle("GET /console/", h.consoleHandler())           // consoleconfig.go
	h.mux.HandleFunc("GET /v1/console/config", h.consoleConfig) // consoleconfig.go
	h.mux.Handle("GET /console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
}
