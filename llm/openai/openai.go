// Package openai is Fathom's client for OpenAI-compatible chat APIs (OpenAI itself,
// vLLM, Ollama, llama.cpp server, LiteLLM, and Fathom's own scripted mock-llm), built on
// the official Go SDK (github.com/openai/openai-go/v3). It speaks
// POST {BaseURL}/chat/completions and GET {BaseURL}/models with a timeout per call, a
// bound on the response size (streams included), no retries of its own (llm/resilient
// does that) and error answers as *llm.APIError with the server's Retry-After. It is
// configured by Config alone (ConfigFromEnv reads the environment): the SDK's own
// environment defaults (OPENAI_ADMIN_KEY, OPENAI_CUSTOM_HEADERS, …) are not applied.
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
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/fathom-agents/fathom/internal/httpclient"
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
	// Organization and Project, when set, are sent as the OpenAI-Organization and
	// OpenAI-Project headers (env OPENAI_ORG_ID, OPENAI_PROJECT_ID).
	Organization, Project string
	// HTTPClient, when set, makes the calls (a copy of it: its transport, redirect
	// policy and cookie jar; a nil Transport is the node's shared transport, which keeps
	// idle connections for concurrent calls); its Timeout, when shorter than Timeout,
	// bounds each call instead.
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

