package mock_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm"
)

// longSystem is a system prompt well above the 1024-token cache minimum.
var longSystem = "You are a careful planner. " + strings.Repeat("Follow the house rules of planning. ", 200)

// TestOpenAIPromptCacheAndReasoningUsage: through the production OpenAI client, a
// second call that repeats a long prefix reports it as cached tokens (whole 128-token
// chunks), streamed or not, and reasoning_effort costs reasoning tokens that count as
// completion tokens; prices see the cache.
func TestOpenAIPromptCacheAndReasoningUsage(t *testing.T) {
	srv := streamServer(t, `{"default":"fine"}`)
	c := client(t, srv, "")
	msgs := []llm.Message{{Role: "system", Content: longSystem}, {Role: "user", Content: "first question"}}
	first, err := c.Chat(context.Background(), llm.Request{Model: "gpt-4o-mini", Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if first.Usage.CachedInputTokens != 0 || first.Usage.InputTokens < 1024 {
		t.Fatalf("first call usage %+v: want no cache on a new prompt of 1024+ tokens", first.Usage)
	}
	msgs = append(msgs, llm.Message{Role: "assistant", Content: "fine"}, llm.Message{Role: "user", Content: "second question"})
	for _, stream := range []bool{false, true} {
		req := llm.Request{Model: "gpt-4o-mini", Messages: msgs, ReasoningEffort: "low"}
		if stream {
			req.OnDelta = func(string) {}
		}
		second, err := c.Chat(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		u := second.Usage
		if u.CachedInputTokens < first.Usage.InputTokens-128 || u.CachedInputTokens%128 != 0 || u.CachedInputTokens > u.InputTokens {
			t.Fatalf("stream=%v: usage %+v after a first call of %d input tokens: want the shared prefix cached", stream, u, first.Usage.InputTokens)
		}
		if u.ReasoningTokens != 64 || u.OutputTokens <= u.ReasoningTokens {
			t.Fatalf("stream=%v: reasoning usage %+v", stream, u)
		}
		prices := llm.DefaultPrices()
		uncached := u
		uncached.CachedInputTokens = 0
		if prices.CostOf("gpt-4o-mini", u) >= prices.CostOf("gpt-4o-mini", uncached) {
			t.Fatalf("cached call not cheaper: %v vs %v", prices.CostOf("gpt-4o-mini", u), prices.CostOf("gpt-4o-mini", uncached))
		}
	}
}

// TestOpenAIResponseFormatAndToolChoice: a bad json_schema format is the API's 400; a
// good one gets the scripted JSON; a forced function turns a text answer into that
// function's call; parallel_tool_calls false keeps one call; a tool_choice naming an
// unknown function is refused.
func TestOpenAIResponseFormatAndToolChoice(t *testing.T) {
	srv := streamServer(t, `{"rules":[{"match":"two calls","tool_calls":[{"name":"a","arguments":"{}"},{"name":"b","arguments":"{}"}]}],
		"default":"{\"steps\":[\"read\",\"write\"]}"}`)
	c := client(t, srv, "")
	user := []llm.Message{{Role: "user", Content: "plan"}}
	schema := json.RawMessage(`{"type":"object","properties":{"steps":{"type":"array","items":{"type":"string"}}},"required":["steps"]}`)
	_, err := c.Chat(context.Background(), llm.Request{Messages: user, ResponseFormat: &llm.JSONSchema{Name: "bad name!", Schema: schema}})
	var apiErr *llm.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || llm.IsRetryable(err) || !strings.Contains(apiErr.Message, "json_schema.name") {
		t.Fatalf("bad schema name: %v", err)
	}
	resp, err := c.Chat(context.Background(), llm.Request{Messages: user, ResponseFormat: &llm.JSONSchema{Name: "plan", Schema: schema, Strict: true}})
	if err != nil || resp.Content != `{"steps":["read","write"]}` {
		t.Fatalf("structured answer %q, %v", resp.Content, err)
	}
	tools := []llm.ToolSpec{{Name: "write_plan", Parameters: schema}, {Name: "a"}, {Name: "b"}}
	resp, err = c.Chat(context.Background(), llm.Request{Messages: user, Tools: tools, ToolChoice: "write_plan"})
	if err != nil || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "write_plan" || resp.ToolCalls[0].Arguments != `{"steps":["read","write"]}` {
		t.Fatalf("forced call %+v, %v", resp, err)
	}
	no := false
	resp, err = c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "two calls"}}, Tools: tools, ParallelToolCalls: &no, OnDelta: func(string) {}})
	if err != nil || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "a" {
		t.Fatalf("parallel_tool_calls false: %+v, %v", resp.ToolCalls, err)
	}
	if _, err := c.Chat(context.Background(), llm.Request{Messages: user, Tools: tools, ToolChoice: "nope"}); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("unknown forced function: %v", err)
	}
}

