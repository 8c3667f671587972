package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	fathomapi "github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/internal/backends"
)

// modelDialTimeout bounds the check that the model endpoint takes connections.
const modelDialTimeout = 5 * time.Second

// checkModelEndpoint fails at once when the configured model base URL takes no
// connections (a typo in OPENAI_BASE_URL: connection refused, no such host), instead of
// letting the session's first model call retry for minutes. A URL reached through a
// proxy (HTTP(S)_PROXY) is not checked: the proxy decides.
func checkModelEndpoint(ctx context.Context, c fathomapi.LLM) error {
	if c.BaseURL == "" || c.Provider != nil {
		return nil
	}
	api := backends.LLMAPIs.Choose(c.API, backends.LLMConfig{})
	env := backends.LLMAPIs.EnvVar(api, "BaseURL")
	if env == "" {
		env = "the " + api + " base URL"
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return usageError("%s=%q is not an http(s) URL", env, c.BaseURL)
	}
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err != nil || p != nil {
		return nil
	}
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	dctx, cancel := context.WithTimeout(ctx, modelDialTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", host)
	if err != nil {
		return &exitError{code: 1, msg: fmt.Sprintf("the model endpoint %s=%s does not answer: %v (check the URL; unset it and the API key for the built-in demo model)", env, c.BaseURL, err)}
	}
	return conn.Close()
}
