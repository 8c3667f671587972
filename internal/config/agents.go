package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/prompts"
	"github.com/fathom-agents/fathom/tools/builtin"
	"github.com/fathom-agents/fathom/webhooks"
)

// Agent is one entry of agents: an agent of the node's own, which a plan step of type
// Name is delegated to.
type Agent struct {
	// Name names the agent (and the step type that delegates to it).
	Name string
	// Description is what the planner reads to choose the agent.
	Description string
	// Prompt is the prompt template's text: the prompt key's, or the prompt_file's
	// contents.
	Prompt string
	// PromptFile is the prompt_file as resolved (relative to the file's directory); ""
	// for an inline prompt.
	PromptFile string
	// Tools are the tools the agent may call.
	Tools []string
	// Model is the agent's model ("" : the session's).
	Model string
	// MaxIterations bounds the model calls of one run (0: the node's bound).
	MaxIterations uint32
	// Memory is the agent's access to the user's long-term memory: read, readwrite or
	// none ("": none).
	Memory string
	// WebhookURL is where the node POSTs the signed notifications of the sessions
	// started for the agent (its MCP tool) whose start names no webhook_url ("": none).
	WebhookURL string
	// Line is where the entry starts; KeyLines where each of its keys' values is.
	Line     int
	KeyLines map[string]int
}

// agentKeys are the keys of an agents entry.
var agentKeys = map[string]func(a *Agent, p *parser, path string, v *yaml.Node) error{
	"name": func(a *Agent, p *parser, path string, v *yaml.Node) (err error) {
		a.Name, err = p.str(v, path)
		return err
	},
	"description": func(a *Agent, p *parser, path string, v *yaml.Node) (err error) {
		if a.Description, err = p.str(v, path); err == nil && strings.TrimSpace(a.Description) == "" {
			err = p.err(v, path, "must not be empty: the planner reads it to choose the agent")
		}
		return err
	},
	"prompt": func(a *Agent, p *parser, path string, v *yaml.Node) (err error) {
		if a.Prompt, err = p.str(v, path); err == nil && strings.TrimSpace(a.Prompt) == "" {
			err = p.err(v, path, "must not be empty")
		}
		return err
	},
	"prompt_file": func(a *Agent, p *parser, path string, v *yaml.Node) error {
		name, err := p.str(v, path)
		if err != nil {
			return err
		}
		file := name
		if !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(p.file), file)
		}
		data, err := readPromptFile(file)
		if err != nil {
			return p.err(v, path, fmt.Sprintf("cannot read the prompt file: %v", err))
		}
		if strings.TrimSpace(string(data)) == "" {
			return p.err(v, path, fmt.Sprintf("the prompt file %s is empty", file))
		}
		a.Prompt, a.PromptFile = string(data), file
		return nil
	},
	"tools": func(a *Agent, p *parser, path string, v *yaml.Node) (err error) {
		a.Tools, err = p.strList(v, path)
		return err
	},
	"model": func(a *Agent, p *parser, path string, v *yaml.Node) (err error) {
		if a.Model, err = p.str(v, path); err == nil && strings.TrimSpace(a.Model) == "" {
			err = p.err(v, path, "must not be empty (leave the key out for the session's model)")
		}
		return err
	},
	"memory": func(a *Agent, p *parser, path string, v *yaml.Node) (err error) {
		if a.Memory, err = p.str(v, path); err == nil {
			switch a.Memory {
			case core.MemoryRead, core.MemoryReadWrite, core.MemoryNone:
			default:
				err = p.err(v, path, fmt.Sprintf("%q: want read, readwrite or none", a.Memory))
			}
		}
		return err
	},
	"webhook_url": func(a *Agent, p *parser, path string, v *yaml.Node) error {
		u, err := p.str(v, path)
		if err != nil {
			return err
		}
		if err := webhooks.ValidateURL(u); err != nil {
			return p.err(v, path, err.Error())
		}
		a.WebhookURL = u
		return nil
	},
	"max_iterations": func(a *Agent, p *parser, path string, v *yaml.Node) error {
		s, err := p.str(v, path)
		if err != nil {
			return err
		}
		n, perr := strconv.ParseUint(s, 10, 32)
		if perr != nil || n == 0 {
			return p.err(v, path, fmt.Sprintf("%q is not a positive whole number", s))
		}
		a.MaxIterations = uint32(n)
		return nil
	},
}

// readPromptFile reads a prompt file, bounded like the configuration file.
func readPromptFile(file string) ([]byte, error) {
	info, err := os.Stat(file)
	switch {
	case err != nil:
		return nil, err
	case info.IsDir():
		return nil, errors.New(file + " is a directory")
	case info.Size() > MaxFileSize:
		return nil, fmt.Errorf("%s is larger than %d bytes", file, MaxFileSize)
	}
	return os.ReadFile(file)
}

func init() {
	register("agents", parseAgents)
}

