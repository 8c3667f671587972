package anthropic

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
	// Model is used when a request names none.
	Model string
	// MaxTokens bounds a completion when a request sets no MaxTokens (the API requires a
	// bound). Zero means 4096.
	MaxTokens int
	// HTTPClient, when set, is used instead of a client built from Timeout.
	HTTPClient *http.Client
	// Timeout bounds one call, including reading the body. Zero means 2 minutes.
	Timeout time.Duration
	// MaxResponseBytes bounds a response body (a stream: the sum of its events' data).
	// Zero means 8 MiB.
	MaxResponseBytes int64
}

// DefaultConfig returns the configuration for api.anthropic.com with claude-sonnet-4-5.
func DefaultConfig() Config {
	return Config{BaseURL: "https://api.anthropic.com", Model: "claude-sonnet-4-5", MaxTokens: 4096, Timeout: 2 * time.Minute, MaxResponseBytes: 8 << 20}
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

// Client is an llm.Provider for the Anthropic Messages API. It is safe for concurrent
// use.
type Client struct {
	cfg  Config
	http *http.Client
	base string
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
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: cfg.Timeout}
	}
	return &Client{cfg: cfg, http: hc, base: strings.TrimRight(cfg.BaseURL, "/")}, nil
}

// Name implements llm.Provider.
func (c *Client) Name() string { return "anthropic" }

const messagesPath = "/v1/messages"

type messagesRequest struct {
	Model       string        `json:"model"`
	MaxTokens   int           `json:"max_tokens"`
	System      string        `json:"system,omitempty"`
	Messages    []wireMessage `json:"messages"`
	Temperature *float64      `json:"temperature,omitempty"`
	Tools       []wireTool    `json:"tools,omitempty"`
	Stream      bool          `json:"stream,omitempty"`
}

type wireMessage struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is a content block: "text" (Text), "tool_use" (ID, Name, Input) or
// "tool_result" (ToolUseID, Content).
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
}

type wireTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type wireUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

type messagesResponse struct {
	Model      string    `json:"model"`
	Content    []block   `json:"content"`
	StopReason string    `json:"stop_reason"`
	Usage      wireUsage `json:"usage"`
}

type wireError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// toWire splits ms into the system prompt and alternating user/assistant messages.
func toWire(ms []llm.Message) (string, []wireMessage, error) {
	var (
		system []string
		out    []wireMessage
	)
	for i, m := range ms {
		role, blocks := m.Role, []block(nil)
		switch m.Role {
		case "system":
			if m.Content != "" {
				system = append(system, m.Content)
			}
			continue
		case "user":
			blocks = appendText(blocks, m.Content)
		case "assistant":
			blocks = appendText(blocks, m.Content)
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, block{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments)})
			}
		case "tool":
			if m.ToolCallID == "" {
				return "", nil, fmt.Errorf("anthropic: message %d: tool message has no tool call id", i)
			}
			role = "user"
			blocks = append(blocks, block{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content})
		default:
			return "", nil, fmt.Errorf("anthropic: message %d: unsupported role %q", i, m.Role)
		}
		if len(blocks) == 0 {
			continue // the API rejects empty text blocks and empty messages
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, wireMessage{Role: role, Content: blocks})
	}
	return strings.Join(system, "\n\n"), out, nil
}

func appendText(blocks []block, text string) []block {
	if text == "" {
		return blocks
	}
	return append(blocks, block{Type: "text", Text: text})
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
	case "end_turn":
		return "stop"
	case "tool_use":
		return "tool_calls"
	case "max_tokens":
		return "length"
	}
	return stop
}

func (c *Client) encode(req llm.Request) ([]byte, string, error) {
	system, msgs, err := toWire(req.Messages)
	if err != nil {
		return nil, "", err
	}
	if len(msgs) == 0 {
		return nil, "", errors.New("anthropic: chat request has no user or assistant content")
	}
	mreq := messagesRequest{Model: req.Model, MaxTokens: req.MaxTokens, System: system, Messages: msgs,
		Temperature: req.Temperature, Stream: req.OnDelta != nil}
	if mreq.Model == "" {
		mreq.Model = c.cfg.Model
	}
	if mreq.MaxTokens <= 0 {
		mreq.MaxTokens = c.cfg.MaxTokens
	}
	for _, t := range req.Tools {
		schema := t.Parameters
		if len(bytes.TrimSpace(schema)) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		mreq.Tools = append(mreq.Tools, wireTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	body, err := json.Marshal(mreq)
	if err != nil {
		return nil, "", fmt.Errorf("anthropic: encode request: %w", err)
	}
	return body, mreq.Model, nil
}

// Chat implements llm.Provider: one POST /v1/messages, no retries.
func (c *Client) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if len(req.Messages) == 0 {
		return llm.Response{}, errors.New("anthropic: chat request has no messages")
	}
	body, model, err := c.encode(req)
	if err != nil {
		return llm.Response{}, err
	}
	start := time.Now()
	var resp llm.Response
	if req.OnDelta != nil {
		resp, err = c.stream(ctx, body, req.OnDelta)
	} else {
		resp, err = c.complete(ctx, body)
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

// complete makes a non-streamed call and converts its answer.
func (c *Client) complete(ctx context.Context, body []byte) (llm.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	resp, err := c.send(ctx, body, "application/json")
	if err != nil {
		return llm.Response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1))
	if err != nil {
		return llm.Response{}, fmt.Errorf("anthropic: read %s response: %w", messagesPath, err)
	}
	if int64(len(data)) > c.cfg.MaxResponseBytes {
		return llm.Response{}, fmt.Errorf("anthropic: %s response exceeds %d bytes", messagesPath, c.cfg.MaxResponseBytes)
	}
	var out messagesResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return llm.Response{}, fmt.Errorf("anthropic: decode %s response: %w", messagesPath, err)
	}
	var (
		text  strings.Builder
		calls []llm.ToolCall
	)
	for _, b := range out.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			calls = append(calls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: inputText(b.Input)})
		}
	}
	return llm.Response{
		Content:      text.String(),
		ToolCalls:    calls,
		FinishReason: finishReason(out.StopReason),
		Model:        out.Model,
		Usage:        usage(out.Usage),
	}, nil
}

// inputText is the arguments text of a tool_use input ("{}" when there is none).
func inputText(input json.RawMessage) string {
	if s := bytes.TrimSpace(input); len(s) > 0 && string(s) != "null" {
		return string(s)
	}
	return "{}"
}

func usage(u wireUsage) llm.Usage {
	return llm.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}
}

// send makes one POST /v1/messages and returns the response when its status is 2xx
// (the caller closes the body); other statuses become *llm.APIError. accept is the
// Accept header.
func (c *Client) send(ctx context.Context, body []byte, accept string) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+messagesPath, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", accept)
	hreq.Header.Set("anthropic-version", APIVersion)
	if c.cfg.APIKey != "" {
		hreq.Header.Set("x-api-key", c.cfg.APIKey)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("anthropic: POST %s: %w", messagesPath, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, apiError(resp, data)
	}
	return resp, nil
}

// apiError converts an error answer ({"type":"error","error":{"type","message"}}, or
// any other body) into an *llm.APIError.
func apiError(resp *http.Response, data []byte) error {
	e := &llm.APIError{StatusCode: resp.StatusCode}
	var eb struct {
		Error wireError `json:"error"`
	}
	if json.Unmarshal(data, &eb) == nil && (eb.Error.Message != "" || eb.Error.Type != "") {
		e.Type, e.Message = eb.Error.Type, eb.Error.Message
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
