package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/fathom-agents/fathom/internal/httpclient"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/internal/wire"
)

// APIVersion is the anthropic-version header every request carries.
const APIVersion = "2023-06-01"

// Config configures a Client.
type Config struct {
	// BaseURL is the API root without the version path, e.g. https://api.anthropic.com;
	// requests go to {BaseURL}/v1/messages.
	BaseURL string
	// APIKey is sent in the x-api-key header when set.
	APIKey string
	// AuthToken, when set, is sent as "Authorization: Bearer" (env ANTHROPIC_AUTH_TOKEN),
	// for gateways that take a bearer token instead of an API key.
	AuthToken string
	// Model is used when a request names none.
	Model string
	// MaxTokens bounds a completion when a request sets no MaxTokens (the API requires a
	// bound; env ANTHROPIC_MAX_TOKENS). Zero means 4096. With extended thinking the
	// bound is raised to the thinking budget plus this, as the API requires
	// max_tokens > budget_tokens.
	MaxTokens int
	// HTTPClient, when set, is used instead of a client built from Timeout. A nil
	// Transport in it is the node's shared transport (idle connections kept for
	// concurrent calls), never net/http's default.
	HTTPClient *http.Client
	// Timeout bounds one call, including reading the body. Zero means 2 minutes.
	Timeout time.Duration
	// MaxResponseBytes bounds a response body (a stream: the sum of its events' data).
	// Zero means 8 MiB.
	MaxResponseBytes int64
}

// DefaultConfig returns the configuration for api.anthropic.com with claude-sonnet-4-6
// and 4096 completion tokens.
func DefaultConfig() Config {
	return Config{BaseURL: "https://api.anthropic.com", Model: "claude-sonnet-4-6", MaxTokens: 4096, Timeout: 2 * time.Minute, MaxResponseBytes: 8 << 20}
}

// ConfigFromEnv starts from DefaultConfig and applies ANTHROPIC_BASE_URL,
// ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, FATHOM_MODEL and ANTHROPIC_MAX_TOKENS when
// set; a
// ANTHROPIC_MAX_TOKENS that is not a positive integer is an error.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := DefaultConfig()
	if v := getenv("ANTHROPIC_BASE_URL"); v != "" {
		c.BaseURL = v
	}
	c.APIKey, c.AuthToken = getenv("ANTHROPIC_API_KEY"), getenv("ANTHROPIC_AUTH_TOKEN")
	if v := getenv("FATHOM_MODEL"); v != "" {
		c.Model = v
	}
	if v := getenv("ANTHROPIC_MAX_TOKENS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("anthropic: ANTHROPIC_MAX_TOKENS=%q: want a positive number of tokens", v)
		}
		c.MaxTokens = n
	}
	return c, nil
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("anthropic: base URL %q must be an http(s) URL such as https://api.anthropic.com", c.BaseURL)
	}
	if c.Timeout < 0 || c.MaxResponseBytes < 0 || c.MaxTokens < 0 {
		return errors.New("anthropic: timeout, max tokens and max response bytes must not be negative")
	}
	return nil
}

// Client is an llm.Provider for the Anthropic Messages API, built on the official Go
// SDK. It is safe for concurrent use.
type Client struct {
	cfg Config
	// msgs is the SDK's Messages service, built from Config's options alone (see New).
	msgs anthropic.MessageService
}

var _ llm.Provider = (*Client)(nil)

