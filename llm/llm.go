// Package llm defines how Fathom talks to language models: one Provider interface,
// provider-neutral request and response types, the classification of errors into
// retryable and permanent ones, and the price table for cost accounting. Adapters live
// in subpackages (openai: chat completions; anthropic: Messages API); llm/resilient
// adds retries, rate limits, a circuit breaker and fallbacks on top of any Provider;
// llm/mock is a scripted OpenAI- and Anthropic-compatible server for tests and the demo.
//
// This package has no actor code: the session grain's step runner calls a Provider.
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"time"
)

// Message is one chat message.
type Message struct {
	// Role is "system", "user", "assistant" or "tool".
	Role string `json:"role"`
	// Content is the message text (a tool message: the tool's result).
	Content string `json:"content"`
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID names the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Thinking are the reasoning blocks of an assistant message, as the model returned
	// them (Response.Thinking). Anthropic requires them back, unchanged, on the next turn
	// of a tool-use loop with extended thinking; OpenAI-compatible APIs ignore them.
	Thinking []ThinkingBlock `json:"thinking,omitempty"`
}

// ThinkingBlock is one block of a model's visible reasoning (Anthropic extended
// thinking). It is opaque to Fathom: keep it and send it back as it came.
type ThinkingBlock struct {
	// Thinking is the reasoning text (empty for a redacted block).
	Thinking string `json:"thinking,omitempty"`
	// Signature authenticates Thinking; the API rejects an altered block.
	Signature string `json:"signature,omitempty"`
	// RedactedData is the encrypted content of a redacted_thinking block.
	RedactedData string `json:"redacted_data,omitempty"`
}

// ToolCall is one function call the model asked for.
type ToolCall struct {
	// ID is the model's id for the call; the tool message answering it carries it back.
	ID string `json:"id"`
	// Name is the tool.
	Name string `json:"name"`
	// Arguments is the JSON text of the arguments object, as the model produced it
	// (it may be invalid: the tool system validates it).
	Arguments string `json:"arguments"`
}

// ToolSpec describes a tool the model may call.
type ToolSpec struct {
	// Name is the tool's name.
	Name string `json:"name"`
	// Description tells the model what the tool does.
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage `json:"parameters"`
}

// Request is one chat completion request.
type Request struct {
	// Model names the model; empty means the provider's default.
	Model string
	// Messages is the conversation, oldest first.
	Messages []Message
	// Temperature, when set, overrides the provider's default sampling temperature.
	Temperature *float64
	// MaxTokens bounds the completion, reasoning included; 0 means the provider's
	// default. OpenAI-compatible APIs receive it as max_completion_tokens (reasoning
	// models refuse max_tokens), Anthropic as max_tokens.
	MaxTokens int
	// Tools the model may call; none means a plain completion.
	Tools []ToolSpec
	// ToolChoice says whether and which tool the model must call: "" (the API's
	// default, auto), "auto", "none", "required" (some tool), or a tool's name (that
	// tool). Anthropic has no "none" with tools listed: the tools are then not sent.
	ToolChoice string
	// ParallelToolCalls, when set, allows (true) or forbids (false) several tool calls
	// in one answer (OpenAI parallel_tool_calls; Anthropic
	// tool_choice.disable_parallel_tool_use).
	ParallelToolCalls *bool
	// ResponseFormat, when set, asks for an answer that is one JSON value matching a
	// schema: OpenAI response_format {"type":"json_schema"}, Anthropic a forced tool
	// whose input is the answer. Response.Content is then the JSON text either way.
	// Servers without the feature may ignore it: parse the answer tolerantly.
	ResponseFormat *JSONSchema
	// ReasoningEffort asks a reasoning model for that much thinking ("minimal", "low",
	// "medium", "high"): OpenAI reasoning_effort. Empty sends nothing.
	ReasoningEffort string
	// ThinkingBudget, when positive, turns on Anthropic extended thinking with that many
	// tokens of budget (at least 1024, below MaxTokens). OpenAI-compatible APIs ignore
	// it (use ReasoningEffort).
	ThinkingBudget int
	// PromptCache asks for prompt-cache breakpoints (Anthropic cache_control
	// "ephemeral") on the system prompt and on the stable history prefix (the last
	// message before the newest user or tool turn). OpenAI caches stable prefixes on its
	// own and needs no marker.
	PromptCache bool
	// OnDelta, when set, asks for a streamed answer: it is called with each text delta
	// in order as it arrives (on the calling goroutine), and Chat still returns the whole
	// response at the end. A stream cut before its end is an error.
	OnDelta func(delta string)
	// OnRetry, when set, is called by retrying wrappers (llm/resilient) before attempt
	// number attempt (2, 3, ...): text already passed to OnDelta belongs to a failed
	// attempt and the new attempt's deltas start over.
	OnRetry func(attempt int)
}

