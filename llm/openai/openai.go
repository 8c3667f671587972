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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"
	"github.com/tidwall/gjson"

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
	// api makes the chat calls with a body the client encodes (body), and models
	// lists the models, with the SDK's own request and answer types.
	api    *openai.Client
	models openai.ModelService
	// callTimeout bounds each call through its context: Config.Timeout, or the HTTP
	// client's Timeout when that is shorter (the client itself is used without one).
	callTimeout time.Duration
	// msgMemo and toolMemo keep the SDK's encoding of the messages and tools the
	// calls send again and again, as the SDK writes them into a request body.
	msgMemo  *wire.Memo[llm.Message, []byte]
	toolMemo *wire.Memo[llm.ToolSpec, []byte]
	// heads keeps the SDK's encoding of the params around the messages and the tools,
	// per set of request options (head).
	headsMu sync.Mutex
	heads   map[headKey]*encodedHead
}

// Bounds of the client's encoding memos, per generation (wire.Memo keeps two).
const (
	msgMemoBytes  = 8 << 20
	toolMemoBytes = 1 << 20
	// msgSightings is how many messages sent once the message memo remembers (by
	// hash, per generation: wire.Memo.AdmitOnSecondSighting), several times the
	// messages a generation of msgMemoBytes holds: a message sent again before that
	// many new ones is kept.
	msgSightings = 64 << 10
	// msgHeldBytes bounds the messages sent once that the message memo holds with
	// their encodings, per generation (wire.Memo.HoldFirstSightings), so that a
	// session's newest messages, sent again with its next call, are encoded once: room
	// for the new messages of the calls of a few hundred sessions.
	msgHeldBytes = 1 << 20
)

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
	return &Client{cfg: cfg, api: &openai.Client{Options: opts}, models: openai.NewModelService(opts...), callTimeout: callTimeout,
		msgMemo:  wire.MessageMemo[[]byte](msgMemoBytes, false).AdmitOnSecondSighting(msgSightings).HoldFirstSightings(msgHeldBytes),
		toolMemo: wire.ToolMemo[[]byte](toolMemoBytes), heads: make(map[headKey]*encodedHead)}, nil
}

// withTimeout bounds a call's context by callTimeout (wire.WithTimeout).
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return wire.WithTimeout(ctx, c.callTimeout)
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

