package builtin

import (
	"fmt"
	"slices"

	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/tools"
)

// Options configure the built-in tools.
type Options struct {
	// Search backs web_search; nil leaves it unconfigured (calls fail with a clear error).
	Search SearchProvider
	// Artifacts backs write_artifact, read_artifact and list_artifacts; nil leaves the
	// three out of the registry.
	Artifacts artifact.Store
	// ArtifactReadLimit bounds the bytes read_artifact returns per call (0 =
	// DefaultArtifactReadLimit).
	ArtifactReadLimit int
	// Memory backs remember, recall and forget (long-term memory); nil leaves the three
	// out of the registry.
	Memory *MemoryTools
}

// all lists the built-in tools, once: All, Names and Registry read it. A new built-in
// tool is one constructor in this package and one line here.
var all = []struct {
	// tools makes the entry's tools from the options.
	tools func(Options) []tools.Tool
	// offered reports whether the options let the tools be offered; nil means always.
	offered func(Options) bool
	// bySetting marks tools an agent gets from a setting (memory: read or readwrite),
	// never by naming them in its tools: Names leaves them out.
	bySetting bool
}{
	{tools: func(Options) []tools.Tool { return []tools.Tool{WriteTodos()} }},
	{tools: func(o Options) []tools.Tool { return []tools.Tool{WebSearch(o.Search)} }},
	{tools: func(Options) []tools.Tool { return []tools.Tool{CodeExecute()} }},
	{tools: func(Options) []tools.Tool { return []tools.Tool{AskHuman()} }},
	{tools: func(o Options) []tools.Tool { return ArtifactTools(o.Artifacts, o.ArtifactReadLimit) },
		offered: func(o Options) bool { return o.Artifacts != nil }},
	{tools: func(o Options) []tools.Tool {
		if o.Memory == nil {
			return MemoryTools{}.Tools()
		}
		return o.Memory.Tools()
	}, offered: func(o Options) bool { return o.Memory != nil }, bySetting: true},
}

// All returns the built-in tools opts lets a node offer: write_todos, web_search,
// code_execute and ask_human, write_artifact, read_artifact and list_artifacts when
// opts.Artifacts is set, and remember, recall and forget when opts.Memory is.
func All(opts Options) []tools.Tool {
	var ts []tools.Tool
	for _, e := range all {
		if e.offered == nil || e.offered(opts) {
			ts = append(ts, e.tools(opts)...)
		}
	}
	return ts
}

// Names lists the names of every built-in tool an agent may name in its tools, sorted,
// whatever it needs to be offered (web_search works with a search provider,
// code_execute with a sandbox, the artifact tools with an artifact store): the names a
// configuration file may use. The memory tools are not among them: an agent's memory
// setting gives them.
func Names() []string {
	var names []string
	for _, e := range all {
		if e.bySetting {
			continue
		}
		for _, t := range e.tools(Options{}) {
			names = append(names, t.Name())
		}
	}
	slices.Sort(names)
	return names
}

// Registry returns a registry of All(opts).
func Registry(opts Options) (*tools.Registry, error) {
	r, err := tools.NewRegistry(All(opts)...)
	if err != nil {
		return nil, fmt.Errorf("builtin tools: %w", err)
	}
	return r, nil
}

// SearchFromEnv returns the SearXNG provider configured by FATHOM_SEARXNG_URL (and
// FATHOM_SEARXNG_TOKEN), or nil when the URL is unset.
func SearchFromEnv(getenv func(string) string) (SearchProvider, error) {
	base := getenv("FATHOM_SEARXNG_URL")
	if base == "" {
		return nil, nil
	}
	s, err := NewSearXNG(SearXNGConfig{BaseURL: base, Token: getenv("FATHOM_SEARXNG_TOKEN")})
	if err != nil {
		return nil, fmt.Errorf("FATHOM_SEARXNG_URL: %w", err)
	}
	return s, nil
}
