// Package config reads Fathom's configuration file (`fathom run --config FILE`, `fathom
// node --config FILE`, env FATHOM_CONFIG): YAML whose sections configure what flags
// cannot say well — the agents of the node's own, the MCP servers whose tools the
// node offers, the tools whose calls wait for a human's approval, the tenants' quotas
// and fair shares (tenants.go) and the gateway's identities (an OIDC issuer, static API
// keys; identity.go).
//
//	agents:
//	  - name: analyst
//	    description: Reads order data and explains anomalies
//	    prompt_file: analyst.md.tmpl      # or prompt: "..." inline
//	    tools: [orders__lookup_order, write_artifact]
//	    model: gpt-4o-mini
//	    max_iterations: 8
//
//	mcp_servers:
//	  - name: orders                      # stdio
//	    command: node
//	    args: [orders-server.js]
//	    env: {ORDERS_DB: /tmp/orders.json}
//	  - name: docs                        # streamable HTTP
//	    url: http://127.0.0.1:9000/mcp
//	    headers: {Authorization: Bearer xyz}
//	approval:
//	  tools: [code_execute, orders__cancel_order]
//	max_tool_result_bytes: 262144
//	llm_max_concurrent: 50
//	tenant_defaults: {weight: 1, llm_calls_per_minute: 120}
//	tenants:
//	  acme: {weight: 3, llm_calls_per_minute: 600}
//	memory: {retrieval: hybrid, retrieval_weights: 1/1}
//	drain_timeout: 45s
//	journal: bolt                       # bolt | postgres | memory
//	oidc_issuer: https://login.example.com/realms/fathom
//	api_keys:
//	  - {id: 5f0c2a9d41e7b386, name: ci-bot, tenant: acme, roles: [operator], hash: '$argon2id$...'}
//	pprof: true                         # /debug/pprof/ on the metrics listener
//	webhook_secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw   # or env FATHOM_WEBHOOK_SECRET
//
// Reading is strict: an unknown key, a duplicate name or a bad value fails with the
// file, the line and the key, e.g. "fathom.yaml:7: mcp_servers[1].comand: unknown key".
// Each section registers itself from the file that parses it (register), so a new one is
// one parser and one line in its own file.
//
// A stdio server's command runs in the directory of the configuration file, so relative
// paths in args resolve next to it; an agent's prompt_file is read next to it too.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	mcptool "github.com/fathom-agents/fathom/tools/mcp"
)

// EnvFile names the environment variable that gives the configuration file when
// --config is not set.
const EnvFile = "FATHOM_CONFIG"

// MaxFileSize bounds the configuration file.
const MaxFileSize = 1 << 20

// File is a read configuration file.
type File struct {
	// Path is the file as given.
	Path string
	// MCPServers are the mcp_servers entries, in file order.
	MCPServers []MCPServer
	// Agents are the agents entries, in file order.
	Agents []Agent
	// A2AAgents are the a2a_agents entries, in file order.
	A2AAgents []A2AAgent
	// Approval is the approval section (approval.go).
	Approval Approval
	// MaxToolResultBytes is max_tool_result_bytes, the cap of one tool call's result
	// (toolresult.go); 0 when the file does not set it.
	MaxToolResultBytes int
	// TenantDefaults are tenant_defaults over DefaultTenantLimits: the limits of every
	// tenant Tenants does not list (tenants.go).
	TenantDefaults TenantLimits
	// Tenants are the tenants entries, each over TenantDefaults; nil when none.
	Tenants map[string]TenantLimits
	// LLMMaxConcurrent is llm_max_concurrent (tenants.go); LLMMaxConcurrentSet is true
	// when the file sets it.
	LLMMaxConcurrent    int
	LLMMaxConcurrentSet bool
	// MembersReadOwnOnly is members_read_own_only (tenants.go): a member sees only the
	// sessions it started. MembersReadOwnOnlySet is true when the file sets it.
	MembersReadOwnOnly    bool
	MembersReadOwnOnlySet bool
	// Identity is the gateway's identities besides its static tokens: the OIDC keys
	// and api_keys (identity.go).
	Identity Identity
	// Memory is the memory section (memory.go).
	Memory Memory
	// Pprof is pprof (pprof.go): serve the Go profiles on the metrics listener.
	// PprofSet is true when the file sets it.
	Pprof    bool
	PprofSet bool
	// DrainTimeout is drain_timeout (drain.go); DrainTimeoutSet is true when the file
	// sets it.
	DrainTimeout    time.Duration
	DrainTimeoutSet bool
	// Journal is journal, the event journal's backend by name ("bolt", "postgres",
	// "memory"; "" when the file does not set it). The reader checks only that it is a
	// name: the binary checks it against its backends. --journal and FATHOM_JOURNAL
	// take precedence.
	Journal string
	// WebhookSecret is webhook_secret (webhooks.go): the secret that signs the
	// sessions' webhook notifications; "" when the file does not set it.
	WebhookSecret string

	// The tenant entries as parsed, resolved into TenantDefaults and Tenants.
	tenantDefaults *tenantEntry
	tenants        map[string]*tenantEntry
}