// New returns a client for cfg; zero fields take DefaultConfig's values.
func New(cfg Config) (*Client, error) {
	d := DefaultConfig()
	if cfg.BaseURL == "" {
		cfg.BaseURL = d.BaseURL
	}
	if cfg.Model == "" {
		cfg.Model = d.Model
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = d.MaxTokens
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
	opts := []option.RequestOption{
		option.WithBaseURL(strings.TrimRight(cfg.BaseURL, "/") + "/"),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // llm/resilient retries, with Fathom's classification
		option.WithHeader("anthropic-version", APIVersion),
		option.WithMiddleware(wire.Bound("anthropic", cfg.MaxResponseBytes, errorFields)),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.AuthToken != "" {
		opts = append(opts, option.WithAuthToken(cfg.AuthToken))
	}
	// The service is built from these options alone, not through anthropic.NewClient,
	// which adds the SDK's environment defaults (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN,
	// credential profiles, …) to every call behind Config's back.
	return &Client{cfg: cfg, msgs: anthropic.NewMessageService(opts...)}, nil
}

// Name implements llm.Provider.
func (c *Client) Name() string { return "anthropic" }

const messagesPath = "/v1/messages"

// errorFields reads Anthropic's {"type":"error","error":{"type","message"}} body.
func errorFields(data []byte) (typ, code, msg string, ok bool) {
	var eb struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &eb) != nil || (eb.Error.Message == "" && eb.Error.Type == "") {
		return "", "", "", false
	}
	return eb.Error.Type, "", eb.Error.Message, true
}

// turn is a message being assembled (consecutive same-role messages merge).
type turn struct {
	role   anthropic.MessageParamRole
	blocks []anthropic.ContentBlockParamUnion
}

// blockRef locates a content block: turn index and block index; turn < 0 means none.
type blockRef struct{ turn, block int }

// toParams splits ms into the system prompt and alternating user/assistant messages.
// System messages before the conversation form the system prompt. A system message
// after it (the call's task prompt, which changes from call to call) is sent as user
// text at its place: a second system block would come before the messages in the
// cache order (tools, system, messages) and so invalidate the history's cache whenever
// it changed. stable is the last block before the first such message (turn < 0 when
// there is none): the end of the prefix the next call sends again.
func toParams(ms []llm.Message) (system []string, out []turn, stable blockRef, err error) {
	stable = blockRef{turn: -1}
	for i, m := range ms {
		var (
			role   anthropic.MessageParamRole
			blocks []anthropic.ContentBlockParamUnion
		)
		switch m.Role {
		case "system":
			if len(out) == 0 {
				if m.Content != "" {
					system = append(system, m.Content)
				}
				continue
			}
			if stable.turn < 0 {
				stable = blockRef{turn: len(out) - 1, block: len(out[len(out)-1].blocks) - 1}
			}
			role = anthropic.MessageParamRoleUser
			blocks = appendText(blocks, m.Content)
		case "user":
			role = anthropic.MessageParamRoleUser
			blocks = appendText(blocks, m.Content)
		case "assistant":
			role = anthropic.MessageParamRoleAssistant
			for _, th := range m.Thinking { // thinking blocks lead the turn
				if th.RedactedData != "" {
					blocks = append(blocks, anthropic.NewRedactedThinkingBlock(th.RedactedData))
				} else {
					blocks = append(blocks, anthropic.NewThinkingBlock(th.Signature, th.Thinking))
				}
			}
			blocks = appendText(blocks, m.Content)
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, toolInput(tc.Arguments), tc.Name))
			}
		case "tool":
			if m.ToolCallID == "" {
				return nil, nil, stable, fmt.Errorf("anthropic: message %d: tool message has no tool call id", i)
			}
			role = anthropic.MessageParamRoleUser
			blocks = append(blocks, anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{
				ToolUseID: m.ToolCallID,
				Content:   []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: m.Content}}},
			}})
			if m.Content == "" {
				blocks[0].OfToolResult.Content = nil // the API rejects an empty text block
			}
		default:
			return nil, nil, stable, fmt.Errorf("anthropic: message %d: unsupported role %q", i, m.Role)
		}
		if len(blocks) == 0 {
			continue // the API rejects empty text blocks and empty messages
		}
		if n := len(out); n > 0 && out[n-1].role == role {
			out[n-1].blocks = append(out[n-1].blocks, blocks...)
			continue
		}
		out = append(out, turn{role: role, blocks: blocks})
	}
	return system, out, stable, nil
}

func appendText(blocks []anthropic.ContentBlockParamUnion, text string) []anthropic.ContentBlockParamUnion {
	if text == "" {
		return blocks
	}
	return append(blocks, anthropic.NewTextBlock(text))
}

// toolInput is the tool_use input for a call's arguments text: the object itself, {}
// for no arguments, and {"_raw": text} for anything that is not a JSON object.
func toolInput(args string) json.RawMessage {
	s := strings.TrimSpace(args)
	if s == "" {
		return json.RawMessage("{}")
	}
	if s[0] == '{' && json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	raw, _ := json.Marshal(map[string]string{"_raw": args}) // a map of strings always encodes
	return raw
}