// Chat implements llm.Provider: one POST /chat/completions, no retries. The answer goes
// straight into the named result: this frame is on the stack while the call waits on the
// network, and a local llm.Response would be 152 bytes more there (see llm.Provider).
func (c *Client) Chat(ctx context.Context, req llm.Request) (resp llm.Response, err error) {
	if len(req.Messages) == 0 {
		return llm.Response{}, errors.New("openai: chat request has no messages")
	}
	model := req.Model
	if model == "" {
		model = c.cfg.Model
	}
	body, err := c.body(req, model)
	if err != nil {
		return llm.Response{}, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	ctx, payload := body.Send(ctx)
	start := time.Now()
	if req.OnDelta != nil {
		resp, err = c.stream(ctx, req.OnDelta, payload)
	} else {
		resp, err = c.complete(ctx, payload)
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

// messagesSlot and toolsSlot stand for the messages and the tools in the params that
// head has the SDK encode: one element each, which body replaces with the memos'
// encodings.
var (
	messagesSlot = []openai.ChatCompletionMessageParamUnion{param.Override[openai.ChatCompletionMessageParamUnion](json.RawMessage("0"))}
	toolsSlot    = []openai.ChatCompletionToolUnionParam{param.Override[openai.ChatCompletionToolUnionParam](json.RawMessage("0"))}
)

// body is the request body of req: the SDK's encoding of its params (params), byte
// for byte, made without encoding the conversation and the tools again. The SDK
// encodes the params with one placeholder in the messages array and in the tools
// array (head), and body puts the memos' encodings of the messages and tools there
// (the SDK would encode each message and tool again on every call, which is most of a
// call's encoding cost: a session's history only grows at its end). The body keeps
// those encodings, not a copy of them (wire.Body).
func (c *Client) body(req llm.Request, model string) (*wire.Body, error) {
	msgs, err := c.messages(req.Messages)
	if err != nil {
		return nil, err
	}
	tools, err := c.tools(req.Tools)
	if err != nil {
		return nil, err
	}
	h, err := c.head(req, model)
	if err != nil {
		return nil, err
	}
	parts := [...][][]byte{slotMessages: msgs, slotTools: tools}
	arrays := make([][][]byte, len(h.slots))
	for i, s := range h.slots {
		arrays[i] = parts[s]
	}
	return wire.NewBody(h.segs, arrays...), nil
}

// The placeholders of a head: the messages array and the tools array.
const (
	slotMessages = iota
	slotTools
)

// encodedHead is the SDK's encoding of a request's params with a placeholder array for
// the messages and, with tools, one for the tools, cut around the placeholders:
// segs[0], the array of slots[0], segs[1], the array of slots[1] (if any), segs[2].
type encodedHead struct {
	segs  [][]byte
	slots []int
}

// headKey is everything of a request that its params (params) but the messages and
// the tools' encodings depend on; equal keys make equal heads.
type headKey struct {
	model, toolChoice, effort                   string
	maxTokens                                   int
	temperature                                 uint64 // its bits: 0 and -0 encode apart
	hasTemperature, stream, tools               bool
	hasParallel, parallel                       bool
	hasFormat, formatStrict, formatNil          bool
	formatName, formatDescription, formatSchema string
}

// maxHeads bounds the heads a client keeps; a client asks with a handful of option
// sets (per model: step calls, plan calls with their response format, streamed
// calls), so a full cache is emptied and filled again.
const maxHeads = 64

// head is the encoded head of req's params, made by the SDK once per key and kept.
func (c *Client) head(req llm.Request, model string) (*encodedHead, error) {
	k := headKey{model: model, toolChoice: req.ToolChoice, effort: req.ReasoningEffort, maxTokens: req.MaxTokens,
		stream: req.OnDelta != nil, tools: len(req.Tools) > 0}
	if t := req.Temperature; t != nil {
		k.hasTemperature, k.temperature = true, math.Float64bits(*t)
	}
	if req.ParallelToolCalls != nil && len(req.Tools) > 0 {
		k.hasParallel, k.parallel = true, *req.ParallelToolCalls
	}
	if f := req.ResponseFormat; f != nil {
		k.hasFormat, k.formatStrict, k.formatNil = true, f.Strict, f.Schema == nil
		k.formatName, k.formatDescription, k.formatSchema = f.Name, f.Description, string(f.Schema)
	}
	c.headsMu.Lock()
	h, ok := c.heads[k]
	c.headsMu.Unlock()
	if ok {
		return h, nil
	}
	h, err := c.encodeHead(req, model)
	if err != nil {
		return nil, err
	}
	c.headsMu.Lock()
	defer c.headsMu.Unlock()
	if len(c.heads) >= maxHeads {
		clear(c.heads)
	}
	c.heads[k] = h
	return h, nil
}

// encodeHead has the SDK encode req's params with the placeholders, and finds them.
func (c *Client) encodeHead(req llm.Request, model string) (*encodedHead, error) {
	p, err := c.params(req, model)
	if err != nil {
		return nil, err
	}
	p.Messages = messagesSlot
	if len(req.Tools) > 0 {
		p.Tools = toolsSlot
	}
	if req.OnDelta != nil {
		// As the SDK's NewStreaming, which sets "stream":true in the encoded body
		// (option.WithJSONSet, after every other field): the SDK writes an extra field
		// there too, and the head keeps it instead of every call setting it in its
		// whole body again (TestStreamedBodyIsTheSDKs).
		p.SetExtraFields(map[string]any{"stream": true})
	}
	enc, err := p.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("openai: encode request: %w", err)
	}
	// The placeholders, top-level fields of enc, in the order they appear in it.
	type slot struct {
		at   gjson.Result
		kind int
	}
	slots := []slot{{gjson.GetBytes(enc, "messages"), slotMessages}}
	if len(req.Tools) > 0 {
		slots = append(slots, slot{gjson.GetBytes(enc, "tools"), slotTools})
	}
	if len(slots) == 2 && slots[1].at.Index < slots[0].at.Index {
		slots[0], slots[1] = slots[1], slots[0]
	}
	h := &encodedHead{}
	from := 0
	for _, s := range slots {
		if s.at.Raw != "[0]" || s.at.Index < from {
			return nil, fmt.Errorf("openai: encode request: no placeholder array in %.64q", enc)
		}
		h.segs = append(h.segs, enc[from:s.at.Index])
		h.slots = append(h.slots, s.kind)
		from = s.at.Index + len(s.at.Raw)
	}
	h.segs = append(h.segs, enc[from:])
	return h, nil
}

// params translates req into the SDK's request params, all but the messages and the
// tools (body encodes those).
func (c *Client) params(req llm.Request, model string) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	if req.MaxTokens > 0 {
		if c.cfg.LegacyMaxTokens {
			p.MaxTokens = param.NewOpt(int64(req.MaxTokens))
		} else {
			p.MaxCompletionTokens = param.NewOpt(int64(req.MaxTokens))
		}
	}
	if t := req.Temperature; t != nil {
		if math.IsNaN(*t) || math.IsInf(*t, 0) {
			return p, fmt.Errorf("openai: temperature %v is not a number", *t)
		}
		p.Temperature = param.NewOpt(*t)
	}
	if req.OnDelta != nil { // NewStreaming adds "stream":true
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt(req.ToolChoice)}
	default:
		p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &openai.ChatCompletionNamedToolChoiceParam{
			Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: req.ToolChoice}}}
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
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}}
	}
	if req.ReasoningEffort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(req.ReasoningEffort)
	}
	return p, nil
}

