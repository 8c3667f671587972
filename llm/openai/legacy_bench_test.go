package openai_test

// The hand-written OpenAI client Fathom used before llm/openai moved to the official
// SDK (git history: llm/openai/openai.go before the SDK commit), kept here only so
// BenchmarkClientOverhead can compare the two in one run. Trimmed to Chat.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/sse"
)

// legacyClient is an llm.Provider for an OpenAI-compatible API. It is safe for concurrent use.
var _ llm.Provider = (*legacyClient)(nil)

// legacyClient is the old client, trimmed.
type legacyClient struct {
	http         *http.Client
	base, apiKey string
	model        string
	timeout      time.Duration
	maxBytes     int64
}

type legacyChatRequest struct {
	Model       string              `json:"model"`
	Messages    []legacyWireMessage `json:"messages"`
	Temperature *float64            `json:"temperature,omitempty"`
	MaxTokens   int                 `json:"max_tokens,omitempty"`
	Tools       []legacyWireTool    `json:"tools,omitempty"`
	Stream      bool                `json:"stream,omitempty"`
	// StreamOptions asks for a final usage chunk when streaming.
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
}

// legacyWireMessage is a chat message in the OpenAI format (tool calls nest a "function").
type legacyWireMessage struct {
	Role       string               `json:"role"`
	Content    *string              `json:"content"`
	ToolCalls  []legacyWireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string               `json:"tool_call_id,omitempty"`
}

type legacyWireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type legacyWireTool struct {
	Type     string       `json:"type"`
	Function llm.ToolSpec `json:"function"`
}

func legacyToWire(ms []llm.Message) []legacyWireMessage {
	out := make([]legacyWireMessage, len(ms))
	for i, m := range ms {
		content := m.Content
		w := legacyWireMessage{Role: m.Role, Content: &content, ToolCallID: m.ToolCallID}
		if len(m.ToolCalls) > 0 && m.Content == "" {
			w.Content = nil // an assistant message that only calls tools has null content
		}
		for _, c := range m.ToolCalls {
			var wc legacyWireToolCall
			wc.ID, wc.Type = c.ID, "function"
			wc.Function.Name, wc.Function.Arguments = c.Name, c.Arguments
			w.ToolCalls = append(w.ToolCalls, wc)
		}
		out[i] = w
	}
	return out
}

func legacyFromWire(calls []legacyWireToolCall) []llm.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]llm.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments}
	}
	return out
}

type legacyChatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   *string              `json:"content"`
			ToolCalls []legacyWireToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
}

type legacyErrorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	} `json:"error"`
}

// Chat implements llm.Provider: one POST /chat/completions, no retries.
func (c *legacyClient) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if len(req.Messages) == 0 {
		return llm.Response{}, errors.New("openai: chat request has no messages")
	}
	model := req.Model
	if model == "" {
		model = c.model
	}
	creq := legacyChatRequest{Model: model, Messages: legacyToWire(req.Messages), Temperature: req.Temperature, MaxTokens: req.MaxTokens}
	for _, t := range req.Tools {
		creq.Tools = append(creq.Tools, legacyWireTool{Type: "function", Function: t})
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
	var out legacyChatResponse
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
		ToolCalls:    legacyFromWire(out.Choices[0].Message.ToolCalls),
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

// send makes one request and returns the response when its status is 2xx (the caller
// closes the body); other statuses become *llm.APIError. accept is the Accept header.
func (c *legacyClient) send(ctx context.Context, method, path string, body []byte, accept string) (*http.Response, error) {
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
	if c.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("openai: %s %s: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, legacyAPIError(resp, data)
	}
	return resp, nil
}

type legacyStreamChunk struct {
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
func (c *legacyClient) stream(ctx context.Context, body []byte, onDelta func(string)) (llm.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.send(ctx, http.MethodPost, "/chat/completions", body, "text/event-stream")
	if err != nil {
		return llm.Response{}, err
	}
	defer resp.Body.Close()
	r := sse.NewReader(resp.Body)
	r.MaxEventBytes = int(min(c.maxBytes, 1<<30))
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
		if total += int64(len(ev.Data)); total > c.maxBytes {
			return llm.Response{}, fmt.Errorf("openai: stream exceeds %d bytes", c.maxBytes)
		}
		var ch legacyStreamChunk
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

func (c *legacyClient) do(ctx context.Context, method, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.send(ctx, method, path, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes+1))
	if err != nil {
		return fmt.Errorf("openai: read %s response: %w", path, err)
	}
	if int64(len(data)) > c.maxBytes {
		return fmt.Errorf("openai: %s response exceeds %d bytes", path, c.maxBytes)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("openai: decode %s response: %w", path, err)
	}
	return nil
}

func legacyAPIError(resp *http.Response, data []byte) error {
	e := &llm.APIError{StatusCode: resp.StatusCode}
	var eb legacyErrorBody
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

func (c *legacyClient) Name() string { return "openai-legacy" }