// finishReason renames Anthropic's stop reasons to Fathom's.
func finishReason(stop string) string {
	switch stop {
	case "end_turn", "stop_sequence":
		return "stop"
	case "tool_use":
		return "tool_calls"
	case "max_tokens", "model_context_window_exceeded":
		return llm.FinishLength
	}
	return stop
}

// minThinkingBudget is the API's smallest extended-thinking budget.
const minThinkingBudget = 1024

// params translates req into the SDK's request.
func (c *Client) params(req llm.Request) (anthropic.MessageNewParams, error) {
	system, turns, stable, err := toParams(req.Messages)
	if err != nil {
		return anthropic.MessageNewParams{}, err
	}
	if len(turns) == 0 {
		return anthropic.MessageNewParams{}, errors.New("anthropic: chat request has no user or assistant content")
	}
	p := anthropic.MessageNewParams{Model: anthropic.Model(req.Model), MaxTokens: int64(req.MaxTokens)}
	if p.Model == "" {
		p.Model = anthropic.Model(c.cfg.Model)
	}
	if p.MaxTokens <= 0 {
		p.MaxTokens = int64(c.cfg.MaxTokens)
	}
	if len(system) > 0 {
		p.System = []anthropic.TextBlockParam{{Text: strings.Join(system, "\n\n")}}
	}
	for _, t := range turns {
		p.Messages = append(p.Messages, anthropic.MessageParam{Role: t.role, Content: t.blocks})
	}
	if req.Temperature != nil {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	if req.ThinkingBudget > 0 {
		budget := int64(max(req.ThinkingBudget, minThinkingBudget))
		if p.MaxTokens <= budget {
			p.MaxTokens = budget + int64(c.cfg.MaxTokens)
		}
		p.Thinking = anthropic.ThinkingConfigParamOfEnabled(budget)
		p.Temperature = param.Opt[float64]{} // the API accepts no temperature with thinking
	}
	if err := c.tools(req, &p); err != nil {
		return p, err
	}
	if req.PromptCache {
		markCache(&p, stable)
	}
	return p, nil
}

// tools adds the request's tools, tool choice and structured-output tool.
func (c *Client) tools(req llm.Request, p *anthropic.MessageNewParams) error {
	if req.ToolChoice == "none" && req.ResponseFormat == nil {
		return nil // no tools offered: none can be called
	}
	for _, t := range req.Tools {
		if f := req.ResponseFormat; f != nil && f.Name == t.Name {
			return fmt.Errorf("anthropic: response format %q has the name of a tool", f.Name)
		}
		if req.ToolChoice == "none" {
			continue
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: toolParam(t.Name, t.Description, t.Parameters)})
	}
	parallel := param.Opt[bool]{}
	if req.ParallelToolCalls != nil && len(req.Tools) > 0 {
		parallel = param.NewOpt(!*req.ParallelToolCalls)
	}
	if f := req.ResponseFormat; f != nil {
		if f.Name == "" {
			return errors.New("anthropic: response format has no name")
		}
		// The answer tool goes first: with other tools offered (a tool loop) it is not
		// forced, which would forbid them; "any" makes the model call some tool, the
		// answer tool to finish. The API forces no tool with extended thinking: then it is
		// only offered.
		p.Tools = append([]anthropic.ToolUnionParam{{OfTool: toolParam(f.Name, f.Description, f.Schema)}}, p.Tools...)
		switch {
		case req.ThinkingBudget > 0:
		case len(p.Tools) == 1:
			p.ToolChoice = anthropic.ToolChoiceUnionParam{OfTool: &anthropic.ToolChoiceToolParam{Name: f.Name}}
			return nil
		case req.ToolChoice == "" || req.ToolChoice == "auto" || req.ToolChoice == "required":
			p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{DisableParallelToolUse: parallel}}
			return nil
		}
	}
	switch req.ToolChoice {
	case "", "auto", "none":
		if parallel.Valid() {
			p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{DisableParallelToolUse: parallel}}
		}
	case "required":
		p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{DisableParallelToolUse: parallel}}
	default:
		p.ToolChoice = anthropic.ToolChoiceUnionParam{OfTool: &anthropic.ToolChoiceToolParam{Name: req.ToolChoice, DisableParallelToolUse: parallel}}
	}
	return nil
}

