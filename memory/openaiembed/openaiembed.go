// Package openaiembed is a memory.Embedder for OpenAI-compatible embeddings APIs
// (OpenAI, vLLM, Ollama, LiteLLM and Fathom's own `fathom mock-llm`): POST
// {BaseURL}/embeddings with a batch of inputs, base64-encoded float32 answers (the
// official clients' default; plain float arrays are accepted too).
//
// Errors are *llm.APIError for HTTP error answers, so llm.IsRetryable classifies them
// like chat errors.
//
//	e, err := openaiembed.New(openaiembed.Config{BaseURL: "http://127.0.0.1:8080/v1", Model: "text-embedding-3-small", Dimensions: 1536})
//	vecs, err := e.Embed(ctx, []string{"hello"})
package openaiembed

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/internal/httpclient"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
)

// Config configures a Client.
type Config struct {
	// BaseURL is the API root including the version path, e.g. https://api.openai.com/v1.
	BaseURL string
	// APIKey is sent as a bearer token when set.
	APIKey string
	// Model is the embedding model. Default text-embedding-3-small.
	Model string
	// Dimensions is the length of the vectors (required): sent as the request's
	// "dimensions" unless OmitDimensions, and checked on every answer.
	Dimensions int
	// OmitDimensions leaves "dimensions" out of requests, for models that take no such
	// parameter (text-embedding-ada-002, most local servers). Answers are still checked.
	OmitDimensions bool
	// MaxBatch is the most inputs per request; longer Embed calls are split. Default 256.
	MaxBatch int
	// HTTPClient, when set, is used instead of a client built from Timeout. A nil
	// Transport in it is the node's shared transport (idle connections kept for
	// concurrent calls), never net/http's default.
	HTTPClient *http.Client
	// Timeout bounds one request, including reading the body. Default 60 s.
	Timeout time.Duration
	// MaxResponseBytes bounds a response body. Default 64 MiB.
	MaxResponseBytes int64
}

// DefaultConfig returns the configuration of api.openai.com's text-embedding-3-small at
// 1536 dimensions.
func DefaultConfig() Config {
	return Config{BaseURL: "https://api.openai.com/v1", Model: "text-embedding-3-small", Dimensions: 1536,
		MaxBatch: 256, Timeout: 60 * time.Second, MaxResponseBytes: 64 << 20}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("openaiembed: base URL %q must be an http(s) URL such as https://api.openai.com/v1", c.BaseURL)
	}
	if c.Dimensions <= 0 {
		return fmt.Errorf("openaiembed: dimensions must be positive, got %d", c.Dimensions)
	}
	if c.MaxBatch < 0 || c.Timeout < 0 || c.MaxResponseBytes < 0 {
		return errors.New("openaiembed: max batch, timeout and max response bytes must not be negative")
	}
	return nil
}

// Client is the embeddings client. It is safe for concurrent use.
type Client struct {
	cfg  Config
	http *http.Client
	url  string
}

var _ memory.Embedder = (*Client)(nil)

// New returns a client for cfg; zero fields take DefaultConfig's values (but Dimensions
// must be set).
func New(cfg Config) (*Client, error) {
	d := DefaultConfig()
	if cfg.BaseURL == "" {
		cfg.BaseURL = d.BaseURL
	}
	if cfg.Model == "" {
		cfg.Model = d.Model
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = d.MaxBatch
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = d.Timeout
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = d.MaxResponseBytes
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hc := httpclient.Client(cfg.HTTPClient, cfg.Timeout)
	return &Client{cfg: cfg, http: hc, url: strings.TrimRight(cfg.BaseURL, "/") + "/embeddings"}, nil
}

// Dimensions implements memory.Embedder.
func (c *Client) Dimensions() int { return c.cfg.Dimensions }

// Embed implements memory.Embedder: one request per MaxBatch texts.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += c.cfg.MaxBatch {
		end := min(start+c.cfg.MaxBatch, len(texts))
		vecs, err := c.embedBatch(ctx, texts[start:end])
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

type embedRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	Dimensions     int      `json:"dimensions,omitempty"`
	EncodingFormat string   `json:"encoding_format"`
}

type embedResponse struct {
	Data []struct {
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
}

func (c *Client) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	req := embedRequest{Model: c.cfg.Model, Input: texts, EncodingFormat: "base64"}
	if !c.cfg.OmitDimensions {
		req.Dimensions = c.cfg.Dimensions
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("openaiembed: encode request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("openaiembed: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if c.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("openaiembed: POST embeddings: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("openaiembed: read response: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, apiError(resp, data)
	}
	if int64(len(data)) > c.cfg.MaxResponseBytes {
		return nil, fmt.Errorf("openaiembed: response exceeds %d bytes", c.cfg.MaxResponseBytes)
	}
	var er embedResponse
	if err := json.Unmarshal(data, &er); err != nil {
		return nil, fmt.Errorf("openaiembed: decode response: %w", err)
	}
	if len(er.Data) != len(texts) {
		return nil, fmt.Errorf("openaiembed: %d embeddings for %d inputs", len(er.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for _, d := range er.Data {
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("openaiembed: bad or repeated embedding index %d", d.Index)
		}
		v, err := decodeEmbedding(d.Embedding)
		if err != nil {
			return nil, fmt.Errorf("openaiembed: embedding %d: %w", d.Index, err)
		}
		if len(v) != c.cfg.Dimensions {
			return nil, fmt.Errorf("openaiembed: embedding %d has %d dimensions, want %d", d.Index, len(v), c.cfg.Dimensions)
		}
		out[d.Index] = v
	}
	return out, nil
}

// decodeEmbedding reads a base64 string of little-endian float32s or a float array.
func decodeEmbedding(raw json.RawMessage) ([]float32, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("decode base64: %w", err)
		}
		if len(b)%4 != 0 {
			return nil, fmt.Errorf("base64 payload of %d bytes is not float32s", len(b))
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v, nil
	}
	var v []float32
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("decode float array: %w", err)
	}
	return v, nil
}

// apiError turns an HTTP error answer into an *llm.APIError.
func apiError(resp *http.Response, data []byte) error {
	e := &llm.APIError{StatusCode: resp.StatusCode}
	var eb struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &eb) == nil && eb.Error.Message != "" {
		e.Message, e.Type = eb.Error.Message, eb.Error.Type
		if eb.Error.Code != nil {
			e.Code = fmt.Sprint(eb.Error.Code)
		}
	} else {
		msg := strings.TrimSpace(string(data))
		if len(msg) > 512 {
			msg = msg[:512] + "…"
		}
		e.Message = msg
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if s, err := strconv.Atoi(ra); err == nil && s >= 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		}
	}
	return e
}
