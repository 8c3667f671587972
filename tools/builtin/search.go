package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fathom-agents/fathom/tools"
)

// SearchResult is one web search hit.
type SearchResult struct {
	// Title is the page's title.
	Title string `json:"title"`
	// URL is the page's address.
	URL string `json:"url"`
	// Snippet is the excerpt the search service shows (may be empty).
	Snippet string `json:"snippet"`
}

// SearchProvider searches the web. Implementations honour ctx and return errors a
// ToolError can classify (*SearchError for HTTP answers).
type SearchProvider interface {
	// Search returns at most limit results for query, best first.
	Search(ctx context.Context, query string, limit int) ([]SearchResult, error)
}

// SearchError is an HTTP error answer of a search service.
type SearchError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Body is the start of the answer's body.
	Body string
}

// Error implements error.
func (e *SearchError) Error() string {
	return fmt.Sprintf("search service answered HTTP %d: %s", e.StatusCode, e.Body)
}

// SearXNGConfig configures the SearXNG adapter.
type SearXNGConfig struct {
	// BaseURL is the instance's root, e.g. http://127.0.0.1:8888 (env FATHOM_SEARXNG_URL).
	// The instance must allow the json format (search.formats in settings.yml).
	BaseURL string
	// Token, when set, is sent as a bearer token (for instances behind an auth proxy;
	// env FATHOM_SEARXNG_TOKEN).
	Token string
	// Timeout bounds one search. Default 15s.
	Timeout time.Duration
	// HTTPClient, when set, replaces the client built from Timeout.
	HTTPClient *http.Client
}

// MaxSearchResponseBytes bounds a search answer.
const MaxSearchResponseBytes = 2 << 20

// SearXNG is a SearchProvider for a SearXNG instance's JSON API.
type SearXNG struct {
	base  *url.URL
	token string
	hc    *http.Client
}

var _ SearchProvider = (*SearXNG)(nil)

// NewSearXNG returns the adapter for cfg.
func NewSearXNG(cfg SearXNGConfig) (*SearXNG, error) {
	u, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("searxng: base URL %q must be an http(s) URL such as http://127.0.0.1:8888", cfg.BaseURL)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		timeout := cfg.Timeout
		if timeout <= 0 {
			timeout = 15 * time.Second
		}
		hc = &http.Client{Timeout: timeout}
	}
	return &SearXNG{base: u, token: cfg.Token, hc: hc}, nil
}

// Search implements SearchProvider: GET {base}/search?q=...&format=json&pageno=1.
func (s *SearXNG) Search(ctx context.Context, query string, limit int) ([]SearchResult, error) {
	u := *s.base
	u.Path += "/search"
	u.RawQuery = url.Values{"q": {query}, "format": {"json"}, "pageno": {"1"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("searxng: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("searxng: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxSearchResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("searxng: read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, &SearchError{StatusCode: resp.StatusCode, Body: bodySnippet(body, 200)}
	}
	if len(body) > MaxSearchResponseBytes {
		return nil, fmt.Errorf("searxng: answer exceeds %d bytes", MaxSearchResponseBytes)
	}
	var out struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("searxng: answer is not the JSON format (is format json enabled on the instance?): %w", err)
	}
	res := make([]SearchResult, 0, min(limit, len(out.Results)))
	for _, r := range out.Results {
		if len(res) == limit {
			break
		}
		res = append(res, SearchResult{Title: strings.TrimSpace(r.Title), URL: r.URL, Snippet: strings.TrimSpace(r.Content)})
	}
	return res, nil
}

// SearchArgs are web_search's arguments.
type SearchArgs struct {
	// Query is what to search for.
	Query string `json:"query" jsonschema:"minLength=1,maxLength=500" jsonschema_description:"The search query, as you would type it into a search engine."`
	// MaxResults bounds the answer.
	MaxResults int `json:"max_results,omitempty" jsonschema:"minimum=1,maximum=10,default=5" jsonschema_description:"How many results to return (default 5)."`
}

// WebSearch returns the web_search tool backed by p. With p nil the tool exists (the
// model sees it) but every call fails with a clear, non-retryable execution error.
func WebSearch(p SearchProvider) tools.Tool {
	return tools.MustNew("web_search",
		"Search the web. Returns titles, URLs and snippets; use specific queries and search again with other words "+
			"when the results do not answer the question. Cite the URLs you use.",
		tools.SandboxNone, func(ctx context.Context, a SearchArgs) (any, error) {
			if p == nil {
				return nil, tools.ExecutionError("web_search", "web_search has no search provider configured; set FATHOM_SEARXNG_URL", false).NotConfigured()
			}
			limit := a.MaxResults
			if limit == 0 {
				limit = 5
			}
			res, err := p.Search(ctx, a.Query, limit)
			if err != nil {
				var se *SearchError
				if errors.As(err, &se) {
					retryable := se.StatusCode == http.StatusTooManyRequests || se.StatusCode >= 500
					return nil, tools.ExecutionError("web_search", se.Error(), retryable, tools.Field{Key: "query", Value: a.Query})
				}
				if ctx.Err() != nil {
					return nil, err // the executor reports the timeout or cancellation
				}
				return nil, tools.ExecutionError("web_search", err.Error(), true, tools.Field{Key: "query", Value: a.Query})
			}
			return renderResults(a.Query, res), nil
		})
}

// bodySnippet is the start of an error answer's body, at most n bytes cut on a rune
// boundary, for the error message.
func bodySnippet(body []byte, n int) string {
	s := strings.TrimSpace(string(body))
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func renderResults(query string, res []SearchResult) string {
	if len(res) == 0 {
		return fmt.Sprintf("No results for %q. Try other words.", query)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Results for %q:", query)
	for i, r := range res {
		fmt.Fprintf(&b, "\n%d. %s — %s", i+1, r.Title, r.URL)
		if r.Snippet != "" {
			fmt.Fprintf(&b, "\n   %s", r.Snippet)
		}
	}
	return b.String()
}
