// Package openai is Fathom's client for OpenAI-compatible chat APIs (OpenAI itself,
// vLLM, Ollama, llama.cpp server, LiteLLM, and Fathom's own scripted mock-llm). It speaks
// POST {BaseURL}/chat/completions and GET {BaseURL}/models over net/http, with a timeout
// per call and a bound on the response size.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/sse"
)

// Config configures a Client.
type Config struct {
	// BaseURL is the API root including the version path, e.g. https://api.openai.com/v1
	// (env OPENAI_BASE_URL).
	BaseURL string
	// APIKey is sent as a bearer token when set (env OPENAI_API_KEY).
	APIKey string
	// Model is used when a request names none (env FATHOM_MODEL).
	Model string
	// HTTPClient, when set, is used instead of a client built from Timeout.
	HTTPClient *http.Client
	// Timeout bounds one call, including reading the body. Zero means 2 minutes.
	Timeout time.Duration
	// MaxResponseBytes bounds a response body. Zero means 8 MiB.
	MaxResponseBytes int64
}

// DefaultConfig returns the configuration for api.openai.com with gpt-4o-mini.
func DefaultConfig() Config {
	return Config{BaseURL: "https://api.openai.com/v1", Model: "gpt-4o-mini", Timeout: 2 * time.Minute, MaxResponseBytes: 8 << 20}
}

// ConfigFromEnv starts from DefaultConfig and applies OPENAI_BASE_URL, OPENAI_API_KEY and
// FATHOM_MODEL when set.
func ConfigFromEnv(getenv func(string) string) Config {
	c := DefaultConfig()
	if v := getenv("OPENAI_BASE_URL"); v != "" {
		c.BaseURL = v
	}
	c.APIKey = getenv("OPENAI_API_KEY")
	if v := getenv("FATHOM_MODEL"); v != "" {
		c.Model = v
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("openai: base URL %q must be an http(s) URL such as https://api.openai.com/v1", c.BaseURL)
	}
	if c.Timeout < 0 || c.MaxResponseBytes < 0 {
		return errors.New("openai: timeout and max response bytes must not be negative")
	}
	return nil
}

// Client is an llm.Provider for an OpenAI-compatible API. It is safe for concurrent use.
type Client struct {
	cfg  Config
	http *http.Client
	base string
}

var _ llm.Provider = (*Client)(nil)

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	d := DefaultConfig()
	if cfg.Timeout == 0 {
		cfg.Timeout = d.Timeout
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = d.MaxResponseBytes
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = d.BaseURL
	}
	if cfg.Model == "" {
		cfg.Model = d.Model
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: cfg.Timeout}
	}
	return &Client{cfg: cfg, http: hc, base: strings.TrimRight(cfg.BaseURL, "/")}, nil
}

// Name implements llm.Provider.
func (c *Client) Name() string { return "openai" }

type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []wireMessage `json:"messages"`
	Temperature *float64      `json:"temperature,omitempty"`
	MaxTokens   int           `json:"max_tokens,omitempty"`
	Tools       []wireTool    `json:"tools,omitempty"`
	Stream      bool          `json:"stream,omitempty"`
	// StreamOptions asks for a final usage chunk when streaming.
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
}

// wireMessage is a chat message in the OpenAI format (tool calls nest a "function").
type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireTool struct {
	Type     string       `json:"type"`
	Function llm.ToolSpec `json:"function"`
}

func toWire(ms []llm.Message) []wireMessage {
	out := make([]wireMessage, len(ms))
	for i, m := range ms {
		content := m.Content
		w := wireMessage{Role: m.Role, Content: &content, ToolCallID: m.ToolCallID}
		if len(m.ToolCalls) > 0 && m.Content == "" {
			w.Content = nil // an assistant message that only calls tools has null content
		}
		for _, c := range m.ToolCalls {
			var wc wireToolCall
			wc.ID, wc.Type = c.ID, "function"
			wc.Function.Name, wc.Function.Arguments = c.Name, c.Arguments
			w.ToolCalls = append(w.ToolCalls, wc)
		}
		out[i] = w
	}
	return out
}

func fromWire(calls []wireToolCall) []llm.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]llm.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments}
	}
	return out
}

type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   *string        `json:"content"`
			ToolCalls []wireToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
}

type errorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	} `json:"error"`
}

