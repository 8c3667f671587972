package session

import (
	"log/slog"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// endpointRefusal is core.EndpointChanged for session id, in state st, on this node
// (nil for a session that does not exist yet or has ended).
func endpointRefusal(d *Deps, id string, st *messages.SessionState) error {
	if st.GetSeq() == 0 || core.Terminal(st) {
		return nil
	}
	return core.EndpointChanged(id, st.GetConfig(), d.Config.Endpoint, d.Config.AllowEndpointChange)
}

// endpointCheck is an activation's check of its session's recorded model endpoint
// against the node's: it logs a refused or an allowed change once.
type endpointCheck struct {
	// logged is set once the activation logged that the endpoints differ.
	logged bool
}

// blocked reports whether this node must not make the LLM calls of session id, in state
// st (its endpoint differs from the recorded one and no override is set); it logs why
// once per activation. An allowed change is logged once too.
func (e *endpointCheck) blocked(d *Deps, id string, st *messages.SessionState, log *slog.Logger) bool {
	if st.GetSeq() == 0 || core.Terminal(st) {
		return false
	}
	rec := core.RecordedEndpoint(st.GetConfig())
	if err := endpointRefusal(d, id, st); err != nil {
		if !e.logged {
			e.logged = true
			log.Error("session not continued on this node: its model endpoint differs", "recorded", rec.String(), "node", d.Config.Endpoint.String(), "error", err)
		}
		return true
	}
	if !e.logged && d.Config.AllowEndpointChange && rec.Provider != "" && d.Config.Endpoint.Provider != "" &&
		rec.Normalised() != d.Config.Endpoint.Normalised() {
		e.logged = true
		log.Warn("continuing the session on another model endpoint (--allow-endpoint-change)", "recorded", rec.String(), "node", d.Config.Endpoint.String())
	}
	return false
}
