package config

import (
	"fmt"
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A2AAgent is one entry of a2a_agents: a remote A2A agent the planner may delegate a step
// to, as to an agent of the node's own (a plan step of type Name).
type A2AAgent struct {
	// Name names the agent (and the step type that delegates to it).
	Name string
	// URL is the agent's base URL (its card is URL/.well-known/agent-card.json).
	URL string
	// Token, when set, is the bearer token the node sends it.
	Token string
	// Description is what the planner reads; empty: the remote card's description.
	Description string
	// Line is where the entry starts.
	Line int
}

// a2aAgentKeys are the keys of an a2a_agents entry.
var a2aAgentKeys = map[string]func(a *A2AAgent, p *parser, path string, v *yaml.Node) error{
	"name": func(a *A2AAgent, p *parser, path string, v *yaml.Node) (err error) {
		if a.Name, err = p.str(v, path); err == nil && !validAgentName(a.Name) {
			err = p.err(v, path, fmt.Sprintf("%q is not a valid agent name: a letter, then up to 31 letters, digits, '_' or '-'", a.Name))
		}
		return err
	},
	"url": func(a *A2AAgent, p *parser, path string, v *yaml.Node) (err error) {
		if a.URL, err = p.str(v, path); err != nil {
			return err
		}
		if u, perr := url.Parse(a.URL); perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return p.err(v, path, fmt.Sprintf("%q is not an http:// or https:// URL", a.URL))
		}
		return nil
	},
	"token": func(a *A2AAgent, p *parser, path string, v *yaml.Node) (err error) {
		a.Token, err = p.str(v, path)
		return err
	},
	"description": func(a *A2AAgent, p *parser, path string, v *yaml.Node) (err error) {
		if a.Description, err = p.str(v, path); err == nil && strings.TrimSpace(a.Description) == "" {
			err = p.err(v, path, "must not be empty (leave it out to use the agent card's)")
		}
		return err
	},
}

// validAgentName is core's rule for agent names (a letter, then letters, digits, '_'
// and '-', at most 32).
func validAgentName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || !(r >= '0' && r <= '9' || r == '_' || r == '-')) {
			return false
		}
	}
	return true
}

func init() {
	register("a2a_agents", parseA2AAgents)
}

// parseA2AAgents reads the a2a_agents list. A name another agent (or a built-in) takes
// is refused when the node starts (its agent registry checks every name).
func parseA2AAgents(p *parser, f *File, key string, _, v *yaml.Node) error {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		return p.err(v, key, "must be a list of remote agents (- name: ..., url: ...)")
	}
	names := map[string]int{}
	for i, item := range v.Content {
		path := fmt.Sprintf("%s[%d]", key, i)
		a := A2AAgent{Line: item.Line}
		lines := map[string]int{}
		err := p.mapping(item, path, func(k string, kn, vn *yaml.Node) error {
			parse, ok := a2aAgentKeys[k]
			if !ok {
				return p.err(kn, join(path, k), "unknown key (want "+keyList(a2aAgentKeys)+")")
			}
			lines[k] = vn.Line
			return parse(&a, p, join(path, k), vn)
		})
		if err != nil {
			return err
		}
		for _, k := range []string{"name", "url"} {
			if _, ok := lines[k]; !ok {
				return p.err(item, join(path, k), "is required")
			}
		}
		if first, dup := names[a.Name]; dup {
			return &Error{File: p.file, Line: lines["name"], Key: path + ".name", Msg: fmt.Sprintf("duplicate agent name %q (first at line %d)", a.Name, first)}
		}
		names[a.Name] = lines["name"]
		f.A2AAgents = append(f.A2AAgents, a)
	}
	return nil
}