// toolParam is a tool definition; its schema goes out exactly as given.
func toolParam(name, description string, schema json.RawMessage) *anthropic.ToolParam {
	t := &anthropic.ToolParam{Name: name}
	if description != "" {
		t.Description = param.NewOpt(description)
	}
	if len(bytes.TrimSpace(schema)) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	param.SetJSON(schema, &t.InputSchema)
	return t
}

// markCache puts "ephemeral" cache breakpoints on the system prompt (which caches the
// tools before it too) and at the end of the stable history: the last block before the
// call's task prompt (stable) when the request has one, else the last block of the
// message before the newest turn. That is what the next call sends again unchanged, so
// it reads the whole history from the cache.
func markCache(p *anthropic.MessageNewParams, stable blockRef) {
	if n := len(p.System); n > 0 {
		p.System[n-1].CacheControl = anthropic.NewCacheControlEphemeralParam()
	} else if n := len(p.Tools); n > 0 && p.Tools[n-1].OfTool != nil {
		p.Tools[n-1].OfTool.CacheControl = anthropic.NewCacheControlEphemeralParam()
	}
	if stable.turn >= 0 {
		if cc := p.Messages[stable.turn].Content[stable.block].GetCacheControl(); cc != nil {
			*cc = anthropic.NewCacheControlEphemeralParam()
			return
		}
	}
	if n := len(p.Messages); n >= 2 {
		blocks := p.Messages[n-2].Content
		if cc := blocks[len(blocks)-1].GetCacheControl(); cc != nil {
			*cc = anthropic.NewCacheControlEphemeralParam()
		}
	}
}

// Chat implements llm.Provider: one POST /v1/messages, no retries.
func (c *Client) Chat(ctx context.Context, req llm.Request) (resp llm.Response, err error) {
	if len(req.Messages) == 0 {
		return llm.Response{}, errors.New("anthropic: chat request has no messages")
	}
	// The params (the SDK's, about a kilobyte) are held by pointer: this frame is on the
	// stack while the call waits on the network (see stream).
	p, err := c.paramsOf(&req)
	if err != nil {
		return llm.Response{}, err
	}
	ctx, cancel := wire.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	start := time.Now()
	if req.OnDelta != nil {
		resp, err = c.stream(ctx, p, req.OnDelta)
	} else {
		resp, err = c.complete(ctx, p)
	}
	if err != nil {
		return llm.Response{}, err
	}
	if req.ResponseFormat != nil {
		structured(&resp, req.ResponseFormat.Name)
	}
	if resp.Model == "" {
		resp.Model = string(p.Model)
	}
	resp.Duration = time.Since(start)
	return resp, nil
}

// structured turns the call of the structured-output tool into resp's content.
func structured(resp *llm.Response, name string) {
	for i, tc := range resp.ToolCalls {
		if tc.Name != name {
			continue
		}
		resp.Content = tc.Arguments
		resp.ToolCalls = append(resp.ToolCalls[:i:i], resp.ToolCalls[i+1:]...)
		if len(resp.ToolCalls) == 0 {
			resp.ToolCalls = nil
			if resp.FinishReason == "tool_calls" {
				resp.FinishReason = "stop"
			}
		}
		return
	}
}

// paramsOf is params(*req) on the heap (see Chat).
//
//go:noinline
func (c *Client) paramsOf(req *llm.Request) (*anthropic.MessageNewParams, error) {
	p, err := c.params(*req)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// complete makes a non-streamed call; the SDK encodes the params and decodes the
// answer.
func (c *Client) complete(ctx context.Context, p *anthropic.MessageNewParams) (llm.Response, error) {
	out, err := c.msgs.New(ctx, *p)
	if err != nil {
		if undecodable(err) {
			return llm.Response{}, fmt.Errorf("anthropic: decode %s response: %w", messagesPath, errors.Join(llm.ErrMalformedResponse, err))
		}
		return llm.Response{}, callError(err)
	}
	return response(out), nil
}

// response converts a Messages API answer.
func response(out *anthropic.Message) llm.Response {
	var (
		text strings.Builder
		resp llm.Response
	)
	for _, b := range out.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: inputText(b.Input)})
		case "thinking":
			resp.Thinking = append(resp.Thinking, llm.ThinkingBlock{Thinking: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			resp.Thinking = append(resp.Thinking, llm.ThinkingBlock{RedactedData: b.Data})
		}
	}
	u := out.Usage
	resp.Content, resp.FinishReason, resp.Model = text.String(), finishReason(string(out.StopReason)), string(out.Model)
	resp.Usage = usage(u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens)
	return resp
}

