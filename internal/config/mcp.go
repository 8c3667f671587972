package config

import (
	"fmt"
	"net/url"

	"go.yaml.in/yaml/v3"

	mcptool "github.com/fathom-agents/fathom/tools/mcp"
)

// mcpKeys are the keys of an mcp_servers entry.
var mcpKeys = map[string]func(s *MCPServer, p *parser, path string, v *yaml.Node) error{
	"name": func(s *MCPServer, p *parser, path string, v *yaml.Node) (err error) {
		if s.Name, err = p.str(v, path); err == nil && !mcptool.ValidServerName(s.Name) {
			err = p.err(v, path, fmt.Sprintf("%q is not a valid server name: 1 to 32 letters, digits, '-' or single '_' between them (tools are named {server}__{tool})", s.Name))
		}
		return err
	},
	"command": func(s *MCPServer, p *parser, path string, v *yaml.Node) (err error) {
		if s.Command, err = p.str(v, path); err == nil && s.Command == "" {
			err = p.err(v, path, "must not be empty")
		}
		return err
	},
	"args": func(s *MCPServer, p *parser, path string, v *yaml.Node) (err error) {
		s.Args, err = p.strList(v, path)
		return err
	},
	"env": func(s *MCPServer, p *parser, path string, v *yaml.Node) (err error) {
		s.Env, err = p.strMap(v, path)
		return err
	},
	"url": func(s *MCPServer, p *parser, path string, v *yaml.Node) (err error) {
		if s.URL, err = p.str(v, path); err != nil {
			return err
		}
		if u, perr := url.Parse(s.URL); perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return p.err(v, path, fmt.Sprintf("%q is not an http:// or https:// URL", s.URL))
		}
		return nil
	},
	"headers": func(s *MCPServer, p *parser, path string, v *yaml.Node) (err error) {
		s.Headers, err = p.strMap(v, path)
		return err
	},
}

func init() {
	register("mcp_servers", parseMCPServers)
}

// parseMCPServers reads the mcp_servers list.
func parseMCPServers(p *parser, f *File, key string, _, v *yaml.Node) error {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		return p.err(v, key, "must be a list of servers (- name: ...)")
	}
	names := map[string]int{}
	for i, item := range v.Content {
		path := fmt.Sprintf("%s[%d]", key, i)
		s := MCPServer{Line: item.Line}
		lines := map[string]int{}
		err := p.mapping(item, path, func(k string, kn, vn *yaml.Node) error {
			parse, ok := mcpKeys[k]
			if !ok {
				return p.err(kn, join(path, k), "unknown key (want "+keyList(mcpKeys)+")")
			}
			lines[k] = vn.Line
			return parse(&s, p, join(path, k), vn)
		})
		if err != nil {
			return err
		}
		if err := checkServer(p, item, path, s, lines); err != nil {
			return err
		}
		if first, dup := names[s.Name]; dup {
			return &Error{File: p.file, Line: lines["name"], Key: path + ".name", Msg: fmt.Sprintf("duplicate server name %q (first at line %d)", s.Name, first)}
		}
		names[s.Name] = lines["name"]
		f.MCPServers = append(f.MCPServers, s)
	}
	return nil
}

// checkServer checks what a single key cannot: a name, and one transport's keys.
func checkServer(p *parser, item *yaml.Node, path string, s MCPServer, lines map[string]int) error {
	at := func(key, msg string) error {
		line := item.Line
		if l, ok := lines[key]; ok {
			line = l
		}
		return &Error{File: p.file, Line: line, Key: join(path, key), Msg: msg}
	}
	switch {
	case s.Name == "":
		return &Error{File: p.file, Line: item.Line, Key: path, Msg: "name is required"}
	case s.Command == "" && s.URL == "":
		return &Error{File: p.file, Line: item.Line, Key: path, Msg: "set command (a stdio server) or url (a streamable HTTP server)"}
	case s.Command != "" && s.URL != "":
		return at("url", "a server has command (stdio) or url (streamable HTTP), not both")
	case s.URL != "" && s.Args != nil:
		return at("args", "args belong to a stdio server (command), not an HTTP one (url)")
	case s.URL != "" && s.Env != nil:
		return at("env", "env belongs to a stdio server (command), not an HTTP one (url): use headers")
	case s.Command != "" && s.Headers != nil:
		return at("headers", "headers belong to an HTTP server (url), not a stdio one (command)")
	}
	cfg := mcptool.ServerConfig{Name: s.Name, Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers}
	if err := cfg.Validate(); err != nil {
		return &Error{File: p.file, Line: item.Line, Key: path, Msg: err.Error()}
	}
	return nil
}
