package core

import (
	"strings"

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

// Normalised is e with the base URL's trailing slashes removed and the provider in
// lower case, so equivalent spellings compare equal.
func (e Endpoint) Normalised() Endpoint {
	return Endpoint{Provider: strings.ToLower(strings.TrimSpace(e.Provider)), BaseURL: strings.TrimRight(strings.TrimSpace(e.BaseURL), "/")}
}

// RecordedEndpoint is the endpoint a session's config records (zero for a session
// recorded before endpoints were).
func RecordedEndpoint(cfg *messages.SessionConfig) Endpoint {
	return Endpoint{Provider: cfg.GetProvider(), BaseURL: cfg.GetBaseUrl()}
}

// EndpointChanged returns the refusal of continuing a session recorded with cfg on a
// node whose endpoint is node, or nil when it may continue there: same endpoint,
// either one unknown, or allowed.
func EndpointChanged(sessionID string, cfg *messages.SessionConfig, node Endpoint, allow bool) error {
	rec := RecordedEndpoint(cfg).Normalised()
	node = node.Normalised()
	if allow || rec.Provider == "" || node.Provider == "" || rec == node {
		return nil
	}
	return refuse(messages.ErrorReason_FAILED_PRECONDITION,
		"session %s was started on %s (model %s); this node is configured for %s: continuing here would send the session's calls to another model. "+
			"Continue it on a node configured for the session's endpoint, or start this one with --allow-endpoint-change to continue it here",
		sessionID, rec, cfg.GetModel(), node)
}