// messages is the conversation as the SDK encodes it in a request body, message by
// message. Each message's encoding (messageEncoding) is made once and kept
// in the client's memo: a session's history only grows at its end, so a call sends
// the previous call's messages again.
func (c *Client) messages(ms []llm.Message) ([][]byte, error) {
	out := make([][]byte, 0, len(ms))
	for i := range ms {
		m := &ms[i]
		switch m.Role {
		case "system", "user", "tool", "assistant":
		default:
			return nil, fmt.Errorf("openai: message %d: unsupported role %q", i, m.Role)
		}
		sum := c.msgMemo.Sum(m)
		p, ok := c.msgMemo.Get(sum, m)
		if !ok {
			enc, err := messageEncoding(m)
			if err != nil {
				return nil, fmt.Errorf("openai: encode message %d: %w", i, err)
			}
			p = enc
			c.msgMemo.Put(sum, m, p, len(enc))
		}
		out = append(out, p)
	}
	return out, nil
}

// messageParam is m in the SDK's message params (an assistant turn of tool calls alone
// has no content); m's role is one of the four.
func messageParam(m *llm.Message) openai.ChatCompletionMessageParamUnion {
	switch m.Role {
	case "system":
		return openai.SystemMessage(m.Content)
	case "user":
		return openai.UserMessage(m.Content)
	case "tool":
		return openai.ToolMessage(m.Content, m.ToolCallID)
	}
	a := openai.ChatCompletionAssistantMessageParam{}
	if m.Content != "" || len(m.ToolCalls) == 0 {
		a.Content.OfString = param.NewOpt(m.Content)
	}
	for _, tc := range m.ToolCalls {
		a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID: tc.ID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: tc.Arguments}}})
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

// tools is the request's tools as the SDK encodes them in a request body; each tool's
// parameters schema must be a JSON object. Each is the SDK's encoding of its param
// (toolEncoding of toolParam), made once and kept in the client's memo: the same tools
// go with every call.
func (c *Client) tools(ts []llm.ToolSpec) ([][]byte, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	out := make([][]byte, 0, len(ts))
	for i := range ts {
		t := &ts[i]
		sum := c.toolMemo.Sum(t)
		p, ok := c.toolMemo.Get(sum, t)
		if !ok {
			tp, err := toolParam(t)
			if err != nil {
				return nil, err
			}
			enc, err := toolEncoding(tp)
			if err != nil {
				return nil, fmt.Errorf("openai: encode tool %s: %w", t.Name, err)
			}
			p = enc
			c.toolMemo.Put(sum, t, p, len(enc))
		}
		out = append(out, p)
	}
	return out, nil
}

// messageEncoding is the bytes the SDK writes for m inside a request body: the
// encoding of the variant of its message param (messageParam). The SDK encodes a
// request's params (param.MarshalObject) with compaction skipped, so each element of
// the messages array is its own MarshalJSON's output, and a union's
// (param.MarshalUnion) is that of its one variant, byte for byte
// (TestMemoizedBodyIsTheSDKs and FuzzBodyIsTheSDKs pin it).
func messageEncoding(m *llm.Message) ([]byte, error) {
	switch u := messageParam(m); {
	case u.OfSystem != nil:
		return u.OfSystem.MarshalJSON()
	case u.OfUser != nil:
		return u.OfUser.MarshalJSON()
	case u.OfTool != nil:
		return u.OfTool.MarshalJSON()
	case u.OfAssistant != nil:
		return u.OfAssistant.MarshalJSON()
	default:
		return u.MarshalJSON()
	}
}

