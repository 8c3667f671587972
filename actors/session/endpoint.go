package session

import (
	"strings"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/messages"
)

// A session keeps its model endpoint. The node that starts a session records the
// provider and base URL its calls go to in session_started's config (with the model;
// never the key). A node configured for another endpoint does not continue the session:
// commands that would continue it (ProvideInput, Resume) are refused with
// FAILED_PRECONDITION, and an activation there starts none of its LLM calls (the
// session waits, unchanged, for a node with the right endpoint), unless the node allows
// it (Config.AllowEndpointChange, --allow-endpoint-change). Sessions recorded before
// the endpoint was (empty provider) continue anywhere, as do sessions on a node whose
// endpoint is unknown (an in-process provider).

// Endpoint names a model endpoint: the wire protocol or kind of provider and its base
// URL. It never holds a key.
type Endpoint struct {
	// Provider is "openai", "anthropic" or "demo" (the built-in demo model), or another
	// name for an embedded provider. Empty means unknown.
	Provider string
	// BaseURL is the API's base URL; empty for the demo model (its port changes with
	// every start).
	BaseURL string
}

// String describes the endpoint for messages and logs.
func (e Endpoint) String() string {
	switch {
	case e.Provider == "":
		return "an unknown endpoint"
	case e.BaseURL == "":
		return e.Provider
	}
	return e.Provider + " at " + e.BaseURL
}

// normalised is e with the base URL's trailing slashes removed and the provider in
// lower case, so equivalent spellings compare equal.
func (e Endpoint) normalised() Endpoint {
	return Endpoint{Provider: strings.ToLower(strings.TrimSpace(e.Provider)), BaseURL: strings.TrimRight(strings.TrimSpace(e.BaseURL), "/")}
}

// recordedEndpoint is the endpoint a session's config records (zero for a session
// recorded before endpoints were).
func recordedEndpoint(cfg *messages.SessionConfig) Endpoint {
	return Endpoint{Provider: cfg.GetProvider(), BaseURL: cfg.GetBaseUrl()}
}

// endpointChanged returns the refusal of continuing a session recorded with cfg on a
// node whose endpoint is node, or nil when it may continue there: same endpoint,
// either one unknown, or allowed.
func endpointChanged(sessionID string, cfg *messages.SessionConfig, node Endpoint, allow bool) error {
	rec := recordedEndpoint(cfg).normalised()
	node = node.normalised()
	if allow || rec.Provider == "" || node.Provider == "" || rec == node {
		return nil
	}
	return refuse(messages.ErrorReason_FAILED_PRECONDITION,
		"session %s was started on %s (model %s); this node is configured for %s: continuing here would send the session's calls to another model. "+
			"Continue it on a node configured for the session's endpoint, or start this one with --allow-endpoint-change to continue it here",
		sessionID, rec, cfg.GetModel(), node)
}

// endpointRefusal is endpointChanged for the grain's session on this node.
func (g *Grain) endpointRefusal() error {
	if g.state.GetSeq() == 0 || Terminal(g.state) {
		return nil
	}
	return endpointChanged(g.id, g.state.GetConfig(), g.deps.Config.Endpoint, g.deps.Config.AllowEndpointChange)
}

// endpointBlocked reports whether this node must not make the session's LLM calls (its
// endpoint differs from the recorded one and no override is set); it logs why once per
// activation. An allowed change is logged once too.
func (g *Grain) endpointBlocked() bool {
	if g.state.GetSeq() == 0 || Terminal(g.state) {
		return false
	}
	rec := recordedEndpoint(g.state.GetConfig())
	if err := g.endpointRefusal(); err != nil {
		if !g.endpointLogged {
			g.endpointLogged = true
			g.log.Error("session not continued on this node: its model endpoint differs", "recorded", rec.String(), "node", g.deps.Config.Endpoint.String(), "error", err)
		}
		return true
	}
	if !g.endpointLogged && g.deps.Config.AllowEndpointChange && rec.Provider != "" && g.deps.Config.Endpoint.Provider != "" &&
		rec.normalised() != g.deps.Config.Endpoint.normalised() {
		g.endpointLogged = true
		g.log.Warn("continuing the session on another model endpoint (--allow-endpoint-change)", "recorded", rec.String(), "node", g.deps.Config.Endpoint.String())
	}
	return false
}

// continuing runs a command that continues the session (its next LLM calls follow) as
// command does, after refusing it on a node configured for another endpoint.
func (g *Grain) continuing(ctx cluster.GrainContext, cmdID string, decide func() ([]*messages.Event, error)) (*messages.CommandResponse, error) {
	if g.ready(ctx) == nil {
		if err := g.endpointRefusal(); err != nil {
			g.updateIdle(ctx)
			return nil, grainError(err)
		}
	}
	return g.command(ctx, cmdID, decide)
}