// JSONSchema names a JSON Schema an answer must match (Request.ResponseFormat).
type JSONSchema struct {
	// Name identifies the schema to the model (letters, digits, '_' and '-').
	Name string
	// Description tells the model what the value is for.
	Description string
	// Schema is the JSON Schema document (an object schema).
	Schema json.RawMessage
	// Strict asks OpenAI to enforce the schema exactly (every property required, no
	// additional properties allowed).
	Strict bool
}

// Usage counts tokens as reported by the provider.
type Usage struct {
	// InputTokens is every prompt token, cached ones included; OutputTokens every
	// completion token, reasoning included; TotalTokens their sum (as reported).
	InputTokens, OutputTokens, TotalTokens int64
	// CachedInputTokens is the part of InputTokens read from the provider's prompt cache
	// (OpenAI prompt_tokens_details.cached_tokens, Anthropic cache_read_input_tokens),
	// priced at the cached rate.
	CachedInputTokens int64
	// CacheWriteInputTokens is the part of InputTokens written to the prompt cache
	// (Anthropic cache_creation_input_tokens), priced at the cache-write rate.
	CacheWriteInputTokens int64
	// ReasoningTokens is the part of OutputTokens the model spent thinking (OpenAI
	// completion_tokens_details.reasoning_tokens; Anthropic does not report it apart).
	ReasoningTokens int64
}

// Response is a chat completion.
type Response struct {
	// Content is the assistant's text.
	Content string
	// ToolCalls are the calls the model asked for (FinishReason "tool_calls").
	ToolCalls []ToolCall
	// FinishReason is why generation stopped ("stop", "length", "tool_calls", ...).
	// "length" means the answer was cut at MaxTokens (Truncated).
	FinishReason string
	// Thinking are the reasoning blocks of the answer (Anthropic extended thinking), to
	// be kept on the assistant message (Message.Thinking) for the next turn.
	Thinking []ThinkingBlock
	// Model is the model that answered.
	Model string
	// Usage is the provider's token accounting.
	Usage Usage
	// Duration is how long the call took.
	Duration time.Duration
}

// FinishLength is the FinishReason of an answer cut at the completion bound.
const FinishLength = "length"

// Truncated reports whether the answer was cut at the completion bound (FinishReason
// "length"; Anthropic's "max_tokens"): its text is incomplete and a structured answer
// will not parse.
func (r Response) Truncated() bool { return r.FinishReason == FinishLength }

// Provider is a chat model endpoint. Implementations are safe for concurrent use and
// honour ctx cancellation and deadlines.
//
// The goroutine making a call waits for the answer with every frame of the call's chain
// on its stack (the session's, a wrapper's such as llm/resilient, the client's, its
// SDK's and net/http's), and the runtime halves a stack only when less than a quarter
// of it is in use. Fathom's own providers keep large values (an SDK's params or decoded
// answer, a local Response) out of the frames that are live during the wait, in
// functions of their own or in named results, so that a call in flight waits on a
// 16 KB stack rather than a 32 KB one: at a thousand sessions in flight, 16 MB. A
// provider of your own works either way; it only costs that.
type Provider interface {
	// Name identifies the provider in logs and spans (e.g. "openai").
	Name() string
	// Chat makes one completion call. It does not retry.
	Chat(ctx context.Context, req Request) (Response, error)
}

// APIError is an error answer of a model API.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Type and Code are the provider's error classification, when given.
	Type, Code string
	// Message is the provider's explanation.
	Message string
	// RetryAfter is the server's requested wait (Retry-After header), 0 if none.
	RetryAfter time.Duration
}

// Error implements error.
func (e *APIError) Error() string {
	s := fmt.Sprintf("llm api: HTTP %d", e.StatusCode)
	if e.Type != "" {
		s += " " + e.Type
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Retryable reports whether the same request may succeed later: rate limits (429),
// request timeouts (408) and server errors (5xx).
func (e *APIError) Retryable() bool {
	return e.StatusCode == 429 || e.StatusCode == 408 || e.StatusCode >= 500
}

// ErrCircuitOpen is returned (wrapped) while a provider's circuit breaker is open: the
// provider failed repeatedly and calls fail fast until a probe succeeds. It is
// retryable: the same request may succeed once the provider recovers.
var ErrCircuitOpen = errors.New("llm: circuit breaker open")

// ErrMalformedResponse is returned (wrapped) for an answer that is not the API's JSON:
// the same request would get the same answer, so it is not retryable.
var ErrMalformedResponse = errors.New("llm: malformed response")

// IsRetryable reports whether err is worth retrying: a retryable APIError, a timeout,
// a refused or reset connection, a connection closed before the answer, or a response
// cut short. A cancelled context and a malformed answer (ErrMalformedResponse) are not.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, ErrMalformedResponse) {
		return false
	}
	if errors.Is(err, ErrCircuitOpen) {
		return true
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.Retryable()
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) && errors.Is(urlErr.Err, io.EOF) {
		// The connection closed before any answer: a keep-alive connection the server
		// timed out as the request went out, or a proxy going away.
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}
