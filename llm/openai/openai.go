// Package openai is Fathom's client for OpenAI-compatible chat APIs (OpenAI itself,
// vLLM, Ollama, llama.cpp server, LiteLLM, and Fathom's own scripted mock-llm), built on
// the official Go SDK (github.com/openai/openai-go/v3). It speaks
// POST {BaseURL}/chat/completions and GET {BaseURL}/models with a timeout per call, a
// bound on the response size (streams included), no retries of its own (llm/resilient
// does that) and error answers as *llm.APIError with the server's Retry-After.
//
// Request options map as follows: MaxTokens → max_completion_tokens (set
// Config.LegacyMaxTokens for an old server that only knows max_tokens), ToolChoice →
// tool_choice, ParallelToolCalls → parallel_tool_calls, ResponseFormat →
// response_format {"type":"json_schema"}, ReasoningEffort → reasoning_effort. Usage
// carries prompt_tokens_details.cached_tokens and
// completion_tokens_details.reasoning_tokens. ThinkingBudget and PromptCache are
// Anthropic's and ignored here (OpenAI caches stable prompt prefixes by itself).
package openai

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

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/internal/wire"
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
	// MaxResponseBytes bounds a response body (a stream: all of it). Zero means 8 MiB.
	MaxResponseBytes int64
	// LegacyMaxTokens sends Request.MaxTokens as max_tokens instead of
	// max_completion_tokens, for servers that predate the latter. OpenAI's reasoning
	// models refuse max_tokens.
	LegacyMaxTokens bool
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
	cfg Config
	sdk openai.Client
}

var _ llm.Provider = (*Client)(nil)

// New returns a client for cfg; zero fields take DefaultConfig's values.
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
	opts := []option.RequestOption{
		option.WithBaseURL(strings.TrimRight(cfg.BaseURL, "/") + "/"),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // llm/resilient retries, with Fathom's classification
		option.WithMiddleware(wire.Bound("openai", cfg.MaxResponseBytes, errorFields)),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	} else {
		opts = append(opts, option.WithHeaderDel("Authorization"))
	}
	return &Client{cfg: cfg, sdk: openai.NewClient(opts...)}, nil
}

// Name implements llm.Provider.
func (c *Client) Name() string { return "openai" }

// errorFields reads OpenAI's {"error":{"message","type","code"}} error body.
func errorFields(data []byte) (typ, code, msg string, ok bool) {
	var eb struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &eb) != nil || eb.Error.Message == "" {
		return "", "", "", false
	}
	if eb.Error.Code != nil {
		code = fmt.Sprint(eb.Error.Code)
	}
	return eb.Error.Type, code, eb.Error.Message, true
}