// MCPServer is one entry of mcp_servers: a stdio server (command, args, env) or a
// streamable HTTP server (url, headers).
type MCPServer struct {
	Name    string
	Command string
	Args    []string
	Env     map[string]string
	URL     string
	Headers map[string]string
	// Line is where the entry starts in the file.
	Line int
}

// Error is a problem at a place in the file: "FILE:LINE: KEY: MESSAGE".
type Error struct {
	// File is the file as given.
	File string
	// Line is the 1-based line (0 when the problem is the whole file).
	Line int
	// Key is the key's path, e.g. "mcp_servers[1].command" ("" for the whole file).
	Key string
	// Msg says what is wrong.
	Msg string
	// Err is the cause's class, when there is one (e.g. an unreadable prompt file's).
	Err error
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// section parses one top-level key's value into f.
type section func(p *parser, f *File, key string, k, value *yaml.Node) error

// sections are the top-level keys by name. Each is registered by the file that parses
// it (register, from that file's init), so adding a section touches no shared table.
var sections = map[string]section{}

// register adds the top-level key name, parsed by parse. A key registered twice is a
// programming error: it panics at start.
func register(name string, parse section) {
	if _, dup := sections[name]; dup {
		panic("config: section " + name + " registered twice")
	}
	sections[name] = parse
}

// Load reads and checks the file at path.
func Load(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, &Error{File: path, Msg: fmt.Sprintf("larger than %d bytes", MaxFileSize)}
	}
	return Parse(path, data)
}

// Parse checks data, the contents of the file named path.
func Parse(path string, data []byte) (*File, error) {
	p := &parser{file: path}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return empty(path), nil // nothing configured
		}
		return nil, &Error{File: path, Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, &Error{File: path, Line: more.Line, Msg: "more than one YAML document: a configuration file holds one"}
	}
	if len(doc.Content) == 0 {
		return empty(path), nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return empty(path), nil
	}
	f := &File{Path: path}
	if root.Kind != yaml.MappingNode {
		return nil, p.err(root, "", "the file must be a mapping of sections (mcp_servers: ...)")
	}
	err := p.mapping(root, "", func(key string, k, v *yaml.Node) error {
		parse, ok := sections[key]
		if !ok {
			return p.err(k, key, "unknown key (want "+keyList(sections)+")")
		}
		return parse(p, f, key, k, v)
	})
	if err != nil {
		return nil, err
	}
	if err := checkAgentTools(f); err != nil {
		return nil, err
	}
	resolveTenants(f)
	return f, nil
}

// parseJournal reads journal: a backend's name.
func init() { register("journal", parseJournal) } // the event journal's backend by name (--journal)

func parseJournal(p *parser, f *File, key string, _, v *yaml.Node) error {
	s, err := p.str(v, key)
	if err != nil {
		return err
	}
	if s = strings.TrimSpace(s); s == "" || strings.ContainsAny(s, " \t/") {
		return p.err(v, key, "want a journal backend's name: bolt, postgres or memory")
	}
	f.Journal = s
	return nil
}

// empty is the File of a file that configures nothing.
func empty(path string) *File {
	f := &File{Path: path}
	resolveTenants(f)
	return f
}

// MCP returns the MCP servers as the node takes them; stdio servers run in the file's
// directory.
func (f *File) MCP() []mcptool.ServerConfig {
	out := make([]mcptool.ServerConfig, 0, len(f.MCPServers))
	dir := filepath.Dir(f.Path)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	for _, s := range f.MCPServers {
		c := mcptool.ServerConfig{Name: s.Name, Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers}
		if c.Command != "" {
			c.Dir = dir
		}
		out = append(out, c)
	}
	return out
}

// parser reports errors at nodes of one file.
type parser struct{ file string }

func (p *parser) err(n *yaml.Node, key, msg string) error {
	return &Error{File: p.file, Line: n.Line, Key: key, Msg: msg}
}

// mapping calls fn for each key of the mapping n (at path), refusing aliases, non-string
// and duplicate keys.
func (p *parser) mapping(n *yaml.Node, path string, fn func(key string, k, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return p.err(n, path, "must be a mapping (key: value)")
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		full := join(path, k.Value)
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return p.err(k, path, "keys must be non-empty strings")
		}
		if line, dup := seen[k.Value]; dup {
			return p.err(k, full, fmt.Sprintf("duplicate key (first at line %d)", line))
		}
		seen[k.Value] = k.Line
		if v.Kind == yaml.AliasNode {
			return p.err(v, full, "YAML aliases are not supported here")
		}
		if err := fn(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// str reads a scalar string value (numbers and booleans as written).
func (p *parser) str(n *yaml.Node, path string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.err(n, path, "must be a string")
	}
	return n.Value, nil
}

// strList reads a sequence of scalar strings.
func (p *parser) strList(n *yaml.Node, path string) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.err(n, path, "must be a list of strings ([a, b])")
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		s, err := p.str(item, fmt.Sprintf("%s[%d]", path, i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// strMap reads a mapping of strings to scalar strings.
func (p *parser) strMap(n *yaml.Node, path string) (map[string]string, error) {
	out := map[string]string{}
	err := p.mapping(n, path, func(key string, _, v *yaml.Node) error {
		s, err := p.str(v, join(path, key))
		out[key] = s
		return err
	})
	return out, err
}

func keyList[V any](m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
