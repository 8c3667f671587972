package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/anthropic"
	"github.com/fathom-agents/fathom/llm/mock"
)

// recorder keeps the requests that reach the server, then hands them to the mock.
type recorder struct {
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
}

func (rec *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rec.mu.Lock()
		rec.bodies = append(rec.bodies, body)
		rec.headers = append(rec.headers, r.Header.Clone())
		rec.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

// last decodes the last recorded request body into v.
func (rec *recorder) last(t *testing.T, v any) http.Header {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.bodies) == 0 {
		t.Fatal("no request reached the server")
	}
	if err := json.Unmarshal(rec.bodies[len(rec.bodies)-1], v); err != nil {
		t.Fatalf("request body: %v", err)
	}
	return rec.headers[len(rec.headers)-1]
}

func (rec *recorder) count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.bodies)
}

const token = "test-key"

// setup serves script from the mock over real HTTP (token required) and returns a
// client for it and the recorder of its requests.
func setup(t *testing.T, script string) (*anthropic.Client, *recorder) {
	t.Helper()
	s, err := mock.ParseScript([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	srv := httptest.NewServer(rec.wrap(mock.New(mock.Config{Script: s, Token: token}).Handler()))
	t.Cleanup(srv.Close)
	return newClient(t, srv.URL, token, 5*time.Second), rec
}

func newClient(t *testing.T, base, key string, timeout time.Duration) *anthropic.Client {
	t.Helper()
	c, err := anthropic.New(anthropic.Config{BaseURL: base, APIKey: key, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func user(text string) llm.Message { return llm.Message{Role: "user", Content: text} }

// wireRequest is what the tests read back from a recorded request.
type wireRequest struct {
	Model     string    `json:"model"`
	MaxTokens int       `json:"max_tokens"`
	System    sysText   `json:"system"`
	Stream    bool      `json:"stream"`
	Messages  []wireMsg `json:"messages"`
	Tools     []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

type wireMsg struct {
	Role    string `json:"role"`
	Content []struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   sysText         `json:"content"`
	} `json:"content"`
}

// sysText is a system prompt or tool_result content as text: the API takes a string or
// an array of text blocks (the SDK sends blocks).
type sysText string

func (s *sysText) UnmarshalJSON(data []byte) error {
	var str string
	if json.Unmarshal(data, &str) == nil {
		*s = sysText(str)
		return nil
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(data, &blocks); err != nil {
		return err
	}
	var parts []string
	for _, b := range blocks {
		parts = append(parts, b.Text)
	}
	*s = sysText(strings.Join(parts, ""))
	return nil
}

// summary renders messages compactly: "role[type:detail type:detail]".
func summary(ms []wireMsg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		var parts []string
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				parts = append(parts, "text:"+b.Text)
			case "tool_use":
				parts = append(parts, "tool_use:"+b.ID+":"+b.Name+":"+string(b.Input))
			case "tool_result":
				parts = append(parts, "tool_result:"+b.ToolUseID+":"+string(b.Content))
			default:
				parts = append(parts, b.Type)
			}
		}
		out[i] = m.Role + "[" + strings.Join(parts, " ") + "]"
	}
	return out
}

func TestPlainAnswerWithUsage(t *testing.T) {
	c, rec := setup(t, `{"rules":[{"system_match":"^You are terse\\.$","response":"Hello, {{.User}}!"}],"default":"no system"}`)
	resp, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{
		{Role: "system", Content: "You are terse."}, user("Ada"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Hello, Ada!" || resp.FinishReason != "stop" || len(resp.ToolCalls) != 0 {
		t.Fatalf("response %+v", resp)
	}
	if resp.Model != anthropic.DefaultConfig().Model || resp.Duration <= 0 {
		t.Fatalf("model %q duration %v", resp.Model, resp.Duration)
	}
	if u := resp.Usage; u.InputTokens == 0 || u.OutputTokens == 0 || u.TotalTokens != u.InputTokens+u.OutputTokens {
		t.Fatalf("usage %+v", u)
	}
	var req wireRequest
	h := rec.last(t, &req)
	if h.Get("x-api-key") != token || h.Get("anthropic-version") != anthropic.APIVersion || h.Get("Authorization") != "" {
		t.Fatalf("headers %v", h)
	}
	if req.MaxTokens != 4096 || req.Stream || req.System != "You are terse." || len(req.Tools) != 0 {
		t.Fatalf("wire request %+v", req)
	}
	if got := summary(req.Messages); len(got) != 1 || got[0] != "user[text:Ada]" {
		t.Fatalf("messages %q", got)
	}

	// A request's own model and max tokens win over the defaults.
	resp, err = c.Chat(context.Background(), llm.Request{Model: "claude-3-5-haiku-latest", MaxTokens: 17, Messages: []llm.Message{user("x")}})
	if err != nil || resp.Content != "no system" || resp.Model != "claude-3-5-haiku-latest" {
		t.Fatalf("second call: %+v %v", resp, err)
	}
	req = wireRequest{}
	rec.last(t, &req)
	if req.Model != "claude-3-5-haiku-latest" || req.MaxTokens != 17 || req.System != "" {
		t.Fatalf("second wire request %+v", req)
	}
}

func TestStreamedDeltasArriveInOrder(t *testing.T) {
	c, rec := setup(t, `{"default":"one two three four five"}`)
	var deltas []string
	resp, err := c.Chat(context.Background(), llm.Request{
		Messages: []llm.Message{user("count")},
		OnDelta:  func(d string) { deltas = append(deltas, d) },
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"one", " two", " three", " four", " five"}
	if strings.Join(deltas, "|") != strings.Join(want, "|") || resp.Content != strings.Join(deltas, "") {
		t.Fatalf("deltas %q, content %q", deltas, resp.Content)
	}
	if resp.FinishReason != "stop" || resp.Model != anthropic.DefaultConfig().Model {
		t.Fatalf("finish %q model %q", resp.FinishReason, resp.Model)
	}
	if u := resp.Usage; u.InputTokens == 0 || u.OutputTokens == 0 || u.TotalTokens != u.InputTokens+u.OutputTokens {
		t.Fatalf("usage %+v", u)
	}
	var req wireRequest
	if h := rec.last(t, &req); !req.Stream || h.Get("Accept") != "text/event-stream" {
		t.Fatalf("stream %v accept %q", req.Stream, h.Get("Accept"))
	}
}

const toolScript = `{"rules":[
	{"tool_match":"^14:00$","response":"weather {{.Tool}} after {{.User}}"},
	{"match":"weather","tool_calls":[
		{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"},
		{"name":"get_time","arguments":"{\"tz\":\"CET\"}"}]}
],"default":"unmatched"}`

// TestToolCallRoundTrip asks for tool calls, answers them with tool messages, and
// checks the mock's tool_match rule sees the results (the mock also rejects tool
// results that do not answer the previous turn's tool_use blocks, or turns that do not
// alternate).
func TestToolCallRoundTrip(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			c, rec := setup(t, toolScript)
			tools := []llm.ToolSpec{
				{Name: "get_weather", Description: "Weather of a city", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
				{Name: "get_time"},
			}
			req := llm.Request{Tools: tools, Messages: []llm.Message{{Role: "system", Content: "sys"}, user("weather please")}}
			if stream {
				req.OnDelta = func(d string) { t.Errorf("text delta %q in a tool-call answer", d) }
			}
			resp, err := c.Chat(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.FinishReason != "tool_calls" || resp.Content != "" || len(resp.ToolCalls) != 2 {
				t.Fatalf("response %+v", resp)
			}
			if tc := resp.ToolCalls[0]; tc.Name != "get_weather" || tc.Arguments != `{"city":"Paris"}` || !strings.HasPrefix(tc.ID, "toolu_") {
				t.Fatalf("first call %+v", tc)
			}
			if tc := resp.ToolCalls[1]; tc.Name != "get_time" || tc.Arguments != `{"tz":"CET"}` || tc.ID == resp.ToolCalls[0].ID {
				t.Fatalf("second call %+v", tc)
			}
			var wire wireRequest
			rec.last(t, &wire)
			if len(wire.Tools) != 2 || wire.Tools[0].Name != "get_weather" || wire.Tools[0].Description != "Weather of a city" ||
				!strings.Contains(string(wire.Tools[0].InputSchema), `"city"`) || string(wire.Tools[1].InputSchema) != `{"type":"object"}` {
				t.Fatalf("wire tools %+v", wire.Tools)
			}

			req.Messages = append(req.Messages,
				llm.Message{Role: "assistant", ToolCalls: resp.ToolCalls},
				llm.Message{Role: "tool", ToolCallID: resp.ToolCalls[0].ID, Content: "sunny"},
				llm.Message{Role: "tool", ToolCallID: resp.ToolCalls[1].ID, Content: "14:00"})
			var deltas []string
			if stream {
				req.OnDelta = func(d string) { deltas = append(deltas, d) }
			}
			resp2, err := c.Chat(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp2.Content != "weather 14:00 after weather please" || resp2.FinishReason != "stop" || len(resp2.ToolCalls) != 0 {
				t.Fatalf("answer after tool results %+v", resp2)
			}
			if stream && strings.Join(deltas, "") != resp2.Content {
				t.Fatalf("deltas %q", deltas)
			}
			rec.last(t, &wire)
			want := []string{
				"user[text:weather please]",
				"assistant[tool_use:" + resp.ToolCalls[0].ID + `:get_weather:{"city":"Paris"} tool_use:` + resp.ToolCalls[1].ID + `:get_time:{"tz":"CET"}]`,
				"user[tool_result:" + resp.ToolCalls[0].ID + ":sunny tool_result:" + resp.ToolCalls[1].ID + ":14:00]",
			}
			if got := summary(wire.Messages); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("wire messages\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestRoleMapping checks system extraction (the system messages before the
// conversation; a later one is user text at its place), the merging of same-role neighbours,
// including consecutive tool messages, and that invalid tool arguments are sent as
// {"_raw": ...}; the mock accepts the result and its rules see the merged turns.
func TestRoleMapping(t *testing.T) {
	c, rec := setup(t, `{"rules":[{"system_match":"^A\n\nA2$","tool_match":"^r4$","response":"user={{.User}} tool={{.Tool}} goal={{.Goal}}"}]}`)
	resp, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{
		{Role: "system", Content: "A"},
		{Role: "system", Content: "A2"},
		user("Goal: g"),
		{Role: "system", Content: "B"},
		user("Step: s"),
		{Role: "assistant", Content: "thinking"},
		{Role: "assistant", ToolCalls: []llm.ToolCall{
			{ID: "c1", Name: "t", Arguments: `{"x": 1}`},
			{ID: "c2", Name: "t", Arguments: `{oops`},
			{ID: "c3", Name: "t", Arguments: ""},
			{ID: "c4", Name: "t", Arguments: `[1]`},
		}},
		{Role: "tool", ToolCallID: "c1", Content: "r1"},
		{Role: "tool", ToolCallID: "c2", Content: "r2"},
		{Role: "tool", ToolCallID: "c3", Content: ""},
		{Role: "tool", ToolCallID: "c4", Content: "r4"},
		user("Goal: later"),
		{Role: "assistant", Content: ""}, // empty: dropped
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "user=Goal: later tool=r4 goal=later" {
		t.Fatalf("content %q", resp.Content)
	}
	var wire wireRequest
	rec.last(t, &wire)
	want := []string{
		"user[text:Goal: g text:B text:Step: s]",
		`assistant[text:thinking tool_use:c1:t:{"x":1} tool_use:c2:t:{"_raw":"{oops"} tool_use:c3:t:{} tool_use:c4:t:{"_raw":"[1]"}]`,
		"user[tool_result:c1:r1 tool_result:c2:r2 tool_result:c3: tool_result:c4:r4 text:Goal: later]",
	}
	if wire.System != "A\n\nA2" || strings.Join(summary(wire.Messages), "\n") != strings.Join(want, "\n") {
		t.Fatalf("system %q messages\n%s", wire.System, strings.Join(summary(wire.Messages), "\n"))
	}

	n := rec.count()
	for name, msgs := range map[string][]llm.Message{
		"no messages":             nil,
		"only system":             {{Role: "system", Content: "s"}},
		"unknown role":            {{Role: "developer", Content: "x"}},
		"tool message without id": {user("x"), {Role: "tool", Content: "r"}},
	} {
		if _, err := c.Chat(context.Background(), llm.Request{Messages: msgs}); err == nil || !strings.HasPrefix(err.Error(), "anthropic: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if rec.count() != n {
		t.Fatal("an invalid request reached the server")
	}
}

func TestErrors(t *testing.T) {
	c, _ := setup(t, `{"rules":[
		{"match":"limit","status":429,"error_message":"slow down","retry_after_s":3},
		{"match":"crash","status":500},
		{"match":"overload","status":529,"error_message":"Overloaded"},
		{"match":"bad","status":400,"error_message":"nope"},
		{"match":"garbled","response":"x","malformed":true},
		{"match":"cut","response":"this answer will be cut in the middle","cut_stream":true}
	]}`)
	for _, tc := range []struct {
		prompt     string
		stream     bool
		status     int
		typ, msg   string
		retryAfter time.Duration
		retryable  bool
		contains   string // for errors that are not *llm.APIError
	}{
		{prompt: "limit", status: 429, typ: "rate_limit_error", msg: "slow down", retryAfter: 3 * time.Second, retryable: true},
		{prompt: "limit", stream: true, status: 429, typ: "rate_limit_error", msg: "slow down", retryAfter: 3 * time.Second, retryable: true},
		{prompt: "crash", status: 500, typ: "api_error", msg: "Internal Server Error", retryable: true},
		{prompt: "overload", stream: true, status: 529, typ: "overloaded_error", msg: "Overloaded", retryable: true},
		{prompt: "bad", status: 400, typ: "invalid_request_error", msg: "nope"},
		{prompt: "garbled", contains: "anthropic: decode /v1/messages response"},
		{prompt: "garbled", stream: true, contains: "anthropic: malformed stream event"},
		{prompt: "cut", stream: true, contains: "anthropic: stream cut", retryable: true},
	} {
		name := tc.prompt + map[bool]string{false: "", true: "/stream"}[tc.stream]
		t.Run(name, func(t *testing.T) {
			req := llm.Request{Messages: []llm.Message{user(tc.prompt)}}
			var deltas []string
			if tc.stream {
				req.OnDelta = func(d string) { deltas = append(deltas, d) }
			}
			_, err := c.Chat(context.Background(), req)
			if err == nil {
				t.Fatal("no error")
			}
			if llm.IsRetryable(err) != tc.retryable {
				t.Fatalf("retryable = %v for %v", llm.IsRetryable(err), err)
			}
			var apiErr *llm.APIError
			if tc.status == 0 {
				if errors.As(err, &apiErr) || !strings.Contains(err.Error(), tc.contains) {
					t.Fatalf("error %v", err)
				}
				return
			}
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || apiErr.Type != tc.typ || apiErr.Message != tc.msg {
				t.Fatalf("error %#v", err)
			}
			if apiErr.RetryAfter != tc.retryAfter {
				t.Fatalf("RetryAfter %v, want %v", apiErr.RetryAfter, tc.retryAfter)
			}
			if len(deltas) != 0 {
				t.Fatalf("deltas %q before an error answer", deltas)
			}
		})
	}

	t.Run("cut stream delivers a prefix", func(t *testing.T) {
		var deltas []string
		_, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{user("cut")}, OnDelta: func(d string) { deltas = append(deltas, d) }})
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("error %v", err)
		}
		if got := strings.Join(deltas, ""); got == "" || !strings.HasPrefix("this answer will be cut in the middle", got) || got == "this answer will be cut in the middle" {
			t.Fatalf("deltas before the cut %q", deltas)
		}
	})
}

func TestAuthAndTimeout(t *testing.T) {
	s, err := mock.ParseScript([]byte(`{"rules":[{"match":"slow","response":"late","delay_ms":5000}],"default":"ok"}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mock.New(mock.Config{Script: s, Token: token}).Handler())
	defer srv.Close()

	_, err = newClient(t, srv.URL, "wrong", 5*time.Second).Chat(context.Background(), llm.Request{Messages: []llm.Message{user("hi")}})
	var apiErr *llm.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type != "authentication_error" || llm.IsRetryable(err) {
		t.Fatalf("wrong key: %v", err)
	}
	_, err = newClient(t, srv.URL, token, 50*time.Millisecond).Chat(context.Background(), llm.Request{Messages: []llm.Message{user("slow")}})
	if err == nil || !llm.IsRetryable(err) {
		t.Fatalf("call slower than the timeout: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = newClient(t, srv.URL, token, 5*time.Second).Chat(ctx, llm.Request{Messages: []llm.Message{user("hi")}})
	if !errors.Is(err, context.Canceled) || llm.IsRetryable(err) {
		t.Fatalf("cancelled call: %v", err)
	}
}

// cannedServer answers every request with status and body, as given.
func cannedServer(t *testing.T, status int, header http.Header, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func sseEvents(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		typ, _, _ := strings.Cut(e, " ")
		b.WriteString("event: " + typ + "\ndata: " + strings.TrimPrefix(e, typ+" ") + "\n\n")
	}
	return b.String()
}

// TestWireEdgeCases covers answers the mock does not produce: text mixed with tool_use
// blocks, other stop reasons, error events inside a stream, unknown events and odd
// error bodies.
func TestWireEdgeCases(t *testing.T) {
	sse := http.Header{"Content-Type": {"text/event-stream"}}
	mixed := sseEvents(
		`message_start {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":10,"output_tokens":1}}}`,
		`ping {"type":"ping"}`,
		`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Let me "}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"check."}}`,
		`content_block_stop {"type":"content_block_stop","index":0}`,
		`content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"look","input":{}}}`,
		`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`,
		`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"q\":"}}`,
		`future_event {"type":"future_event","whatever":1}`,
		`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"x\"}"}}`,
		`content_block_stop {"type":"content_block_stop","index":1}`,
		`content_block_start {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_2","name":"noargs","input":{}}}`,
		`content_block_stop {"type":"content_block_stop","index":2}`,
		`message_delta {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}`,
		`message_stop {"type":"message_stop"}`,
	)
	t.Run("stream with text and tool_use", func(t *testing.T) {
		var deltas []string
		resp, err := newClient(t, cannedServer(t, 200, sse, mixed), "", 5*time.Second).Chat(context.Background(),
			llm.Request{Messages: []llm.Message{user("x")}, OnDelta: func(d string) { deltas = append(deltas, d) }})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(deltas, "|") != "Let me |check." || resp.Content != "Let me check." || resp.Model != "claude-x" || resp.FinishReason != "tool_calls" {
			t.Fatalf("response %+v deltas %q", resp, deltas)
		}
		want := []llm.ToolCall{{ID: "toolu_1", Name: "look", Arguments: `{"q":"x"}`}, {ID: "toolu_2", Name: "noargs", Arguments: "{}"}}
		if len(resp.ToolCalls) != 2 || resp.ToolCalls[0] != want[0] || resp.ToolCalls[1] != want[1] {
			t.Fatalf("tool calls %+v", resp.ToolCalls)
		}
		if resp.Usage != (llm.Usage{InputTokens: 10, OutputTokens: 42, TotalTokens: 52}) {
			t.Fatalf("usage %+v", resp.Usage)
		}
	})
	t.Run("json with text and tool_use", func(t *testing.T) {
		body := `{"type":"message","model":"claude-x","content":[{"type":"text","text":"a"},{"type":"thinking","thinking":"hm"},` +
			`{"type":"tool_use","id":"toolu_1","name":"look","input":{"q": "x"}},{"type":"text","text":"b"}],` +
			`"stop_reason":"max_tokens","usage":{"input_tokens":3,"output_tokens":4}}`
		resp, err := newClient(t, cannedServer(t, 200, nil, body), "", 5*time.Second).Chat(context.Background(), llm.Request{Messages: []llm.Message{user("x")}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Content != "ab" || resp.FinishReason != "length" || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Arguments != `{"q": "x"}` ||
			resp.Usage != (llm.Usage{InputTokens: 3, OutputTokens: 4, TotalTokens: 7}) {
			t.Fatalf("response %+v", resp)
		}
	})
	for _, tc := range []struct {
		name, body string
		status     int
		typ        string
		retryable  bool
		contains   string
	}{
		{name: "error event", status: 529, typ: "overloaded_error", retryable: true, body: sseEvents(
			`message_start {"type":"message_start","message":{"model":"m","usage":{"input_tokens":1}}}`,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"par"}}`,
			`error {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)},
		{name: "error event of unknown type", status: 500, typ: "mystery", retryable: true, body: sseEvents(
			`error {"type":"error","error":{"type":"mystery","message":"?"}}`)},
		{name: "json delta for a text block", contains: "not a tool_use block", body: sseEvents(
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}`)},
		{name: "block index out of range", contains: "out of range", body: sseEvents(
			`content_block_start {"type":"content_block_start","index":99999999,"content_block":{"type":"text","text":""}}`)},
		{name: "ends after message_delta", contains: "stream cut", retryable: true, body: sseEvents(
			`message_delta {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newClient(t, cannedServer(t, 200, sse, tc.body), "", 5*time.Second).Chat(context.Background(),
				llm.Request{Messages: []llm.Message{user("x")}, OnDelta: func(string) {}})
			if err == nil || llm.IsRetryable(err) != tc.retryable {
				t.Fatalf("error %v (retryable %v)", err, llm.IsRetryable(err))
			}
			var apiErr *llm.APIError
			if tc.status != 0 && (!errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || apiErr.Type != tc.typ) {
				t.Fatalf("error %#v", err)
			}
			if tc.contains != "" && !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("error %v", err)
			}
		})
	}
	t.Run("non-JSON error body and HTTP-date Retry-After", func(t *testing.T) {
		h := http.Header{"Retry-After": {time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}}
		_, err := newClient(t, cannedServer(t, 503, h, "upstream unavailable\n"), "", 5*time.Second).Chat(context.Background(), llm.Request{Messages: []llm.Message{user("x")}})
		var apiErr *llm.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 || apiErr.Message != "upstream unavailable" ||
			apiErr.RetryAfter < 58*time.Minute || apiErr.RetryAfter > time.Hour || !llm.IsRetryable(err) {
			t.Fatalf("error %#v", err)
		}
	})
	t.Run("response larger than the bound", func(t *testing.T) {
		body := `{"type":"message","content":[{"type":"text","text":"` + strings.Repeat("x", 2048) + `"}]}`
		c, err := anthropic.New(anthropic.Config{BaseURL: cannedServer(t, 200, nil, body), MaxResponseBytes: 1024})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{user("x")}}); err == nil || !strings.Contains(err.Error(), "exceeds 1024 bytes") {
			t.Fatalf("error %v", err)
		}
	})
}

func TestConfig(t *testing.T) {
	c, err := anthropic.New(anthropic.Config{})
	if err != nil || c.Name() != "anthropic" {
		t.Fatalf("zero config: %v", err)
	}
	d := anthropic.DefaultConfig()
	if d.BaseURL != "https://api.anthropic.com" || d.MaxTokens != 4096 || d.Model == "" || d.Validate() != nil {
		t.Fatalf("default config %+v", d)
	}
	for _, bad := range []anthropic.Config{
		{BaseURL: "api.anthropic.com"},
		{BaseURL: "ftp://x"},
		{BaseURL: "http://x", Timeout: -1},
		{BaseURL: "http://x", MaxTokens: -1},
	} {
		if _, err := anthropic.New(bad); err == nil {
			t.Errorf("config %+v accepted", bad)
		}
	}
}
