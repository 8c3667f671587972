package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// ErrDraining is what Config.Ready returns (wrapped or not) while the node drains or
// once it drained: GET /readyz answers 503 saying so to every caller.
var ErrDraining = errors.New("the node is draining: its sessions move to other members")

// DrainReport is the body of POST /v1/node/drain: what the drain of this member did.
type DrainReport struct {
	// Status is "drained": the member runs no session any more and left the cluster's
	// placement; stop its process.
	Status string `json:"status"`
	// Node is the member's cluster address.
	Node string `json:"node"`
	// Sessions is how many session activations the member had when the drain began.
	Sessions int `json:"sessions"`
	// Cut are the sessions whose calls still ran when the drain timeout passed: they were
	// handed over anyway, and the member continuing each runs those calls again.
	Cut []string `json:"cut"`
	// StartedAt is when the drain began; TookMS how long it took, in milliseconds.
	StartedAt time.Time `json:"started_at"`
	TookMS    int64     `json:"took_ms"`
}

// drainNode serves POST /v1/node/drain (admin): it drains the member (Config.Drain) and
// answers once it drained. The drain runs to its end even when the caller goes away; a
// second call waits for the same drain and gets the same report.
func (h *Handler) drainNode(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Drain == nil {
		writeError(w, errorf(CodeUnsupported, "this gateway cannot drain its node"))
		return
	}
	rep, err := h.cfg.Drain(r.Context())
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		writeError(w, hidden(CodeUnavailable, "the drain goes on; call again to wait for its end", err))
		return
	case err != nil:
		writeError(w, hidden(CodeUnavailable, "the node could not drain; see its log", err))
		return
	}
	if rep.Cut == nil {
		rep.Cut = []string{}
	}
	writeJSON(w, http.StatusOK, rep)
}