// inputText is the arguments text of a tool_use input ("{}" when there is none).
func inputText(input json.RawMessage) string {
	if s := bytes.TrimSpace(input); len(s) > 0 && string(s) != "null" {
		return string(s)
	}
	return "{}"
}

// usage is Fathom's usage of Anthropic's counts: input_tokens excludes the cache
// reads and writes, which Fathom counts as part of the input.
func usage(input, cacheRead, cacheWrite, output int64) llm.Usage {
	in := input + cacheRead + cacheWrite
	return llm.Usage{InputTokens: in, OutputTokens: output, TotalTokens: in + output,
		CachedInputTokens: cacheRead, CacheWriteInputTokens: cacheWrite}
}

// undecodable reports an answer the SDK read whole but could not decode: a JSON
// error, or a body cut inside its JSON (its decoder's io.ErrUnexpectedEOF), which the
// SDK reports as "error parsing response json" (a cut while reading is "error reading
// response body", and stays retryable).
func undecodable(err error) bool {
	return malformed(err) || strings.Contains(err.Error(), "error parsing response json")
}

// malformed reports a JSON decoding error.
func malformed(err error) bool {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.As(err, &syn) || errors.As(err, &typ)
}

// callError keeps Fathom's errors (an *llm.APIError from the middleware, a transport
// error) and converts an SDK API error that did not pass through it (an "error" event
// inside a stream, whose HTTP status was 200).
func callError(err error) error {
	var apiErr *llm.APIError
	if errors.As(err, &apiErr) {
		return err
	}
	var sdkErr *anthropic.Error
	if errors.As(err, &sdkErr) {
		return streamAPIError([]byte(sdkErr.RawJSON()))
	}
	if raw, ok := strings.CutPrefix(err.Error(), "received error while streaming: "); ok {
		return streamAPIError([]byte(raw))
	}
	if strings.HasPrefix(err.Error(), "anthropic:") {
		return err
	}
	return fmt.Errorf("anthropic: %w", err)
}

// streamAPIError is the *llm.APIError of a stream's error event.
func streamAPIError(data []byte) *llm.APIError {
	e := &llm.APIError{StatusCode: http.StatusInternalServerError, Message: "error event without details"}
	if typ, _, msg, ok := errorFields(data); ok {
		e.StatusCode, e.Type, e.Message = statusOfErrorType(typ), typ, msg
	}
	return e
}

// statusOfErrorType is the HTTP status Anthropic documents for an error type, used for
// an "error" event inside a stream (whose HTTP status was 200). Unknown types count as
// 500: the server failed mid-answer.
func statusOfErrorType(typ string) int {
	switch typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "overloaded_error":
		return 529
	}
	return http.StatusInternalServerError
}

// CountTokens asks the API how many input tokens req would use (POST
// /v1/messages/count_tokens). The count is the server's, for the request as this client
// would send it; Fathom's own counts for Claude models (tiktoken) are estimates.
func (c *Client) CountTokens(ctx context.Context, req llm.Request) (int64, error) {
	p, err := c.params(req)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	cp := anthropic.MessageCountTokensParams{Model: p.Model, System: anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: p.System},
		Thinking: p.Thinking, ToolChoice: p.ToolChoice}
	cp.Messages = p.Messages
	for _, t := range p.Tools {
		cp.Tools = append(cp.Tools, anthropic.MessageCountTokensToolUnionParam{OfTool: t.OfTool})
	}
	out, err := c.msgs.CountTokens(ctx, cp)
	if err != nil {
		return 0, callError(err)
	}
	return out.InputTokens, nil
}