// Chat implements llm.Provider: one POST /chat/completions, no retries.
func (c *Client) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if len(req.Messages) == 0 {
		return llm.Response{}, errors.New("openai: chat request has no messages")
	}
	params, raw, err := c.params(req)
	if err != nil {
		return llm.Response{}, err
	}
	if req.OnDelta != nil {
		params.StreamOptions.IncludeUsage = param.NewOpt(true)
		raw = append(raw, rawField{"stream", []byte("true")})
	}
	body, err := encodeBody(params, raw)
	if err != nil {
		return llm.Response{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	start := time.Now()
	var resp llm.Response
	if req.OnDelta != nil {
		resp, err = c.stream(ctx, req.OnDelta, body)
	} else {
		resp, err = c.complete(ctx, body)
	}
	if err != nil {
		return llm.Response{}, err
	}
	if resp.Model == "" {
		resp.Model = params.Model
	}
	resp.Duration = time.Since(start)
	return resp, nil
}

// rawField is a field of the request body encoded beforehand: its key and JSON value.
type rawField struct {
	key   string
	value []byte
}

// encodeBody is the request body: p as the SDK encodes it with the raw fields put in
// front. Splicing the bytes costs a copy; setting them into the SDK's body
// (option.WithJSONSet) parsed the whole body again for each field.
func encodeBody(p openai.ChatCompletionNewParams, raw []rawField) (option.RequestOption, error) {
	enc, err := json.Marshal(p)
	if err != nil || len(enc) < 2 || enc[0] != '{' {
		return nil, fmt.Errorf("openai: encode request: %w", errors.Join(err, errors.New("not a JSON object")))
	}
	n := len(enc)
	for _, f := range raw {
		n += len(f.key) + len(f.value) + 4
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, f := range raw {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, f.key...)
		b = append(b, '"', ':')
		b = append(b, f.value...)
	}
	if rest := enc[1:]; len(raw) > 0 && rest[0] != '}' {
		b = append(b, ',')
	}
	b = append(b, enc[1:]...)
	return option.WithRequestBody("application/json", b), nil
}

// params translates req into the SDK's request. The conversation and the tools, which
// Fathom holds in the API's own simple shapes, are encoded once with encoding/json as
// raw fields of the body (encodeBody): the SDK's reflective encoding of a long history
// costs more than the rest of a call. Everything else uses the SDK's typed params.
func (c *Client) params(req llm.Request) (openai.ChatCompletionNewParams, []rawField, error) {
	msgs, err := toParams(req.Messages)
	if err != nil {
		return openai.ChatCompletionNewParams{}, nil, err
	}
	rawMsgs, err := json.Marshal(msgs)
	if err != nil {
		return openai.ChatCompletionNewParams{}, nil, fmt.Errorf("openai: encode messages: %w", err)
	}
	body := []rawField{{"messages", rawMsgs}}
	p := openai.ChatCompletionNewParams{Model: req.Model}
	if p.Model == "" {
		p.Model = c.cfg.Model
	}
	if req.Temperature != nil {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	if req.MaxTokens > 0 {
		if c.cfg.LegacyMaxTokens {
			p.MaxTokens = param.NewOpt(int64(req.MaxTokens))
		} else {
			p.MaxCompletionTokens = param.NewOpt(int64(req.MaxTokens))
		}
	}
	if len(req.Tools) > 0 {
		type wireTool struct {
			Type     string       `json:"type"`
			Function llm.ToolSpec `json:"function"`
		}
		tools := make([]wireTool, len(req.Tools))
		for i, t := range req.Tools {
			if len(t.Parameters) > 0 && !json.Valid(t.Parameters) {
				return p, nil, fmt.Errorf("openai: tool %s: parameters are not valid JSON", t.Name)
			}
			tools[i] = wireTool{"function", t}
		}
		raw, err := json.Marshal(tools)
		if err != nil {
			return p, nil, fmt.Errorf("openai: encode tools: %w", err)
		}
		body = append(body, rawField{"tools", raw})
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		p.ToolChoice.OfAuto = param.NewOpt(req.ToolChoice)
	default:
		p.ToolChoice.OfFunctionToolChoice = &openai.ChatCompletionNamedToolChoiceParam{
			Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: req.ToolChoice}}
	}
	if req.ParallelToolCalls != nil && len(req.Tools) > 0 {
		p.ParallelToolCalls = param.NewOpt(*req.ParallelToolCalls)
	}
	if f := req.ResponseFormat; f != nil {
		js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: f.Name, Schema: f.Schema}
		if f.Description != "" {
			js.Description = param.NewOpt(f.Description)
		}
		if f.Strict {
			js.Strict = param.NewOpt(true)
		}
		p.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}
	}
	if req.ReasoningEffort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(req.ReasoningEffort)
	}
	return p, body, nil
}

// wireMessage is a chat message in the API's shape (tool calls nest a "function").
type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// toParams translates the conversation into the API's message shape.
func toParams(ms []llm.Message) ([]wireMessage, error) {
	out := make([]wireMessage, len(ms))
	for i, m := range ms {
		w := wireMessage{Role: m.Role, ToolCallID: m.ToolCallID}
		switch m.Role {
		case "system", "user", "tool":
			w.Content = &m.Content
		case "assistant":
			if m.Content != "" || len(m.ToolCalls) == 0 {
				w.Content = &m.Content
			}
			for _, tc := range m.ToolCalls {
				w.ToolCalls = append(w.ToolCalls, wireToolCall{ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: tc.Arguments}})
			}
		default:
			return nil, fmt.Errorf("openai: message %d: unsupported role %q", i, m.Role)
		}
		out[i] = w
	}
	return out, nil
}

// wireUsage is the API's usage object.
type wireUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// usage converts the API's usage.
func usage(u wireUsage) llm.Usage {
	return llm.Usage{
		InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		CachedInputTokens: u.PromptTokensDetails.CachedTokens,
		ReasoningTokens:   u.CompletionTokensDetails.ReasoningTokens,
	}
}

// chatResponse is the part of a chat.completion Fathom reads.
type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   *string        `json:"content"`
			ToolCalls []wireToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage wireUsage `json:"usage"`
}