// Chat implements llm.Provider: one POST /chat/completions, no retries.
func (c *Client) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if len(req.Messages) == 0 {
		return llm.Response{}, errors.New("openai: chat request has no messages")
	}
	model := req.Model
	if model == "" {
		model = c.cfg.Model
	}
	creq := chatRequest{Model: model, Messages: toWire(req.Messages), Temperature: req.Temperature, MaxTokens: req.MaxTokens}
	for _, t := range req.Tools {
		creq.Tools = append(creq.Tools, wireTool{Type: "function", Function: t})
	}
	if req.OnDelta != nil {
		creq.Stream = true
		creq.StreamOptions = &struct {
			IncludeUsage bool `json:"include_usage"`
		}{true}
	}
	body, err := json.Marshal(creq)
	if err != nil {
		return llm.Response{}, fmt.Errorf("openai: encode request: %w", err)
	}
	start := time.Now()
	if req.OnDelta != nil {
		resp, err := c.stream(ctx, body, req.OnDelta)
		if err != nil {
			return llm.Response{}, err
		}
		if resp.Model == "" {
			resp.Model = model
		}
		resp.Duration = time.Since(start)
		return resp, nil
	}
	var out chatResponse
	if err := c.do(ctx, http.MethodPost, "/chat/completions", body, &out); err != nil {
		return llm.Response{}, err
	}
	if len(out.Choices) == 0 {
		return llm.Response{}, fmt.Errorf("openai: chat completion from %s has no choices", c.base)
	}
	if out.Model == "" {
		out.Model = model
	}
	var content string
	if c := out.Choices[0].Message.Content; c != nil {
		content = *c
	}
	return llm.Response{
		Content:      content,
		ToolCalls:    fromWire(out.Choices[0].Message.ToolCalls),
		FinishReason: out.Choices[0].FinishReason,
		Model:        out.Model,
		Usage: llm.Usage{
			InputTokens:  out.Usage.PromptTokens,
			OutputTokens: out.Usage.CompletionTokens,
			TotalTokens:  out.Usage.TotalTokens,
		},
		Duration: time.Since(start),
	}, nil
}

// Models lists the model ids the endpoint serves (GET /models).
func (c *Client) Models(ctx context.Context) ([]string, error) {
	var out struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := c.do(ctx, http.MethodGet, "/models", nil, &out); err != nil {
		return nil, err
	}
	ids := make([]string, len(out.Data))
	for i, m := range out.Data {
		ids[i] = m.ID
	}
	return ids, nil
}

// send makes one request and returns the response when its status is 2xx (the caller
// closes the body); other statuses become *llm.APIError. accept is the Accept header.
func (c *Client) send(ctx context.Context, method, path string, body []byte, accept string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	hreq.Header.Set("Accept", accept)
	if c.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("openai: %s %s: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, apiError(resp, data)
	}
	return resp, nil
}

type streamChunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
}

// stream reads a streamed chat completion chunk by chunk, calling onDelta for each text
// delta and assembling tool calls from their fragments. The stream must end with
// "data: [DONE]"; anything else is an error wrapping io.ErrUnexpectedEOF (retryable).
func (c *Client) stream(ctx context.Context, body []byte, onDelta func(string)) (llm.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	resp, err := c.send(ctx, http.MethodPost, "/chat/completions", body, "text/event-stream")
	if err != nil {
		return llm.Response{}, err
	}
	defer resp.Body.Close()
	r := sse.NewReader(resp.Body)
	r.MaxEventBytes = int(min(c.cfg.MaxResponseBytes, 1<<30))
	var (
		out     llm.Response
		content strings.Builder
		calls   []llm.ToolCall
		total   int64
	)
	for {
		ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // ended without [DONE]
			}
			return llm.Response{}, fmt.Errorf("openai: stream cut after %d bytes: %w", content.Len(), err)
		}
		if ev.Data == "[DONE]" {
			break
		}
		if total += int64(len(ev.Data)); total > c.cfg.MaxResponseBytes {
			return llm.Response{}, fmt.Errorf("openai: stream exceeds %d bytes", c.cfg.MaxResponseBytes)
		}
		var ch streamChunk
		if err := json.Unmarshal([]byte(ev.Data), &ch); err != nil {
			return llm.Response{}, fmt.Errorf("openai: malformed stream chunk: %w", err)
		}
		if ch.Model != "" {
			out.Model = ch.Model
		}
		if u := ch.Usage; u != nil {
			out.Usage = llm.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
		}
		for _, choice := range ch.Choices {
			if d := choice.Delta.Content; d != nil && *d != "" {
				content.WriteString(*d)
				onDelta(*d)
			}
			for _, tc := range choice.Delta.ToolCalls {
				if tc.Index < 0 || tc.Index > 1024 {
					return llm.Response{}, fmt.Errorf("openai: stream tool call index %d out of range", tc.Index)
				}
				for len(calls) <= tc.Index {
					calls = append(calls, llm.ToolCall{})
				}
				if tc.ID != "" {
					calls[tc.Index].ID = tc.ID
				}
				calls[tc.Index].Name += tc.Function.Name
				calls[tc.Index].Arguments += tc.Function.Arguments
			}
			if choice.FinishReason != nil {
				out.FinishReason = *choice.FinishReason
			}
		}
	}
	out.Content, out.ToolCalls = content.String(), calls
	return out, nil
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	resp, err := c.send(ctx, method, path, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("openai: read %s response: %w", path, err)
	}
	if int64(len(data)) > c.cfg.MaxResponseBytes {
		return fmt.Errorf("openai: %s response exceeds %d bytes", path, c.cfg.MaxResponseBytes)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("openai: decode %s response: %w", path, err)
	}
	return nil
}

func apiError(resp *http.Response, data []byte) error {
	e := &llm.APIError{StatusCode: resp.StatusCode}
	var eb errorBody
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
		} else if t, err := http.ParseTime(ra); err == nil {
			e.RetryAfter = max(0, time.Until(t))
		}
	}
	return e
}
