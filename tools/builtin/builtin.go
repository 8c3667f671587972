package builtin

import (
	"fmt"

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

// Registry returns a registry with write_todos, web_search, code_execute and ask_human,
// the artifact tools when opts.Artifacts is set and the memory tools when opts.Memory is.
func Registry(opts Options) (*tools.Registry, error) {
	ts := []tools.Tool{WriteTodos(), WebSearch(opts.Search), CodeExecute(), AskHuman()}
	if opts.Artifacts != nil {
		ts = append(ts, ArtifactTools(opts.Artifacts, opts.ArtifactReadLimit)...)
	}
	if opts.Memory != nil {
		ts = append(ts, opts.Memory.Tools()...)
	}
	r, err := tools.NewRegistry(ts...)
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
