package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/invopop/jsonschema"
	jsv "github.com/santhosh-tekuri/jsonschema/v6"
)

// SandboxMode says where a tool runs.
type SandboxMode string

const (
	// SandboxNone tools run in the Fathom process.
	SandboxNone SandboxMode = "none"
	// SandboxExternal tools run in an external sandbox reached over FSP.
	SandboxExternal SandboxMode = "external"
)

// Tool is one capability the LLM can call.
type Tool interface {
	// Name is the tool's identifier as the LLM sees it ([a-zA-Z0-9_-]{1,64}).
	Name() string
	// Description tells the LLM what the tool does and when to use it.
	Description() string
	// Schema is the JSON Schema of the arguments object.
	Schema() json.RawMessage
	// SandboxMode says where the tool runs.
	SandboxMode() SandboxMode
	// Execute runs the tool with arguments already validated against Schema. It honours
	// ctx (which carries the call's timeout). Errors may be *ToolError for a precise
	// type; anything else is normalised into an execution error.
	Execute(ctx context.Context, args json.RawMessage) (any, error)
}

// NoEffects is implemented by a tool whose call changes nothing outside the session: it
// reads or computes, and what it changes is only what the session records of the call
// (write_todos' list is the session's own state). Running such a call again is harmless,
// so the session may start it while its tool_called event is still being appended (the
// commit pipeline) instead of after: the call's result is committed behind it, often in
// the same append, and if that append fails the call runs again after the reload. A tool
// without NoEffects (or whose NoEffects returns false) starts only once its tool_called
// is durable, so a crash never repeats its effect unseen.
type NoEffects interface {
	// NoEffects reports whether a call of the tool changes nothing outside the session.
	NoEffects() bool
}

// HasNoEffects reports whether t declares that its calls change nothing outside the
// session (NoEffects).
func HasNoEffects(t Tool) bool {
	n, ok := t.(NoEffects)
	return ok && n.NoEffects()
}

// WithoutEffects returns t declaring that its calls change nothing outside the session
// (NoEffects): use it for a tool that only reads or computes.
func WithoutEffects(t Tool) Tool { return noEffects{t} }

// noEffects is a Tool that declares NoEffects.
type noEffects struct{ Tool }

func (noEffects) NoEffects() bool { return true }

// typed is a Tool whose arguments decode into A.
type typed[A any] struct {
	name, desc string
	mode       SandboxMode
	schema     json.RawMessage
	fn         func(context.Context, A) (any, error)
}

// New makes a tool from a function of a typed arguments struct. The JSON Schema is
// generated from A (json tags name the properties; `jsonschema:"..."` tags add enums
// and bounds; `jsonschema_description:"..."` tags add descriptions, which may contain
// commas, unlike a description= option inside `jsonschema:"..."`; fields without
// omitempty are required; additional properties are rejected).
func New[A any](name, description string, mode SandboxMode, fn func(ctx context.Context, args A) (any, error)) (Tool, error) {
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true}
	s := r.Reflect(new(A))
	s.Version = ""
	s.ID = ""
	schema, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("tool %s: schema: %w", name, err)
	}
	return &typed[A]{name: name, desc: description, mode: mode, schema: schema, fn: fn}, nil
}

// MustNew is New for tools defined in code, where a schema error is a programming error.
func MustNew[A any](name, description string, mode SandboxMode, fn func(ctx context.Context, args A) (any, error)) Tool {
	t, err := New(name, description, mode, fn)
	if err != nil {
		panic(err)
	}
	return t
}

func (t *typed[A]) Name() string             { return t.name }
func (t *typed[A]) Description() string      { return t.desc }
func (t *typed[A]) Schema() json.RawMessage  { return t.schema }
func (t *typed[A]) SandboxMode() SandboxMode { return t.mode }

func (t *typed[A]) Execute(ctx context.Context, args json.RawMessage) (any, error) {
	var a A
	if len(bytes.TrimSpace(args)) > 0 {
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, ValidationError(t.name, "arguments do not decode: "+err.Error(), Field{"params", args})
		}
	}
	return t.fn(ctx, a)
}

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Registry holds the tools a session may call, each with its compiled schema. It is
// safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	tools   map[string]Tool
	schemas map[string]*jsv.Schema
	// version counts the changes (Register, Replace, Unregister of a tool there was).
	version uint64
}