// complete makes a non-streamed call. The SDK sends it; the answer is decoded into
// chatResponse, a plain struct (the SDK's reflective decoder of its own type costs more
// than the rest of the call).
func (c *Client) complete(ctx context.Context, body option.RequestOption) (llm.Response, error) {
	var raw *http.Response
	// The params are in body already: the SDK's own encoding of them is replaced.
	if _, err := c.sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{}, body, option.WithResponseBodyInto(&raw)); err != nil {
		return llm.Response{}, callError(err)
	}
	defer raw.Body.Close()
	var out chatResponse
	if err := json.NewDecoder(raw.Body).Decode(&out); err != nil {
		if errors.Is(err, wire.ErrTooLarge) {
			return llm.Response{}, err
		}
		return llm.Response{}, fmt.Errorf("openai: decode /chat/completions response: %w", errors.Join(llm.ErrMalformedResponse, err))
	}
	if len(out.Choices) == 0 {
		return llm.Response{}, fmt.Errorf("openai: chat completion from %s has no choices", c.cfg.BaseURL)
	}
	ch := out.Choices[0]
	resp := llm.Response{FinishReason: ch.FinishReason, Model: out.Model, Usage: usage(out.Usage)}
	if ch.Message.Content != nil {
		resp.Content = *ch.Message.Content
	}
	for _, tc := range ch.Message.ToolCalls {
		resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return resp, nil
}

// streamChunk is one chat.completion.chunk event.
type streamChunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int          `json:"index"`
				ID       string       `json:"id"`
				Function wireFunction `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage `json:"usage"`
}

// maxToolCalls bounds a streamed tool call index, so a broken stream cannot make the
// client allocate without limit.
const maxToolCalls = 1024

// stream reads a streamed chat completion chunk by chunk, calling onDelta for each text
// delta and assembling tool calls from their fragments. The stream must end with
// "data: [DONE]"; anything else is an error wrapping io.ErrUnexpectedEOF (retryable).
func (c *Client) stream(ctx context.Context, onDelta func(string), body option.RequestOption) (llm.Response, error) {
	var (
		tr  wire.Tracker
		raw *http.Response
	)
	// The SDK sends the request; its SSE decoder reads the answer into streamChunk, a
	// plain struct: the SDK's own chunk type decodes reflectively, event by event, at
	// several times the cost.
	if _, err := c.sdk.Chat.Completions.New(wire.WithTracker(ctx, &tr), openai.ChatCompletionNewParams{}, body,
		option.WithResponseBodyInto(&raw), option.WithHeader("Accept", "text/event-stream")); err != nil {
		return llm.Response{}, callError(err)
	}
	s := ssestream.NewStream[streamChunk](ssestream.NewDecoder(raw), nil)
	defer s.Close()
	var (
		out     llm.Response
		content strings.Builder
		calls   []llm.ToolCall
	)
	for s.Next() {
		ch := s.Current()
		if ch.Model != "" {
			out.Model = ch.Model
		}
		if ch.Usage != nil {
			out.Usage = usage(*ch.Usage)
		}
		for _, choice := range ch.Choices {
			if d := choice.Delta.Content; d != "" {
				content.WriteString(d)
				onDelta(d)
			}
			for _, tc := range choice.Delta.ToolCalls {
				if tc.Index < 0 || tc.Index >= maxToolCalls {
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
			if choice.FinishReason != "" {
				out.FinishReason = choice.FinishReason
			}
		}
	}
	if err := s.Err(); err != nil {
		if malformed(err) {
			return llm.Response{}, fmt.Errorf("openai: malformed stream chunk: %w", errors.Join(llm.ErrMalformedResponse, err))
		}
		return llm.Response{}, fmt.Errorf("openai: stream cut after %d bytes: %w", content.Len(), callError(err))
	}
	if !tr.EndsWithDone() {
		return llm.Response{}, fmt.Errorf("openai: stream cut after %d bytes: %w", content.Len(), io.ErrUnexpectedEOF)
	}
	out.Content, out.ToolCalls = content.String(), calls
	return out, nil
}

// malformed reports a JSON decoding error (a chunk that is not valid JSON).
func malformed(err error) bool {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.As(err, &syn) || errors.As(err, &typ)
}

// callError keeps Fathom's errors (an *llm.APIError from the middleware, a transport
// error) and converts an SDK API error that did not pass through it.
func callError(err error) error {
	var sdkErr *openai.Error
	if errors.As(err, &sdkErr) {
		var apiErr *llm.APIError
		if errors.As(err, &apiErr) {
			return err
		}
		return &llm.APIError{StatusCode: sdkErr.StatusCode, Type: sdkErr.Type, Code: sdkErr.Code, Message: sdkErr.Message}
	}
	if strings.Contains(err.Error(), "openai:") {
		return err
	}
	return fmt.Errorf("openai: %w", err)
}

// Models lists the model ids the endpoint serves (GET /models).
func (c *Client) Models(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	page, err := c.sdk.Models.List(ctx)
	if err != nil {
		return nil, callError(err)
	}
	ids := make([]string, len(page.Data))
	for i, m := range page.Data {
		ids[i] = m.ID
	}
	return ids, nil
}