// parseAgents reads the agents list. Tools are checked once the whole file is read
// (checkAgentTools), since mcp_servers may come after agents.
func parseAgents(p *parser, f *File, key string, _, v *yaml.Node) error {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		return p.err(v, key, "must be a list of agents (- name: ...)")
	}
	for i, item := range v.Content {
		path := fmt.Sprintf("%s[%d]", key, i)
		a := Agent{Line: item.Line, KeyLines: map[string]int{}}
		err := p.mapping(item, path, func(k string, kn, vn *yaml.Node) error {
			parse, ok := agentKeys[k]
			if !ok {
				return p.err(kn, join(path, k), "unknown key (want "+keyList(agentKeys)+")")
			}
			a.KeyLines[k] = vn.Line
			return parse(&a, p, join(path, k), vn)
		})
		if err != nil {
			return err
		}
		if err := checkAgent(p, path, a, f.Agents); err != nil {
			return err
		}
		f.Agents = append(f.Agents, a)
	}
	return nil
}

// checkAgent checks what a single key cannot: the name against the others and the
// built-ins, the required keys, prompt against prompt_file, and the prompt template.
func checkAgent(p *parser, path string, a Agent, before []Agent) error {
	at := func(key, msg string) error {
		line, ok := a.KeyLines[key]
		if !ok {
			return &Error{File: p.file, Line: a.Line, Key: path, Msg: msg}
		}
		return &Error{File: p.file, Line: line, Key: join(path, key), Msg: msg}
	}
	_, hasPrompt := a.KeyLines["prompt"]
	_, hasFile := a.KeyLines["prompt_file"]
	switch {
	case a.Name == "":
		return at("", "name is required")
	case a.Description == "":
		return at("", "description is required: the planner reads it to choose the agent")
	case hasPrompt && hasFile:
		return at("prompt", "an agent has prompt (inline) or prompt_file, not both")
	case !hasPrompt && !hasFile:
		return at("", "set prompt (the template inline) or prompt_file (a file next to this one)")
	}
	for _, other := range before {
		if strings.EqualFold(other.Name, a.Name) {
			return at("name", fmt.Sprintf("duplicate agent name %q (first at line %d)", a.Name, other.KeyLines["name"]))
		}
	}
	if _, err := core.NewAgents(a.spec()); err != nil {
		return at("name", strings.TrimPrefix(err.Error(), "agents[0]: "))
	}
	base, err := prompts.Default()
	if err != nil {
		return err
	}
	info := []prompts.AgentInfo{{Name: a.Name, StepType: a.Name, Description: a.Description}}
	if _, err := base.WithAgents(info, []prompts.AgentTemplate{{Name: a.Name, File: a.PromptFile, Text: a.Prompt, Tools: a.Tools}}); err != nil {
		key := "prompt"
		if hasFile {
			key = "prompt_file"
		}
		return at(key, "the prompt template does not parse or render: "+err.Error())
	}
	return nil
}

// checkAgentTools checks the agents' tools against what is knowable from the file: a
// built-in tool, or {server}__{tool} of a server of mcp_servers (whether that server
// offers the tool is known once it is connected: the node checks it at start).
func checkAgentTools(f *File) error {
	known := builtin.Names()
	servers := map[string]bool{}
	for _, s := range f.MCPServers {
		servers[s.Name] = true
	}
	for i, a := range f.Agents {
		for j, t := range a.Tools {
			if slices.Contains(known, t) {
				continue
			}
			server, _, ok := strings.Cut(t, "__")
			if ok && servers[server] {
				continue
			}
			msg := fmt.Sprintf("unknown tool %q: want a built-in tool (%s) or {server}__{tool} of a server in mcp_servers", t, strings.Join(known, ", "))
			if ok {
				msg = fmt.Sprintf("unknown tool %q: no server %q in mcp_servers", t, server)
			}
			return &Error{File: f.Path, Line: a.KeyLines["tools"], Key: fmt.Sprintf("agents[%d].tools[%d]", i, j), Msg: msg}
		}
	}
	return nil
}

// AgentToolError places tool, named by agent's tools and unknown to the node (no MCP
// server lists it), in the file: "FILE:LINE: agents[i].tools[j]: msg". It returns nil
// when no agent of the file names that tool.
func (f *File) AgentToolError(agent, tool, msg string) error {
	for i, a := range f.Agents {
		if a.Name != agent {
			continue
		}
		if j := slices.Index(a.Tools, tool); j >= 0 {
			return &Error{File: f.Path, Line: a.KeyLines["tools"], Key: fmt.Sprintf("agents[%d].tools[%d]", i, j), Msg: msg}
		}
	}
	return nil
}

// spec is the agent as the session core takes it.
func (a Agent) spec() core.AgentSpec {
	return core.AgentSpec{Name: a.Name, Description: a.Description, Prompt: a.Prompt, PromptFile: a.PromptFile,
		Tools: slices.Clone(a.Tools), Model: a.Model, MaxIterations: a.MaxIterations, Memory: a.Memory, WebhookURL: a.WebhookURL}
}

// AgentSpecs returns the agents as the session core takes them (core.Config.Agents).
func (f *File) AgentSpecs() []core.AgentSpec {
	out := make([]core.AgentSpec, 0, len(f.Agents))
	for _, a := range f.Agents {
		out = append(out, a.spec())
	}
	return out
}
