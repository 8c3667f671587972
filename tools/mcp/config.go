package mcp

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// ServerConfig is one MCP server: a command run as a child process speaking MCP on its
// stdin and stdout, or the URL of a streamable HTTP endpoint. Exactly one of Command and
// URL is set.
type ServerConfig struct {
	// Name prefixes the server's tools ("{Name}__{tool}"): letters, digits, '-' and
	// single '_' between them (no "__", no leading or trailing '_' or '-').
	Name string
	// Command is the program of a stdio server, looked up in PATH.
	Command string
	// Args are the command's arguments.
	Args []string
	// Env is laid over the minimal environment the child inherits (see the package doc).
	Env map[string]string
	// Dir is the command's working directory ("" = the node's).
	Dir string
	// URL is the streamable HTTP endpoint of an HTTP server (http or https).
	URL string
	// Headers are sent with every HTTP request (e.g. Authorization).
	Headers map[string]string
}

// Transport kinds.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// Transport is TransportStdio or TransportHTTP.
func (c ServerConfig) Transport() string {
	if c.URL != "" {
		return TransportHTTP
	}
	return TransportStdio
}

// serverName is a valid server name: no "__" inside, so "{server}__{tool}" names the
// server unambiguously.
var serverName = regexp.MustCompile(`^[a-zA-Z0-9]+([_-][a-zA-Z0-9]+)*$`)

// ValidServerName reports whether name may name a server.
func ValidServerName(name string) bool { return serverName.MatchString(name) && len(name) <= 32 }

// Validate reports what is wrong with c.
func (c ServerConfig) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("mcp server: name is required")
	case !ValidServerName(c.Name):
		return fmt.Errorf("mcp server %q: name must be 1 to 32 letters, digits, '-' or single '_' between them (tools are named {server}__{tool})", c.Name)
	case c.Command == "" && c.URL == "":
		return fmt.Errorf("mcp server %s: set command (a stdio server) or url (a streamable HTTP server)", c.Name)
	case c.Command != "" && c.URL != "":
		return fmt.Errorf("mcp server %s: command and url are exclusive: a server is stdio or HTTP", c.Name)
	}
	if c.URL != "" {
		if len(c.Args) > 0 || len(c.Env) > 0 || c.Dir != "" {
			return fmt.Errorf("mcp server %s: args, env and dir belong to a stdio server (command), not an HTTP one (url)", c.Name)
		}
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("mcp server %s: url %q is not an http:// or https:// URL", c.Name, c.URL)
		}
		for k := range c.Headers {
			if k == "" || strings.ContainsAny(k, " :\r\n") {
				return fmt.Errorf("mcp server %s: header name %q is not valid", c.Name, k)
			}
		}
		return nil
	}
	if len(c.Headers) > 0 {
		return fmt.Errorf("mcp server %s: headers belong to an HTTP server (url), not a stdio one (command)", c.Name)
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("mcp server %s: env name %q is not valid", c.Name, k)
		}
	}
	return nil
}

// ToolName is the name a server's tool is offered under: "{server}__{tool}".
func ToolName(server, tool string) string { return server + "__" + tool }