// toolEncoding is the bytes the SDK writes for t inside a request body: the encoding
// of its variant, as for a message (messageEncoding).
func toolEncoding(t openai.ChatCompletionToolUnionParam) ([]byte, error) {
	if t.OfFunction != nil {
		return t.OfFunction.MarshalJSON()
	}
	return t.MarshalJSON()
}

// toolParam is t in the SDK's tool params.
func toolParam(t *llm.ToolSpec) (openai.ChatCompletionToolUnionParam, error) {
	fn := shared.FunctionDefinitionParam{Name: t.Name}
	if t.Description != "" {
		fn.Description = param.NewOpt(t.Description)
	}
	if len(t.Parameters) > 0 {
		if err := json.Unmarshal(t.Parameters, &fn.Parameters); err != nil {
			return openai.ChatCompletionToolUnionParam{}, fmt.Errorf("openai: tool %s: parameters are not valid JSON: %w", t.Name, err)
		}
	}
	return openai.ChatCompletionFunctionTool(fn), nil
}

// usage converts the API's usage.
func usage(u openai.CompletionUsage) llm.Usage {
	return llm.Usage{
		InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		CachedInputTokens: u.PromptTokensDetails.CachedTokens,
		ReasoningTokens:   u.CompletionTokensDetails.ReasoningTokens,
	}
}

// chatPath is the chat completions endpoint, relative to the base URL.
const chatPath = "chat/completions"

// complete makes a non-streamed call with body; the SDK reads the answer, and decoded
// decodes it.
func (c *Client) complete(ctx context.Context, body any) (llm.Response, error) {
	var raw []byte
	if err := c.api.Post(ctx, chatPath, body, &raw); err != nil {
		return llm.Response{}, callError(err)
	}
	return c.decoded(raw)
}

// decoded converts the chat.completion answer raw. It is a function of its own, never
// inlined, because the SDK's ChatCompletion it decodes into is about 4 KB: in complete's
// frame it would sit on the calling goroutine's stack for the whole call, keeping that
// stack a size larger while it waits on the network (a cost per call in flight).
//
//go:noinline
func (c *Client) decoded(raw []byte) (llm.Response, error) {
	out, err := decodeChat(raw)
	if err != nil {
		return llm.Response{}, fmt.Errorf("openai: decode /chat/completions response: %w", err)
	}
	return c.response(&out)
}

// decodeChat decodes a chat.completion answer with the SDK's decoder
// (ChatCompletion.UnmarshalJSON), as the SDK's requestconfig does through a
// json.Decoder, without that decoder's two scans and copy of the answer. Not JSON
// (the SDK's decoder itself is lenient) is an error wrapping llm.ErrMalformedResponse;
// so is JSON followed by more than white space, which the json.Decoder ignored.
func decodeChat(raw []byte) (openai.ChatCompletion, error) {
	var out openai.ChatCompletion
	if !json.Valid(raw) {
		err := json.Unmarshal(raw, new(json.RawMessage)) // what is wrong with it
		if err == nil {
			err = errors.New("not JSON")
		}
		return out, errors.Join(llm.ErrMalformedResponse, err)
	}
	if err := out.UnmarshalJSON(bytes.TrimSpace(raw)); err != nil {
		return out, errors.Join(llm.ErrMalformedResponse, err)
	}
	return out, nil
}

// response converts a chat.completion.
func (c *Client) response(out *openai.ChatCompletion) (llm.Response, error) {
	if len(out.Choices) == 0 {
		return llm.Response{}, fmt.Errorf("openai: chat completion from %s has no choices", c.cfg.BaseURL)
	}
	ch := out.Choices[0]
	// The SDK's strings are slices of the whole answer's text (gjson): each is cloned so
	// that what the session keeps (the content, the model's name, the tool calls: for the
	// session's life) does not keep the whole answer and its decoded metadata alive.
	resp := llm.Response{Content: strings.Clone(ch.Message.Content), FinishReason: strings.Clone(ch.FinishReason),
		Model: strings.Clone(out.Model), Usage: usage(out.Usage)}
	for _, tc := range ch.Message.ToolCalls {
		resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{ID: strings.Clone(tc.ID), Name: strings.Clone(tc.Function.Name),
			Arguments: strings.Clone(tc.Function.Arguments)})
	}
	return resp, nil
}

