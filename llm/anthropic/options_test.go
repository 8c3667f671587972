package anthropic_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/anthropic"
	"github.com/fathom-agents/fathom/llm/mock"
)

// canned serves one fixed Messages API answer and keeps the last request body.
func canned(t *testing.T, answer string) (*anthropic.Client, func() map[string]any) {
	t.Helper()
	var (
		mu   sync.Mutex
		last map[string]any
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		last = nil
		_ = json.Unmarshal(body, &last)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL, "k", 5*time.Second)
	return c, func() map[string]any { mu.Lock(); defer mu.Unlock(); return last }
}

// TestStructuredOutputIsAForcedTool: a ResponseFormat goes out as a tool the model is
// forced to call (alone by name, beside other tools with "any"), and its input comes
// back as the answer's content.
func TestStructuredOutputIsAForcedTool(t *testing.T) {
	c, last := canned(t, `{"model":"claude-x","stop_reason":"tool_use","content":[{"type":"tool_use","id":"t1","name":"plan","input":{"steps":["a"]}}],"usage":{"input_tokens":5,"output_tokens":7}}`)
	no := false
	resp, err := c.Chat(context.Background(), llm.Request{
		Messages:          []llm.Message{user("plan it")},
		ResponseFormat:    &llm.JSONSchema{Name: "plan", Schema: json.RawMessage(`{"type":"object","properties":{"steps":{"type":"array"}},"required":["steps"]}`)},
		Tools:             []llm.ToolSpec{{Name: "web_search", Parameters: json.RawMessage(`{"type":"object"}`)}},
		ParallelToolCalls: &no,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != `{"steps":["a"]}` || resp.ToolCalls != nil || resp.FinishReason != "stop" {
		t.Fatalf("response %+v", resp)
	}
	req := last()
	// Beside another tool the answer tool is listed first and some tool must be called:
	// forcing it would forbid web_search.
	tc, _ := req["tool_choice"].(map[string]any)
	if tc["type"] != "any" || tc["disable_parallel_tool_use"] != true {
		t.Fatalf("tool_choice %v", req["tool_choice"])
	}
	tools, _ := req["tools"].([]any)
	if len(tools) != 2 || tools[0].(map[string]any)["name"] != "plan" {
		t.Fatalf("tools %v", req["tools"])
	}
	schema, _ := tools[0].(map[string]any)["input_schema"].(map[string]any)
	if req, _ := schema["required"].([]any); len(req) != 1 || req[0] != "steps" {
		t.Fatalf("schema not sent as given: %v", tools[0])
	}
	// Alone it is forced by name.
	if _, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{user("plan it")},
		ResponseFormat: &llm.JSONSchema{Name: "plan", Schema: json.RawMessage(`{"type":"object"}`)}}); err != nil {
		t.Fatal(err)
	}
	if tc, _ := last()["tool_choice"].(map[string]any); tc["type"] != "tool" || tc["name"] != "plan" {
		t.Fatalf("tool_choice alone %v", last()["tool_choice"])
	}
	if _, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{user("x")},
		ResponseFormat: &llm.JSONSchema{Name: "web_search"}, Tools: []llm.ToolSpec{{Name: "web_search"}}}); err == nil {
		t.Fatal("a response format named like a tool was accepted")
	}
}

// TestToolChoiceMapping: Fathom's tool choices become Anthropic's tool_choice objects.
func TestToolChoiceMapping(t *testing.T) {
	c, last := canned(t, `{"model":"m","stop_reason":"end_turn","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":1,"output_tokens":1}}`)
	yes, no := true, false
	for _, tc := range []struct {
		choice   string
		parallel *bool
		want     string // JSON of tool_choice; "" for absent
		tools    int
	}{
		{"", nil, "", 1},
		{"auto", &no, `{"disable_parallel_tool_use":true,"type":"auto"}`, 1},
		{"required", nil, `{"type":"any"}`, 1},
		{"required", &yes, `{"disable_parallel_tool_use":false,"type":"any"}`, 1},
		{"web_search", nil, `{"name":"web_search","type":"tool"}`, 1},
		{"none", nil, "", 0},
	} {
		if _, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{user("x")}, ToolChoice: tc.choice, ParallelToolCalls: tc.parallel,
			Tools: []llm.ToolSpec{{Name: "web_search"}}}); err != nil {
			t.Fatal(err)
		}
		req := last()
		got := ""
		if v, ok := req["tool_choice"]; ok {
			b, _ := json.Marshal(v)
			got = string(b)
		}
		tools, _ := req["tools"].([]any)
		if got != tc.want || len(tools) != tc.tools {
			t.Errorf("choice %q parallel %v: tool_choice %s tools %d, want %s and %d", tc.choice, tc.parallel, got, len(tools), tc.want, tc.tools)
		}
	}
}

