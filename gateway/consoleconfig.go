package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/fathom-agents/fathom/gateway/console"
)

// DefaultConsoleScopes are the scopes the console asks the OIDC issuer for when
// ConsoleOIDC.Scopes is empty.
const DefaultConsoleScopes = "openid profile"

// ConsoleOIDC is the OIDC client the web console signs in as: the browser runs the
// authorization-code flow with PKCE against Issuer as the public client ClientID, with
// the console's own URL (origin + /console/) as its redirect URI, and uses the token
// it gets as its bearer token. The gateway verifies that token like any other (its
// Authenticator must accept the issuer's JWTs).
type ConsoleOIDC struct {
	// Issuer is the issuer URL (its discovery document is Issuer +
	// /.well-known/openid-configuration). Required.
	Issuer string
	// ClientID is the console's client id at the issuer. Required.
	ClientID string
	// Scopes is the space-separated scope of the authorization request. Default
	// DefaultConsoleScopes.
	Scopes string
}

// ConsoleConfig is the body of GET /v1/console/config: what the console needs before
// it has a token. OIDC is null when the console signs in with a pasted token only.
type ConsoleConfig struct {
	// OIDC is the issuer and client to sign in with, nil when none is configured.
	OIDC *ConsoleOIDCConfig `json:"oidc"`
}

// ConsoleOIDCConfig is ConsoleConfig's oidc object.
type ConsoleOIDCConfig struct {
	// Issuer is the OIDC issuer URL.
	Issuer string `json:"issuer"`
	// ClientID is the console's client id.
	ClientID string `json:"client_id"`
	// Scopes is the space-separated scope to ask for.
	Scopes string `json:"scopes"`
}

// validate checks c (nil: no OIDC sign-in).
func (c *ConsoleOIDC) validate() error {
	if c == nil {
		return nil
	}
	if c.ClientID == "" {
		return fmt.Errorf("gateway: the console's OIDC client id is empty")
	}
	if _, err := issuerOrigin(c.Issuer); err != nil {
		return fmt.Errorf("gateway: console OIDC issuer: %w", err)
	}
	return nil
}

// issuerOrigin returns the scheme://host[:port] of an http(s) issuer URL.
func issuerOrigin(issuer string) (string, error) {
	u, err := url.Parse(issuer)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http:// or https:// URL", issuer)
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host), nil
}

// consoleConfig serves GET /v1/console/config to anyone: it names no secret (a public
// client's id and its issuer are in every sign-in redirect anyway).
func (h *Handler) consoleConfig(w http.ResponseWriter, _ *http.Request) {
	var out ConsoleConfig
	if c := h.cfg.ConsoleOIDC; c != nil {
		scopes := c.Scopes
		if scopes == "" {
			scopes = DefaultConsoleScopes
		}
		out.OIDC = &ConsoleOIDCConfig{Issuer: c.Issuer, ClientID: c.ClientID, Scopes: scopes}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// consoleHandler is the console's file server; with ConsoleOIDC its
// Content-Security-Policy lets the pages reach the issuer's origin (discovery and the
// token endpoint).
func (h *Handler) consoleHandler() http.Handler {
	var origins []string
	if c := h.cfg.ConsoleOIDC; c != nil {
		if o, err := issuerOrigin(c.Issuer); err == nil { // Validate checked it
			origins = append(origins, o)
		}
	}
	return console.Handler("/console/", origins...)
}
