package builtin

import (
	"fmt"

	"github.com/fathom-agents/fathom/tools"
)

// Options configure the built-in tools.
type Options struct {
	// Search backs web_search; nil leaves it unconfigured (calls fail with a clear error).
	Search SearchProvider
}

// Registry returns a registry with write_todos, web_search, code_execute and ask_human.
func Registry(opts Options) (*tools.Registry, error) {
	r, err := tools.NewRegistry(WriteTodos(), WebSearch(opts.Search), CodeExecute(), AskHuman())
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