// ConfigFromEnv starts from DefaultConfig and applies OPENAI_BASE_URL, OPENAI_API_KEY,
// OPENAI_ORG_ID, OPENAI_PROJECT_ID and FATHOM_MODEL when set.
func ConfigFromEnv(getenv func(string) string) Config {
	c := DefaultConfig()
	if v := getenv("OPENAI_BASE_URL"); v != "" {
		c.BaseURL = v
	}
	c.APIKey = getenv("OPENAI_API_KEY")
	c.Organization, c.Project = getenv("OPENAI_ORG_ID"), getenv("OPENAI_PROJECT_ID")
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
	// api makes the chat calls: the SDK client's generic Post sends a []byte body as
	// JSON as is, with no per-call options (Chat.Completions.New takes typed params; a
	// body of our own then needs option.WithRequestBody, whose content-type header goes
	// through the SDK's per-call header bookkeeping).
	api    openai.Client
	models openai.ModelService
	// callTimeout bounds each call through its context: Config.Timeout, or the HTTP
	// client's Timeout when that is shorter (the client itself is used without one).
	callTimeout time.Duration
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
	// Each call's deadline is its context's (Chat, Models), never the HTTP client's
	// Timeout: the SDK wraps the client's transport in a RoundTripper of its own, which
	// net/http does not know, and for such a one a client Timeout costs every call a
	// goroutine, a timer and two channels (http.setRequestCancel).
	hc := new(http.Client)
	*hc = *httpclient.Client(cfg.HTTPClient, 0) // a copy: its Timeout is cleared below
	callTimeout := cfg.Timeout
	if hc.Timeout > 0 && hc.Timeout < callTimeout {
		callTimeout = hc.Timeout
	}
	hc.Timeout = 0
	// The client and the models service are built from these options alone, not
	// through openai.NewClient: that one adds the SDK's environment defaults
	// (OPENAI_API_KEY, OPENAI_ADMIN_KEY, OPENAI_CUSTOM_HEADERS, …) to every call, behind
	// Config's back, and wraps each call's options in layers it unwinds per call.
	opts := []option.RequestOption{
		option.WithBaseURL(strings.TrimRight(cfg.BaseURL, "/") + "/"),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // llm/resilient retries, with Fathom's classification
		option.WithMiddleware(wire.Bound("openai", cfg.MaxResponseBytes, errorFields)),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.Organization != "" {
		opts = append(opts, option.WithOrganization(cfg.Organization))
	}
	if cfg.Project != "" {
		opts = append(opts, option.WithProject(cfg.Project))
	}
	return &Client{cfg: cfg, api: openai.Client{Options: opts}, models: openai.NewModelService(opts...), callTimeout: callTimeout}, nil
}

// withTimeout bounds a call's context by callTimeout.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.callTimeout)
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

// chatPath is the chat completions endpoint, relative to the base URL.
const chatPath = "chat/completions"

// Chat implements llm.Provider: one POST /chat/completions, no retries.
func (c *Client) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if len(req.Messages) == 0 {
		return llm.Response{}, errors.New("openai: chat request has no messages")
	}
	model := req.Model
	if model == "" {
		model = c.cfg.Model
	}
	body := wire.NewBody()
	defer body.Release()
	var err error
	if body.Buf, err = c.encode(body.Buf, req, model); err != nil {
		return llm.Response{}, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	ctx = wire.WithBody(ctx, body)
	start := time.Now()
	var resp llm.Response
	if req.OnDelta != nil {
		resp, err = c.stream(ctx, req.OnDelta, body.Buf)
	} else {
		resp, err = c.complete(ctx, body.Buf)
	}
	if err != nil {
		return llm.Response{}, err
	}
	if resp.Model == "" {
		resp.Model = model
	}
	resp.Duration = time.Since(start)
	return resp, nil
}

// encode appends req to b[:0] as the body of POST /chat/completions. The conversation
// and the tools, which Fathom holds in the API's own simple shapes, are appended
// directly (wire.AppendString), without reflection: encoding a long history was most of
// a call's own cost, through the SDK's reflective encoder and through encoding/json
// alike. The rarer options are the SDK's typed params, each encoded only when set. b is
// a pooled buffer (wire.Body), so a session's calls reuse one buffer's room.
func (c *Client) encode(b []byte, req llm.Request, model string) ([]byte, error) {
	n := 256 + len(model)
	for _, m := range req.Messages {
		n += 48 + len(m.Content) + len(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			n += 80 + len(tc.ID) + len(tc.Name) + len(tc.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += 64 + len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	if n += n / 16; cap(b) < n { // room for escapes
		b = make([]byte, 0, n)
	}
	b = append(b[:0], `{"model":`...)
	b = wire.AppendString(b, model)
	b, err := appendMessages(b, req.Messages)
	if err != nil {
		return nil, err
	}
	if b, err = appendTools(b, req.Tools); err != nil {
		return nil, err
	}
	if req.MaxTokens > 0 {
		if c.cfg.LegacyMaxTokens {
			b = append(b, `,"max_tokens":`...)
		} else {
			b = append(b, `,"max_completion_tokens":`...)
		}
		b = strconv.AppendInt(b, int64(req.MaxTokens), 10)
	}
	if t := req.Temperature; t != nil {
		if math.IsNaN(*t) || math.IsInf(*t, 0) {
			return nil, fmt.Errorf("openai: temperature %v is not a number", *t)
		}
		b = append(b, `,"temperature":`...)
		b = strconv.AppendFloat(b, *t, 'g', -1, 64)
	}
	if req.OnDelta != nil {
		b = append(b, `,"stream":true,"stream_options":{"include_usage":true}`...)
	}
	if b, err = appendOptions(b, req); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// appendMessages appends `,"messages":[...]`: the conversation in the API's shape
// (tool calls nest a "function"; an assistant turn of tool calls alone has no content).
func appendMessages(b []byte, ms []llm.Message) ([]byte, error) {
	b = append(b, `,"messages":[`...)
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		switch m.Role {
		case "system", "user", "tool":
			b = wire.AppendString(b, m.Role)
			b = append(b, `,"content":`...)
			b = wire.AppendString(b, m.Content)
		case "assistant":
			b = append(b, `"assistant"`...)
			if m.Content != "" || len(m.ToolCalls) == 0 {
				b = append(b, `,"content":`...)
				b = wire.AppendString(b, m.Content)
			}
			if len(m.ToolCalls) > 0 {
				b = append(b, `,"tool_calls":[`...)
				for j, tc := range m.ToolCalls {
					if j > 0 {
						b = append(b, ',')
					}
					b = append(b, `{"id":`...)
					b = wire.AppendString(b, tc.ID)
					b = append(b, `,"type":"function","function":{"name":`...)
					b = wire.AppendString(b, tc.Name)
					b = append(b, `,"arguments":`...)
					b = wire.AppendString(b, tc.Arguments)
					b = append(b, `}}`...)
				}
				b = append(b, ']')
			}
		default:
			return nil, fmt.Errorf("openai: message %d: unsupported role %q", i, m.Role)
		}
		if m.ToolCallID != "" {
			b = append(b, `,"tool_call_id":`...)
			b = wire.AppendString(b, m.ToolCallID)
		}
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// appendTools appends `,"tools":[...]` (nothing without tools); each tool's parameters
// schema goes out as given, compacted (which checks that it is JSON).
func appendTools(b []byte, tools []llm.ToolSpec) ([]byte, error) {
	if len(tools) == 0 {
		return b, nil
	}
	b = append(b, `,"tools":[`...)
	for i, t := range tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"function","function":{"name":`...)
		b = wire.AppendString(b, t.Name)
		if t.Description != "" {
			b = append(b, `,"description":`...)
			b = wire.AppendString(b, t.Description)
		}
		if len(t.Parameters) > 0 {
			b = append(b, `,"parameters":`...)
			var ok bool
			if b, ok = wire.AppendCompact(b, t.Parameters); !ok {
				return nil, fmt.Errorf("openai: tool %s: parameters are not valid JSON", t.Name)
			}
		}
		b = append(b, `}}`...)
	}
	return append(b, ']'), nil
}

// appendOptions appends the request's rarer options, each in the SDK's param type and
// encoding: tool_choice, parallel_tool_calls, response_format and reasoning_effort.
func appendOptions(b []byte, req llm.Request) ([]byte, error) {
	field := func(b []byte, key string, v any) ([]byte, error) {
		enc, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("openai: encode %s: %w", key, err)
		}
		b = append(b, ',', '"')
		b = append(b, key...)
		b = append(b, '"', ':')
		return append(b, enc...), nil
	}
	var err error
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		b, err = field(b, "tool_choice", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt(req.ToolChoice)})
	default:
		b, err = field(b, "tool_choice", openai.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &openai.ChatCompletionNamedToolChoiceParam{
			Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: req.ToolChoice}}})
	}
	if err != nil {
		return nil, err
	}
	if req.ParallelToolCalls != nil && len(req.Tools) > 0 {
		b = append(b, `,"parallel_tool_calls":`...)
		b = strconv.AppendBool(b, *req.ParallelToolCalls)
	}
	if f := req.ResponseFormat; f != nil {
		js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: f.Name, Schema: f.Schema}
		if f.Description != "" {
			js.Description = param.NewOpt(f.Description)
		}
		if f.Strict {
			js.Strict = param.NewOpt(true)
		}
		if b, err = field(b, "response_format", openai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}}); err != nil {
			return nil, err
		}
	}
	if req.ReasoningEffort != "" {
		b = append(b, `,"reasoning_effort":`...)
		b = wire.AppendString(b, string(shared.ReasoningEffort(req.ReasoningEffort)))
	}
	return b, nil
}

// wireToolCall is a tool call in an answer.
type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
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
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   wireUsage    `json:"usage"`
}

type chatChoice struct {
	Message      chatMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
}

type chatMessage struct {
	Content   *string        `json:"content"`
	ToolCalls []wireToolCall `json:"tool_calls"`
}

// decodeChat decodes a chat.completion: by wire.Scanner when the answer has the usual
// shape, else (and for the final word on an error) by encoding/json. The scanner reads
// the few fields above without reflection, at a fraction of the cost.
func decodeChat(data []byte) (chatResponse, error) {
	var out chatResponse
	if scanChat(data, &out) {
		return out, nil
	}
	return unmarshalChat(data)
}

// unmarshalChat is decodeChat by encoding/json alone (apart, so that decodeChat's
// result does not move to the heap).
func unmarshalChat(data []byte) (chatResponse, error) {
	var out chatResponse
	err := json.Unmarshal(data, &out)
	return out, err
}

// scanChat decodes data into out with a wire.Scanner and reports whether it could.
func scanChat(data []byte, out *chatResponse) bool {
	sc := wire.NewScanner(data)
	var seen uint32
	sc.Object(func(key []byte) {
		switch {
		case sc.Key(key, "model"):
			sc.Once(&seen, 1)
			out.Model = sc.String()
		case sc.Key(key, "choices"):
			sc.Once(&seen, 2)
			if sc.Array(func() {
				out.Choices = append(out.Choices, chatChoice{})
				scanChoice(sc, &out.Choices[len(out.Choices)-1])
			}) && out.Choices == nil {
				out.Choices = []chatChoice{}
			}
		case sc.Key(key, "usage"):
			sc.Once(&seen, 4)
			scanUsage(sc, &out.Usage)
		default:
			sc.Skip()
		}
	})
	return sc.End()
}

func scanChoice(sc *wire.Scanner, ch *chatChoice) {
	var seen uint32
	sc.Object(func(key []byte) {
		switch {
		case sc.Key(key, "finish_reason"):
			sc.Once(&seen, 1)
			ch.FinishReason = sc.String()
		case sc.Key(key, "message"):
			sc.Once(&seen, 2)
			var seen uint32
			sc.Object(func(key []byte) {
				switch {
				case sc.Key(key, "content"):
					sc.Once(&seen, 1)
					if !sc.Null() {
						s := sc.String()
						ch.Message.Content = &s
					}
				case sc.Key(key, "tool_calls"):
					sc.Once(&seen, 2)
					if sc.Array(func() {
						ch.Message.ToolCalls = append(ch.Message.ToolCalls, wireToolCall{})
						scanToolCall(sc, &ch.Message.ToolCalls[len(ch.Message.ToolCalls)-1])
					}) && ch.Message.ToolCalls == nil {
						ch.Message.ToolCalls = []wireToolCall{}
					}
				default:
					sc.Skip()
				}
			})
		default:
			sc.Skip()
		}
	})
}

func scanToolCall(sc *wire.Scanner, tc *wireToolCall) {
	var seen uint32
	sc.Object(func(key []byte) {
		switch {
		case sc.Key(key, "id"):
			sc.Once(&seen, 1)
			tc.ID = sc.String()
		case sc.Key(key, "type"):
			sc.Once(&seen, 2)
			tc.Type = sc.String()
		case sc.Key(key, "function"):
			sc.Once(&seen, 4)
			var seen uint32
			sc.Object(func(key []byte) {
				switch {
				case sc.Key(key, "name"):
					sc.Once(&seen, 1)
					tc.Function.Name = sc.String()
				case sc.Key(key, "arguments"):
					sc.Once(&seen, 2)
					tc.Function.Arguments = sc.String()
				default:
					sc.Skip()
				}
			})
		default:
			sc.Skip()
		}
	})
}

func scanUsage(sc *wire.Scanner, u *wireUsage) {
	var seen uint32
	sc.Object(func(key []byte) {
		switch {
		case sc.Key(key, "prompt_tokens"):
			sc.Once(&seen, 1)
			u.PromptTokens = sc.Int()
		case sc.Key(key, "completion_tokens"):
			sc.Once(&seen, 2)
			u.CompletionTokens = sc.Int()
		case sc.Key(key, "total_tokens"):
			sc.Once(&seen, 4)
			u.TotalTokens = sc.Int()
		case sc.Key(key, "prompt_tokens_details"):
			sc.Once(&seen, 8)
			var seen uint32
			sc.Object(func(key []byte) {
				if sc.Key(key, "cached_tokens") {
					sc.Once(&seen, 1)
					u.PromptTokensDetails.CachedTokens = sc.Int()
				} else {
					sc.Skip()
				}
			})
		case sc.Key(key, "completion_tokens_details"):
			sc.Once(&seen, 16)
			var seen uint32
			sc.Object(func(key []byte) {
				if sc.Key(key, "reasoning_tokens") {
					sc.Once(&seen, 1)
					u.CompletionTokensDetails.ReasoningTokens = sc.Int()
				} else {
					sc.Skip()
				}
			})
		default:
			sc.Skip()
		}
	})
}

// complete makes a non-streamed call. The SDK sends it; the answer is decoded into
// chatResponse, a plain struct (the SDK's reflective decoder of its own type costs more
// than the rest of the call).
func (c *Client) complete(ctx context.Context, body []byte) (llm.Response, error) {
	var raw *http.Response
	// The params are in body already: the SDK's own encoding of them is replaced.
	if err := c.api.Post(ctx, chatPath, body, &raw); err != nil {
		return llm.Response{}, callError(err)
	}
	defer raw.Body.Close()
	data, release, err := wire.ReadBody(raw.Body)
	if err != nil {
		if errors.Is(err, wire.ErrTooLarge) {
			return llm.Response{}, err
		}
		return llm.Response{}, fmt.Errorf("openai: read /chat/completions response: %w", callError(err))
	}
	out, err := decodeChat(data)
	release()
	if err != nil {
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
func (c *Client) stream(ctx context.Context, onDelta func(string), body []byte) (llm.Response, error) {
	var (
		tr  wire.Tracker
		raw *http.Response
	)
	// The SDK sends the request; its SSE decoder reads the answer into streamChunk, a
	// plain struct: the SDK's own chunk type decodes reflectively, event by event, at
	// several times the cost.
	if err := c.api.Post(wire.WithTracker(ctx, &tr), chatPath, body, &raw, option.WithHeader("Accept", "text/event-stream")); err != nil {
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
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	page, err := c.models.List(ctx)
	if err != nil {
		return nil, callError(err)
	}
	ids := make([]string, len(page.Data))
	for i, m := range page.Data {
		ids[i] = m.ID
	}
	return ids, nil
}