// TestAnthropicCacheBreakpoints: with PromptCache the production Anthropic client marks
// the system prompt and the stable history; the mock writes the prefix to its cache on
// the first call and reads it on the next, reporting both in usage the API's way.
func TestAnthropicCacheBreakpoints(t *testing.T) {
	srv := streamServer(t, `{"default":"fine"}`)
	c := anthClient(t, srv, "")
	msgs := []llm.Message{{Role: "system", Content: longSystem}, {Role: "user", Content: "first question"}}
	first, err := c.Chat(context.Background(), llm.Request{Messages: msgs, PromptCache: true})
	if err != nil {
		t.Fatal(err)
	}
	if first.Usage.CacheWriteInputTokens < 1024 || first.Usage.CachedInputTokens != 0 {
		t.Fatalf("first call usage %+v: want the system prompt written to the cache", first.Usage)
	}
	msgs = append(msgs, llm.Message{Role: "assistant", Content: "fine"}, llm.Message{Role: "user", Content: "second question"})
	second, err := c.Chat(context.Background(), llm.Request{Messages: msgs, PromptCache: true, OnDelta: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	u := second.Usage
	if u.CachedInputTokens != first.Usage.CacheWriteInputTokens || u.CacheWriteInputTokens <= 0 || u.InputTokens <= u.CachedInputTokens+u.CacheWriteInputTokens-1 {
		t.Fatalf("second call usage %+v: want the system prompt read from the cache and the history written", u)
	}
	plain, err := c.Chat(context.Background(), llm.Request{Messages: msgs})
	if err != nil || plain.Usage.CachedInputTokens != 0 || plain.Usage.CacheWriteInputTokens != 0 {
		t.Fatalf("without breakpoints: usage %+v, %v", plain.Usage, err)
	}
	p := llm.DefaultPrices()
	if p.CostOf("claude-sonnet-4-6", u) >= p.CostOf("claude-sonnet-4-6", plain.Usage) {
		t.Fatalf("cached call not cheaper: %+v vs %+v", u, plain.Usage)
	}
}

// TestAnthropicThinkingRoundTrip: with a thinking budget the answer starts with a
// signed thinking block (JSON and streamed); sending it back unchanged before the tool
// results works, leaving it out or altering it is the API's 400.
func TestAnthropicThinkingRoundTrip(t *testing.T) {
	srv := streamServer(t, `{"rules":[{"tool_match":".","response":"done with {{.Tool}}"},
		{"match":"search","tool_calls":[{"name":"web_search","arguments":"{\"query\":\"actors\"}"}]}]}`)
	c := anthClient(t, srv, "")
	tools := []llm.ToolSpec{{Name: "web_search", Parameters: json.RawMessage(`{"type":"object"}`)}}
	for _, stream := range []bool{false, true} {
		req := llm.Request{Messages: []llm.Message{{Role: "user", Content: "search"}}, Tools: tools, ThinkingBudget: 2048}
		if stream {
			req.OnDelta = func(string) {}
		}
		resp, err := c.Chat(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Thinking) != 1 || resp.Thinking[0].Thinking == "" || resp.Thinking[0].Signature == "" || len(resp.ToolCalls) != 1 {
			t.Fatalf("stream=%v: %+v", stream, resp)
		}
		next := func(th []llm.ThinkingBlock) (llm.Response, error) {
			r := req
			r.Messages = append(append([]llm.Message(nil), req.Messages...),
				llm.Message{Role: "assistant", ToolCalls: resp.ToolCalls, Thinking: th},
				llm.Message{Role: "tool", ToolCallID: resp.ToolCalls[0].ID, Content: "found"})
			return c.Chat(context.Background(), r)
		}
		if after, err := next(resp.Thinking); err != nil || after.Content != "done with found" {
			t.Fatalf("stream=%v: with thinking kept: %q, %v", stream, after.Content, err)
		}
		var apiErr *llm.APIError
		if _, err := next(nil); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "thinking") {
			t.Fatalf("stream=%v: thinking dropped: %v", stream, err)
		}
		forged := []llm.ThinkingBlock{{Thinking: resp.Thinking[0].Thinking + " (edited)", Signature: resp.Thinking[0].Signature}}
		if _, err := next(forged); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "signature") {
			t.Fatalf("stream=%v: altered thinking: %v", stream, err)
		}
	}
}

