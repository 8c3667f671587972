package backends

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Backend describes one backend of a kind (a journal, a model API, an embedder, a vector
// store, an artifact store): everything about it that depends on its name — its
// defaults, the environment variables it reads, its validation, its opening — so that
// the node and the CLI never switch over backend names. Only Name and Open are required.
type Backend[C, T any] struct {
	// Name is what flags, environment variables and config keys select it by.
	Name string
	// Doc says in a phrase what it is and needs, for -h ("PostgreSQL, HNSW; needs
	// --postgres").
	Doc string
	// Env are the environment variables the backend reads: the ones with a Set are read
	// by Registry.FromEnv (the CLI and fathom.LLMFromEnv), the others by Open itself.
	Env []EnvVar[C]
	// Ephemeral is set when the backend keeps nothing past the process (the memory
	// journal, the in-process vector store).
	Ephemeral bool
	// Local is set when the backend keeps its data on this machine only, so the members
	// of a cluster do not share it (a file in the data directory).
	Local bool
	// Defaults fills the zero fields of a configuration with this backend's defaults;
	// nil means it has none. It must be idempotent.
	Defaults func(C) C
	// Validate reports a configuration the backend cannot open, after Defaults; nil
	// accepts every one.
	Validate func(C) error
	// Open constructs the backend from a defaulted, validated configuration.
	Open func(context.Context, C) (T, error)
	// Where says where the backend keeps its data, for people and logs (never with
	// credentials); nil means its name.
	Where func(C) string
}

// EnvVar is an environment variable a backend reads.
type EnvVar[C any] struct {
	// Name is the variable ("OPENAI_BASE_URL").
	Name string
	// Field is the configuration field it sets ("BaseURL"), or what it sets when Open
	// reads it.
	Field string
	// Set stores a non-empty value in the configuration; nil when Open reads the
	// variable itself.
	Set func(*C, string)
}

// Registry maps the names of one kind of component (journals, model APIs, embedders,
// vector stores, artifact stores) to their Backend descriptors, each taking the kind's
// typed configuration: the database/sql pattern (sql.Register + sql.Open(name, dsn)). A
// new backend is one package and one Add line in register.go; the node and the CLI
// choose by name and never switch over the backends.
type Registry[C, T any] struct {
	kind string
	// choose is the default name for a configuration; nil means the kind has none.
	choose   func(C) string
	mu       sync.RWMutex
	backends map[string]Backend[C, T]
}

// NewRegistry returns an empty registry of kind (for messages: "journal", "vector
// store"). choose, when not nil, is the one place the kind's default is decided: the
// backend a configuration gets when no name is given ("" when it gets none).
func NewRegistry[C, T any](kind string, choose func(C) string) *Registry[C, T] {
	return &Registry[C, T]{kind: kind, choose: choose, backends: map[string]Backend[C, T]{}}
}

// Kind is the registry's kind ("journal", "embedder", ...).
func (r *Registry[C, T]) Kind() string { return r.kind }

// Add registers b. Registering a name twice, or an empty name or a nil Open, is a
// programming error and panics (as sql.Register).
func (r *Registry[C, T]) Add(b Backend[C, T]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b.Name == "" || b.Open == nil {
		panic(fmt.Sprintf("backends: %s registered with an empty name or a nil constructor", r.kind))
	}
	if _, dup := r.backends[b.Name]; dup {
		panic(fmt.Sprintf("backends: %s %q registered twice", r.kind, b.Name))
	}
	r.backends[b.Name] = b
}

// Register adds a backend that is only a name and a constructor (Add with the rest
// zero).
func (r *Registry[C, T]) Register(name string, open func(context.Context, C) (T, error)) {
	r.Add(Backend[C, T]{Name: name, Open: open})
}

// Has reports whether backend name is registered.
func (r *Registry[C, T]) Has(name string) bool {
	_, err := r.Lookup(name)
	return err == nil
}

// Names lists the registered backends, sorted.
func (r *Registry[C, T]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.backends))
	for n := range r.backends {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Lookup returns backend name's descriptor; an unregistered name is an *UnknownError.
func (r *Registry[C, T]) Lookup(name string) (Backend[C, T], error) {
	r.mu.RLock()
	b, ok := r.backends[name]
	r.mu.RUnlock()
	if !ok {
		return Backend[C, T]{}, &UnknownError{Kind: r.kind, Name: name, Known: r.Names()}
	}
	return b, nil
}

// Choose is the backend cfg selects: name when set, else the kind's default for cfg
// ("" when the kind has none, or cfg gets none).
func (r *Registry[C, T]) Choose(name string, cfg C) string {
	if name != "" || r.choose == nil {
		return name
	}
	return r.choose(cfg)
}

// Prepare returns cfg with backend name's defaults, validated: what Open would open.
func (r *Registry[C, T]) Prepare(name string, cfg C) (C, error) {
	b, err := r.Lookup(name)
	if err != nil {
		return cfg, err
	}
	return b.prepare(cfg)
}

func (b Backend[C, T]) prepare(cfg C) (C, error) {
	if b.Defaults != nil {
		cfg = b.Defaults(cfg)
	}
	if b.Validate != nil {
		if err := b.Validate(cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// Open constructs backend name from cfg, with its defaults, once validated. An
// unregistered name is an *UnknownError.
func (r *Registry[C, T]) Open(ctx context.Context, name string, cfg C) (T, error) {
	var zero T
	b, err := r.Lookup(name)
	if err != nil {
		return zero, err
	}
	if cfg, err = b.prepare(cfg); err != nil {
		return zero, err
	}
	return b.Open(ctx, cfg)
}

// FromEnv returns cfg with the environment variables backend name reads at
// configuration time set from getenv (empty values are skipped). An unknown name reads
// nothing.
func (r *Registry[C, T]) FromEnv(name string, cfg C, getenv func(string) string) C {
	b, err := r.Lookup(name)
	if err != nil {
		return cfg
	}
	for _, e := range b.Env {
		if e.Set == nil {
			continue
		}
		if v := getenv(e.Name); v != "" {
			e.Set(&cfg, v)
		}
	}
	return cfg
}

// EnvVar is the environment variable that sets field of backend name's configuration
// ("" when none does).
func (r *Registry[C, T]) EnvVar(name, field string) string {
	b, err := r.Lookup(name)
	if err != nil {
		return ""
	}
	for _, e := range b.Env {
		if e.Field == field {
			return e.Name
		}
	}
	return ""
}

// Help lists the backends with their Doc for -h: "a (doc) or b (doc)".
func (r *Registry[C, T]) Help() string {
	names := r.Names()
	parts := make([]string, len(names))
	for i, n := range names {
		b, _ := r.Lookup(n)
		parts[i] = n
		if b.Doc != "" {
			parts[i] += " (" + b.Doc + ")"
		}
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// Where says where backend name keeps the data of cfg (Backend.Where), for people.
func (r *Registry[C, T]) Where(name string, cfg C) string {
	b, err := r.Lookup(name)
	if err != nil || b.Where == nil {
		return name
	}
	return b.Where(cfg)
}

// UnknownError is a backend name no constructor is registered for.
type UnknownError struct {
	// Kind is the registry's kind ("journal", "embedder", ...).
	Kind string
	// Name is the name asked for.
	Name string
	// Known are the registered names.
	Known []string
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("unknown %s %q (want %s)", e.Kind, e.Name, strings.Join(e.Known, ", "))
}
