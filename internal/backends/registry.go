package backends

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Registry maps the names of one kind of component (journals, model APIs, embedders,
// vector stores, artifact stores) to their constructors, each taking the kind's typed
// configuration: the database/sql pattern (sql.Register + sql.Open(name, dsn)). A new
// backend is one package and one Register line in register.go; the node and the CLI
// choose by name and never switch over the backends.
type Registry[C, T any] struct {
	kind string
	mu   sync.RWMutex
	open map[string]func(context.Context, C) (T, error)
}

// NewRegistry returns an empty registry of kind (for messages: "journal", "vector store").
func NewRegistry[C, T any](kind string) *Registry[C, T] {
	return &Registry[C, T]{kind: kind, open: map[string]func(context.Context, C) (T, error){}}
}

// Register adds the constructor of backend name. Registering a name twice, or an
// empty name or a nil constructor, is a programming error and panics (as sql.Register).
func (r *Registry[C, T]) Register(name string, open func(context.Context, C) (T, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == "" || open == nil {
		panic(fmt.Sprintf("backends: %s registered with an empty name or a nil constructor", r.kind))
	}
	if _, dup := r.open[name]; dup {
		panic(fmt.Sprintf("backends: %s %q registered twice", r.kind, name))
	}
	r.open[name] = open
}

// Has reports whether backend name is registered.
func (r *Registry[C, T]) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.open[name]
	return ok
}

// Names lists the registered backends, sorted.
func (r *Registry[C, T]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.open))
	for n := range r.open {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Open constructs backend name from cfg. An unregistered name is an *UnknownError.
func (r *Registry[C, T]) Open(ctx context.Context, name string, cfg C) (T, error) {
	r.mu.RLock()
	open, ok := r.open[name]
	r.mu.RUnlock()
	if !ok {
		var zero T
		return zero, &UnknownError{Kind: r.kind, Name: name, Known: r.Names()}
	}
	return open(ctx, cfg)
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
