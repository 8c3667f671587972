package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/fathom-agents/fathom/auth"
)

// ClusterInfo is the body of GET /v1/cluster.
type ClusterInfo struct {
	// Node is this member's cluster address.
	Node string `json:"node"`
	// Members are the addresses of the members this node sees, sorted (kept as plain
	// addresses for older clients; MemberDetails describes them).
	Members []string `json:"members"`
	// Version is this member's build version; JournalFormat the journal format it writes.
	Version       string `json:"version,omitempty"`
	JournalFormat int    `json:"journal_format,omitempty"`
	// MemberDetails describes each member of Members, in the same order.
	MemberDetails []ClusterMember `json:"member_details"`
	// Departed are the members that left this node's topology since it started, most
	// recent first (a bounded list).
	Departed []DepartedMember `json:"departed"`
}

// ClusterMember is one member of the cluster as GET /v1/cluster describes it.
type ClusterMember struct {
	// Address is the member's cluster address host:port; ID its member id.
	Address string `json:"address"`
	ID      string `json:"id,omitempty"`
	// Self is true for the member that answered.
	Self bool `json:"self,omitempty"`
	// Version and JournalFormat are what the member advertises in its membership ("" and
	// 0 when it advertises nothing).
	Version       string `json:"version,omitempty"`
	JournalFormat int    `json:"journal_format,omitempty"`
	// StartedAt is when the member started (its uptime is counted from it).
	StartedAt *time.Time `json:"started_at,omitempty"`
	// SessionsHosted are the sessions not ended whose live lease the member holds;
	// LeasesHeld all its live leases (the session index's; 0 without one).
	SessionsHosted int `json:"sessions_hosted"`
	LeasesHeld     int `json:"leases_held"`
	// Health is "passing", or "failing" for a member whose health check stopped passing
	// but which is kept while its port answers (a paused process), or this member when it
	// is not ready.
	Health string `json:"health"`
}

// DepartedMember is a member that left the topology.
type DepartedMember struct {
	// Address, ID, Version, JournalFormat and StartedAt are as the member last advertised.
	Address       string     `json:"address"`
	ID            string     `json:"id,omitempty"`
	Version       string     `json:"version,omitempty"`
	JournalFormat int        `json:"journal_format,omitempty"`
	StartedAt     *time.Time `json:"started_at,omitempty"`
	// LeftAt is when this node dropped it from its topology.
	LeftAt time.Time `json:"left_at"`
	// How is "left" (it left gracefully: deregistered or announced its leave) or "dead"
	// (dropped as dead: its health check failed and its port stopped answering).
	How string `json:"how"`
	// SessionsMoved is how many of its sessions this node took over at once (their
	// leases broken so they move now; the others' leases lapse, and a graceful leave hands
	// its sessions over itself); MovedAt when.
	SessionsMoved int        `json:"sessions_moved"`
	MovedAt       *time.Time `json:"moved_at,omitempty"`
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
	if info.MemberDetails == nil {
		info.MemberDetails = []ClusterMember{}
	}
	if info.Departed == nil {
		info.Departed = []DepartedMember{}
	}
	writeJSON(w, http.StatusOK, info)
}

// consoleRoutes serves the web console (package console) at /console/.
func (h *Handler) consoleRoutes() {
	h.handle("GET /console/", h.consoleHandler())                         // consoleconfig.go
	h.handle("GET /v1/console/config", http.HandlerFunc(h.consoleConfig)) // consoleconfig.go
	h.handle("GET /console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
}