// maxToolCalls bounds a streamed tool call index, so a broken stream cannot make the
// client allocate without limit.
const maxToolCalls = 1024

// streamOptions make a call streamed, as the SDK's NewStreaming does (its body, with
// "stream":true, is body's).
var streamOptions = []option.RequestOption{option.WithHeader("Accept", "text/event-stream")}

// stream reads a streamed chat completion chunk by chunk, calling onDelta for each text
// delta and assembling tool calls from their fragments. The stream must end with
// "data: [DONE]"; anything else is an error wrapping io.ErrUnexpectedEOF (retryable).
func (c *Client) stream(ctx context.Context, onDelta func(string), body any) (llm.Response, error) {
	var tr wire.Tracker
	// As the SDK's NewStreaming: "stream":true in the body (see encodeHead), the raw
	// answer read as server-sent events.
	var raw *http.Response
	err := c.api.Post(wire.WithTracker(ctx, &tr), chatPath, body, &raw, streamOptions...)
	s := ssestream.NewStream[openai.ChatCompletionChunk](ssestream.NewDecoder(raw), err)
	defer s.Close()
	var acc streamed
	for s.Next() {
		if err := acc.add(s, onDelta); err != nil {
			return llm.Response{}, err
		}
	}
	return acc.end(s, &tr)
}

// streamed is what a stream's chunks made so far. Its methods are never inlined: a
// chunk (the SDK's ChatCompletionChunk) is about 3 KB, and in stream's frame it would
// sit on the calling goroutine's stack while it waits for the next one (see decoded).
type streamed struct {
	out     llm.Response
	content strings.Builder
	calls   []llm.ToolCall
}

// add takes the stream's current chunk.
//
//go:noinline
func (a *streamed) add(s *ssestream.Stream[openai.ChatCompletionChunk], onDelta func(string)) error {
	ch := s.Current()
	if ch.Model != "" && ch.Model != a.out.Model {
		a.out.Model = strings.Clone(ch.Model) // not a slice of the chunk (see response)
	}
	if ch.JSON.Usage.Valid() {
		a.out.Usage = usage(ch.Usage)
	}
	for _, choice := range ch.Choices {
		if d := choice.Delta.Content; d != "" {
			a.content.WriteString(d)
			onDelta(d)
		}
		for _, tc := range choice.Delta.ToolCalls {
			if tc.Index < 0 || tc.Index >= maxToolCalls {
				return fmt.Errorf("openai: stream tool call index %d out of range", tc.Index)
			}
			for int64(len(a.calls)) <= tc.Index {
				a.calls = append(a.calls, llm.ToolCall{})
			}
			if tc.ID != "" {
				a.calls[tc.Index].ID = strings.Clone(tc.ID)
			}
			a.calls[tc.Index].Name += tc.Function.Name
			a.calls[tc.Index].Arguments += tc.Function.Arguments
		}
		if choice.FinishReason != "" {
			a.out.FinishReason = strings.Clone(choice.FinishReason)
		}
	}
	return nil
}

// end is the answer once the stream s ended: an error unless it ended with
// "data: [DONE]" (tr).
//
//go:noinline
func (a *streamed) end(s *ssestream.Stream[openai.ChatCompletionChunk], tr *wire.Tracker) (llm.Response, error) {
	if err := s.Err(); err != nil {
		if malformed(err) {
			return llm.Response{}, fmt.Errorf("openai: malformed stream chunk: %w", errors.Join(llm.ErrMalformedResponse, err))
		}
		return llm.Response{}, fmt.Errorf("openai: stream cut after %d bytes: %w", a.content.Len(), callError(err))
	}
	if !tr.EndsWithDone() {
		return llm.Response{}, fmt.Errorf("openai: stream cut after %d bytes: %w", a.content.Len(), io.ErrUnexpectedEOF)
	}
	// A name or arguments sent whole in one chunk are that chunk's slices ("" + s is s).
	for i := range a.calls {
		a.calls[i].Name, a.calls[i].Arguments = strings.Clone(a.calls[i].Name), strings.Clone(a.calls[i].Arguments)
	}
	a.out.Content, a.out.ToolCalls = a.content.String(), a.calls
	return a.out, nil
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