// TestThinkingAndCache: extended thinking raises max_tokens above the budget, its
// blocks come back on the response and go out again first on the next assistant turn;
// PromptCache marks the system prompt and the stable history; cache usage counts as
// input and as cached input.
func TestThinkingAndCache(t *testing.T) {
	c, last := canned(t, `{"model":"claude-x","stop_reason":"tool_use","content":[`+
		`{"type":"thinking","thinking":"let me see","signature":"sig1"},{"type":"redacted_thinking","data":"enc"},`+
		`{"type":"tool_use","id":"t1","name":"web_search","input":{"q":"a"}}],`+
		`"usage":{"input_tokens":10,"cache_read_input_tokens":2000,"cache_creation_input_tokens":300,"output_tokens":50}}`)
	msgs := []llm.Message{{Role: "system", Content: "be good"}, user("find a")}
	resp, err := c.Chat(context.Background(), llm.Request{Messages: msgs, ThinkingBudget: 2000, MaxTokens: 1000, PromptCache: true,
		Tools: []llm.ToolSpec{{Name: "web_search"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Usage{InputTokens: 2310, OutputTokens: 50, TotalTokens: 2360, CachedInputTokens: 2000, CacheWriteInputTokens: 300}
	if resp.Usage != want {
		t.Fatalf("usage %+v, want %+v", resp.Usage, want)
	}
	if len(resp.Thinking) != 2 || resp.Thinking[0] != (llm.ThinkingBlock{Thinking: "let me see", Signature: "sig1"}) || resp.Thinking[1].RedactedData != "enc" {
		t.Fatalf("thinking %+v", resp.Thinking)
	}
	req := last()
	th, _ := req["thinking"].(map[string]any)
	if th["type"] != "enabled" || th["budget_tokens"] != 2000.0 || req["max_tokens"].(float64) <= 2000 {
		t.Fatalf("thinking %v max_tokens %v", req["thinking"], req["max_tokens"])
	}
	sys, _ := req["system"].([]any)
	if cc, _ := sys[0].(map[string]any)["cache_control"].(map[string]any); cc["type"] != "ephemeral" {
		t.Fatalf("system without a cache breakpoint: %v", req["system"])
	}
	msgs = append(msgs, llm.Message{Role: "assistant", ToolCalls: resp.ToolCalls, Thinking: resp.Thinking},
		llm.Message{Role: "tool", ToolCallID: "t1", Content: "found"})
	if _, err := c.Chat(context.Background(), llm.Request{Messages: msgs, ThinkingBudget: 2000, PromptCache: true, Tools: []llm.ToolSpec{{Name: "web_search"}}}); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(last()["messages"])
	var sent []struct {
		Role    string           `json:"role"`
		Content []map[string]any `json:"content"`
	}
	_ = json.Unmarshal(b, &sent)
	if len(sent) != 3 {
		t.Fatalf("messages %s", b)
	}
	var types []string
	for _, bl := range sent[1].Content {
		types = append(types, bl["type"].(string))
	}
	if strings.Join(types, ",") != "thinking,redacted_thinking,tool_use" || sent[1].Content[0]["signature"] != "sig1" {
		t.Fatalf("assistant turn %s", b)
	}
	if cc, _ := sent[1].Content[2]["cache_control"].(map[string]any); cc["type"] != "ephemeral" {
		t.Fatalf("stable prefix (the turn before the newest) has no breakpoint: %s", b)
	}
	if _, ok := sent[2].Content[0]["cache_control"]; ok {
		t.Fatalf("the newest turn is marked: %s", b)
	}
}

// TestTaskPromptAfterHistory: a system message after the conversation (a step call's
// task prompt) is sent as user text at its place, not in the system prompt, and the
// history breakpoint is on the block before it, so the whole history is the cached
// prefix of the next call; the system prompt stays the leading system messages.
func TestTaskPromptAfterHistory(t *testing.T) {
	c, last := canned(t, `{"model":"claude-x","stop_reason":"end_turn","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":10,"output_tokens":5}}`)
	msgs := []llm.Message{{Role: "system", Content: "be good"}, user("Step: find a"),
		{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "t1", Name: "web_search", Arguments: `{"q":"a"}`}}},
		{Role: "tool", ToolCallID: "t1", Content: "found"},
		{Role: "system", Content: "Current step: find a"}}
	if _, err := c.Chat(context.Background(), llm.Request{Messages: msgs, PromptCache: true, Tools: []llm.ToolSpec{{Name: "web_search"}}}); err != nil {
		t.Fatal(err)
	}
	req := last()
	b, _ := json.Marshal(req["messages"])
	var sent []struct {
		Role    string           `json:"role"`
		Content []map[string]any `json:"content"`
	}
	_ = json.Unmarshal(b, &sent)
	sys, _ := req["system"].([]any)
	if len(sys) != 1 || sys[0].(map[string]any)["text"] != "be good" {
		t.Fatalf("system %v, want only the leading system message", req["system"])
	}
	if len(sent) != 3 || len(sent[2].Content) != 2 || sent[2].Content[0]["type"] != "tool_result" ||
		sent[2].Content[1]["type"] != "text" || sent[2].Content[1]["text"] != "Current step: find a" {
		t.Fatalf("messages %s, want the task prompt as text after the tool result", b)
	}
	if cc, _ := sent[2].Content[0]["cache_control"].(map[string]any); cc["type"] != "ephemeral" {
		t.Fatalf("the last block before the task prompt has no breakpoint: %s", b)
	}
	for i, m := range sent {
		for j, bl := range m.Content {
			if _, ok := bl["cache_control"]; ok && (i != 2 || j != 0) {
				t.Fatalf("breakpoint on messages.%d.content.%d: %s", i, j, b)
			}
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{"ANTHROPIC_BASE_URL": "http://h", "ANTHROPIC_API_KEY": "s", "FATHOM_MODEL": "claude-x", "ANTHROPIC_MAX_TOKENS": "32000"}
	c, err := anthropic.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || c.BaseURL != "http://h" || c.APIKey != "s" || c.Model != "claude-x" || c.MaxTokens != 32000 {
		t.Fatalf("ConfigFromEnv = %+v, %v", c, err)
	}
	env["ANTHROPIC_MAX_TOKENS"] = "lots"
	if _, err := anthropic.ConfigFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_MAX_TOKENS") {
		t.Fatalf("bad ANTHROPIC_MAX_TOKENS: %v", err)
	}
}

// TestIgnoresSDKEnvironment: the client is configured by Config alone; the SDK's own
// environment defaults (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN) add no credential to a
// call, so a client for a local server without a key never sends a key meant for
// another endpoint.
func TestIgnoresSDKEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "") // the SDK would send the auth token then
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "env-token")
	rec := &recorder{}
	script, err := mock.ParseScript([]byte(`{"default":"ok"}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rec.wrap(mock.New(mock.Config{Script: script}).Handler()))
	defer srv.Close()
	for _, key := range []string{"", "cfg-key"} {
		c, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: key})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{user("hi")}}); err != nil {
			t.Fatal(err)
		}
		rec.mu.Lock()
		h := rec.headers[len(rec.headers)-1]
		rec.mu.Unlock()
		if h.Get("X-Api-Key") != key || h.Get("Authorization") != "" {
			t.Errorf("key %q: x-api-key %q, Authorization %q", key, h.Get("X-Api-Key"), h.Get("Authorization"))
		}
	}
	// ConfigFromEnv reads them into Config.
	t.Setenv("ANTHROPIC_API_KEY", "env-key")
	cfg, err := anthropic.ConfigFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.BaseURL = srv.URL
	c, err := anthropic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{user("hi")}}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	h := rec.headers[len(rec.headers)-1]
	rec.mu.Unlock()
	if h.Get("X-Api-Key") != "env-key" || h.Get("Authorization") != "Bearer env-token" {
		t.Errorf("ConfigFromEnv's client: x-api-key %q, Authorization %q", h.Get("X-Api-Key"), h.Get("Authorization"))
	}
}