// TestAnthropicStructuredOutput: a ResponseFormat goes out as a forced tool; the mock
// answers with the scripted JSON as that tool's input; the client returns it as the
// content. Extended thinking with a forced tool is the API's 400, so the client only
// offers the tool then.
func TestAnthropicStructuredOutput(t *testing.T) {
	srv := streamServer(t, `{"default":"{\"steps\":[\"read\"]}"}`)
	c := anthClient(t, srv, "")
	format := &llm.JSONSchema{Name: "plan", Schema: json.RawMessage(`{"type":"object","properties":{"steps":{"type":"array"}}}`)}
	for _, stream := range []bool{false, true} {
		req := llm.Request{Messages: []llm.Message{{Role: "user", Content: "plan"}}, ResponseFormat: format}
		if stream {
			req.OnDelta = func(string) {}
		}
		resp, err := c.Chat(context.Background(), req)
		if err != nil || resp.Content != `{"steps":["read"]}` || resp.ToolCalls != nil || resp.FinishReason != "stop" {
			t.Fatalf("stream=%v: %+v, %v", stream, resp, err)
		}
	}
	resp, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "plan"}}, ResponseFormat: format, ThinkingBudget: 1024})
	if err != nil || resp.Content != `{"steps":["read"]}` || len(resp.Thinking) != 1 {
		t.Fatalf("with thinking (tool offered, not forced): %+v, %v", resp, err)
	}
	n, err := c.CountTokens(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "plan"}}, ResponseFormat: format})
	if err != nil || n <= 0 {
		t.Fatalf("count_tokens: %d, %v", n, err)
	}
}

// TestAnthropicStructuredOutputBesideTools: beside the agent's tools the answer tool is
// not forced (tool_choice any): a scripted tool call still goes out as that call, and a
// final answer of prose with a ```json fence becomes the answer tool's input, returned
// as the content.
func TestAnthropicStructuredOutputBesideTools(t *testing.T) {
	srv := streamServer(t, `{"rules":[{"tool_match":".","response":"Done.\n`+"```json"+`\n{\"status\":\"completed\",\"summary\":\"found\"}\n`+"```"+`"},
		{"match":"search","tool_calls":[{"name":"web_search","arguments":"{\"query\":\"actors\"}"}]}]}`)
	c := anthClient(t, srv, "")
	format := &llm.JSONSchema{Name: "handoff", Schema: json.RawMessage(`{"type":"object","required":["status","summary"]}`)}
	tools := []llm.ToolSpec{{Name: "web_search", Parameters: json.RawMessage(`{"type":"object"}`)}}
	req := llm.Request{Messages: []llm.Message{{Role: "user", Content: "search"}}, Tools: tools, ResponseFormat: format}
	first, err := c.Chat(context.Background(), req)
	if err != nil || len(first.ToolCalls) != 1 || first.ToolCalls[0].Name != "web_search" {
		t.Fatalf("first turn: %+v, %v: want the web_search call", first, err)
	}
	req.Messages = append(req.Messages, llm.Message{Role: "assistant", ToolCalls: first.ToolCalls},
		llm.Message{Role: "tool", ToolCallID: first.ToolCalls[0].ID, Content: "found"})
	last, err := c.Chat(context.Background(), req)
	if err != nil || last.Content != `{"status":"completed","summary":"found"}` || last.ToolCalls != nil {
		t.Fatalf("final turn: %+v, %v: want the hand-off object as the content", last, err)
	}
}

// TestAnthropicCacheLookback: a breakpoint on a newer block still reads the prefix an
// earlier call cached at its own breakpoint, up to 20 blocks back, as the API does.
func TestAnthropicCacheLookback(t *testing.T) {
	srv := streamServer(t, `{"default":"fine"}`)
	c := anthClient(t, srv, "")
	msgs := []llm.Message{{Role: "system", Content: "short"}, {Role: "user", Content: longSystem}, {Role: "assistant", Content: "ok"}, {Role: "user", Content: "q1"}}
	first, err := c.Chat(context.Background(), llm.Request{Messages: msgs, PromptCache: true})
	if err != nil || first.Usage.CacheWriteInputTokens < 1024 {
		t.Fatalf("first call: %+v, %v: want the history written", first.Usage, err)
	}
	msgs = append(msgs, llm.Message{Role: "assistant", Content: "a1"}, llm.Message{Role: "user", Content: "q2"})
	second, err := c.Chat(context.Background(), llm.Request{Messages: msgs, PromptCache: true})
	if err != nil || second.Usage.CachedInputTokens != first.Usage.CacheWriteInputTokens {
		t.Fatalf("second call: %+v, %v: want the first call's prefix read (%d tokens)", second.Usage, err, first.Usage.CacheWriteInputTokens)
	}
}