// NewRegistry returns a registry holding ts.
func NewRegistry(ts ...Tool) (*Registry, error) {
	r := &Registry{tools: map[string]Tool{}, schemas: map[string]*jsv.Schema{}}
	for _, t := range ts {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// ValidName reports whether name is a valid, LLM-safe tool name ([a-zA-Z0-9_-]{1,64}).
func ValidName(name string) bool { return namePattern.MatchString(name) }

// Register adds t, compiling its schema. Names must be unique and LLM-safe.
func (r *Registry) Register(t Tool) error {
	name, sch, err := compileTool(t)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[name]; dup {
		return fmt.Errorf("tools: %s registered twice", name)
	}
	r.tools[name], r.schemas[name] = t, sch
	r.version++
	return nil
}

// Replace registers t, replacing a tool of the same name if there is one (tools whose
// definition changes at run time, such as an MCP server's).
func (r *Registry) Replace(t Tool) error {
	name, sch, err := compileTool(t)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tools[name], r.schemas[name] = t, sch
	r.version++
	return nil
}

// Unregister removes the named tool and reports whether it was there.
func (r *Registry) Unregister(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.tools[name]
	if ok {
		delete(r.tools, name)
		delete(r.schemas, name)
		r.version++
	}
	return ok
}

// Version changes whenever the registry's tools do (a tool registered, replaced or
// removed): a caller that caches what Tools returned rebuilds it when Version moved.
func (r *Registry) Version() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.version
}

// compileTool checks t's name and compiles its schema.
func compileTool(t Tool) (string, *jsv.Schema, error) {
	name := t.Name()
	if !namePattern.MatchString(name) {
		return "", nil, fmt.Errorf("tools: name %q must match %s", name, namePattern)
	}
	doc, err := jsv.UnmarshalJSON(bytes.NewReader(t.Schema()))
	if err != nil {
		return "", nil, fmt.Errorf("tools: %s: schema is not JSON: %w", name, err)
	}
	c := jsv.NewCompiler()
	url := "mem://tools/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return "", nil, fmt.Errorf("tools: %s: schema: %w", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return "", nil, fmt.Errorf("tools: %s: schema does not compile: %w", name, err)
	}
	return name, sch, nil
}

// Get returns the named tool.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Tools lists the registered tools ordered by name (for the LLM request).
func (r *Registry) Tools() []Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Tool, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Validate checks args against the named tool's schema. Failures are validation
// ToolErrors whose message lists every violation ("/path: reason; ...") and whose
// context holds the arguments as sent.
func (r *Registry) Validate(name string, args json.RawMessage) *ToolError {
	r.mu.RLock()
	sch, ok := r.schemas[name]
	r.mu.RUnlock()
	if !ok {
		return ValidationError(name, fmt.Sprintf("unknown tool %q", name))
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	inst, err := jsv.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return ValidationError(name, "arguments are not valid JSON: "+err.Error(), Field{"params", string(args)})
	}
	if err := sch.Validate(inst); err != nil {
		return ValidationError(name, DescribeSchemaError(err), Field{"params", args})
	}
	return nil
}

// DescribeSchemaError renders an error of a JSON Schema validation (santhosh-tekuri
// jsonschema v6) as "location: reason" pairs joined by "; ", every violation listed;
// other errors as their text.
func DescribeSchemaError(err error) string {
	var ve *jsv.ValidationError
	if errors.As(err, &ve) {
		return describe(ve)
	}
	return err.Error()
}

// describe flattens a validation error into "location: reason" pairs.
func describe(ve *jsv.ValidationError) string {
	var parts []string
	var walk func(u jsv.OutputUnit)
	walk = func(u jsv.OutputUnit) {
		if u.Error != nil && len(u.Errors) == 0 {
			loc := u.InstanceLocation
			if loc == "" {
				loc = "arguments"
			}
			parts = append(parts, loc+": "+u.Error.String())
		}
		for _, e := range u.Errors {
			walk(e)
		}
	}
	walk(*ve.BasicOutput())
	if len(parts) == 0 {
		return ve.Error()
	}
	return strings.Join(parts, "; ")
}
