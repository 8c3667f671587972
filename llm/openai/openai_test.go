package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/httpclient/dialtest"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/openai"
)

func TestChatSendsRequestAndParsesUsage(t *testing.T) {
	var got map[string]any
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		auth = r.Header.Get("Authorization")
		_ = json.NewDecoder(r.Body).Decode(&got)
		_, _ = w.Write([]byte(`{"model":"m-served","choices":[{"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}`))
	}))
	defer srv.Close()
	c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1/", APIKey: "k", Model: "m-default"})
	if err != nil {
		t.Fatal(err)
	}
	temp := 0.2
	resp, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "hi"}}, Temperature: &temp, MaxTokens: 50})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "hello" || resp.FinishReason != "stop" || resp.Model != "m-served" {
		t.Fatalf("response %+v", resp)
	}
	if resp.Usage != (llm.Usage{InputTokens: 7, OutputTokens: 2, TotalTokens: 9}) {
		t.Fatalf("usage %+v", resp.Usage)
	}
	if auth != "Bearer k" || got["model"] != "m-default" || got["max_completion_tokens"] != 50.0 || got["max_tokens"] != nil || got["temperature"].(float64) != 0.2 {
		t.Fatalf("request: auth %q body %v", auth, got)
	}
}

func TestAPIErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Case") {
		case "429":
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(429)
			_, _ = w.Write([]byte(`{"error":{"message":"slow down","type":"rate_limit","code":"rl"}}`))
		case "400":
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"error":{"message":"bad model","type":"invalid_request_error"}}`))
		case "html":
			w.WriteHeader(502)
			_, _ = w.Write([]byte(`<html>bad gateway</html>`))
		case "huge":
			_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"` + strings.Repeat("x", 2048) + `"}}]}`))
		case "nochoices":
			_, _ = w.Write([]byte(`{"choices":[]}`))
		case "null":
			_, _ = w.Write([]byte("null\n"))
		case "cut":
			_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"a`))
		case "text":
			_, _ = w.Write([]byte(`the model is busy`))
		case "trailing":
			_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"a"}}]} {"choices":[]}`))
		case "slow":
			time.Sleep(time.Second)
		}
	}))
	defer srv.Close()
	for _, c := range []struct {
		name, header string
		check        func(error) bool
		retryable    bool
	}{
		{"rate limit", "429", func(err error) bool {
			var e *llm.APIError
			return errors.As(err, &e) && e.StatusCode == 429 && e.RetryAfter == 3*time.Second && e.Message == "slow down" && e.Code == "rl"
		}, true},
		{"bad request", "400", func(err error) bool {
			var e *llm.APIError
			return errors.As(err, &e) && e.Type == "invalid_request_error"
		}, false},
		{"non-json 502", "html", func(err error) bool { return strings.Contains(err.Error(), "bad gateway") }, true},
		{"oversize", "huge", func(err error) bool { return strings.Contains(err.Error(), "exceeds 1024 bytes") }, false},
		{"no choices", "nochoices", func(err error) bool { return strings.Contains(err.Error(), "no choices") }, false},
		{"null answer", "null", func(err error) bool { return strings.Contains(err.Error(), "no choices") }, false},
		{"cut JSON", "cut", func(err error) bool { return errors.Is(err, llm.ErrMalformedResponse) }, false},
		{"not JSON", "text", func(err error) bool { return errors.Is(err, llm.ErrMalformedResponse) }, false},
		{"JSON and more", "trailing", func(err error) bool { return errors.Is(err, llm.ErrMalformedResponse) }, false},
		{"timeout", "slow", func(err error) bool {
			return errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Timeout")
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			hc := &http.Client{Transport: headerRT{c.header}, Timeout: 200 * time.Millisecond}
			cl, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", HTTPClient: hc, Timeout: 200 * time.Millisecond, MaxResponseBytes: 1024})
			if err != nil {
				t.Fatal(err)
			}
			_, err = cl.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
			if err == nil || !c.check(err) {
				t.Fatalf("err = %v", err)
			}
			if llm.IsRetryable(err) != c.retryable {
				t.Fatalf("IsRetryable(%v) = %v", err, !c.retryable)
			}
		})
	}
}

type headerRT struct{ v string }

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Case", h.v)
	return http.DefaultTransport.RoundTrip(r)
}

func TestConfig(t *testing.T) {
	if _, err := openai.New(openai.Config{BaseURL: "ftp://x"}); err == nil || !strings.Contains(err.Error(), "http(s) URL") {
		t.Fatalf("bad URL accepted: %v", err)
	}
	env := map[string]string{"OPENAI_BASE_URL": "http://h/v1", "OPENAI_API_KEY": "s", "FATHOM_MODEL": "m"}
	c := openai.ConfigFromEnv(func(k string) string { return env[k] })
	if c.BaseURL != "http://h/v1" || c.APIKey != "s" || c.Model != "m" {
		t.Fatalf("ConfigFromEnv = %+v", c)
	}
	if _, err := openai.New(openai.Config{}); err != nil {
		t.Fatalf("zero config should default: %v", err)
	}
	c2, _ := openai.New(openai.Config{BaseURL: "http://127.0.0.1:1/v1"})
	if _, err := c2.Chat(context.Background(), llm.Request{}); err == nil {
		t.Fatal("empty request accepted")
	}
	if _, err := c2.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}}); err == nil || !llm.IsRetryable(err) {
		t.Fatalf("refused connection: %v retryable=%v", err, llm.IsRetryable(err))
	}
}

func TestToolCallWireFormat(t *testing.T) {
	var got struct {
		Messages []map[string]any `json:"messages"`
		Tools    []map[string]any `json:"tools"`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c9","type":"function","function":{"name":"write_todos","arguments":"{\"todos\":[]}"}}]},"finish_reason":"tool_calls"}]}`))
	}))
	defer srv.Close()
	c, _ := openai.New(openai.Config{BaseURL: srv.URL})
	resp, err := c.Chat(context.Background(), llm.Request{
		Messages: []llm.Message{
			{Role: "user", Content: "plan"},
			{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "write_todos", Arguments: `{}`}}},
			{Role: "tool", ToolCallID: "c1", Content: "ok"},
		},
		Tools: []llm.ToolSpec{{Name: "write_todos", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0] != (llm.ToolCall{ID: "c9", Name: "write_todos", Arguments: `{"todos":[]}`}) || resp.Content != "" {
		t.Fatalf("response %+v", resp)
	}
	fn, _ := got.Tools[0]["function"].(map[string]any)
	if got.Tools[0]["type"] != "function" || fn["name"] != "write_todos" || fn["parameters"] == nil {
		t.Fatalf("tools on the wire: %v", got.Tools)
	}
	asst := got.Messages[1]
	calls, _ := asst["tool_calls"].([]any)
	call, _ := calls[0].(map[string]any)
	if asst["content"] != nil || call["type"] != "function" || call["function"].(map[string]any)["name"] != "write_todos" {
		t.Fatalf("assistant message on the wire: %v", asst)
	}
	if got.Messages[2]["tool_call_id"] != "c1" || got.Messages[2]["role"] != "tool" {
		t.Fatalf("tool message on the wire: %v", got.Messages[2])
	}
}

// TestRequestOptionsOnTheWire: the capabilities reasoning models and structured
// answers need reach the server under OpenAI's names, and usage details come back.
func TestRequestOptionsOnTheWire(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = nil
		_ = json.NewDecoder(r.Body).Decode(&got)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"model":"o4","choices":[{"message":{"role":"assistant","content":"{\"a\":1"},"finish_reason":"length"}],` +
			`"usage":{"prompt_tokens":1500,"completion_tokens":300,"total_tokens":1800,"prompt_tokens_details":{"cached_tokens":1024},"completion_tokens_details":{"reasoning_tokens":256}}}`))
	}))
	defer srv.Close()
	c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	no := false
	resp, err := c.Chat(context.Background(), llm.Request{
		Messages:          []llm.Message{{Role: "user", Content: "plan"}},
		MaxTokens:         300,
		Tools:             []llm.ToolSpec{{Name: "write_todos", Parameters: json.RawMessage(`{"type":"object"}`)}},
		ToolChoice:        "write_todos",
		ParallelToolCalls: &no,
		ResponseFormat:    &llm.JSONSchema{Name: "plan", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`), Strict: true},
		ReasoningEffort:   "low",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got["max_completion_tokens"] != 300.0 || got["parallel_tool_calls"] != false || got["reasoning_effort"] != "low" {
		t.Fatalf("request %v", got)
	}
	tc, _ := got["tool_choice"].(map[string]any)
	if fn, _ := tc["function"].(map[string]any); tc["type"] != "function" || fn["name"] != "write_todos" {
		t.Fatalf("tool_choice %v", got["tool_choice"])
	}
	rf, _ := got["response_format"].(map[string]any)
	js, _ := rf["json_schema"].(map[string]any)
	if rf["type"] != "json_schema" || js["name"] != "plan" || js["strict"] != true || js["schema"] == nil {
		t.Fatalf("response_format %v", got["response_format"])
	}
	if !resp.Truncated() || resp.FinishReason != llm.FinishLength {
		t.Fatalf("finish %q not surfaced as truncated", resp.FinishReason)
	}
	want := llm.Usage{InputTokens: 1500, OutputTokens: 300, TotalTokens: 1800, CachedInputTokens: 1024, ReasoningTokens: 256}
	if resp.Usage != want {
		t.Fatalf("usage %+v, want %+v", resp.Usage, want)
	}
	for _, choice := range []string{"auto", "none", "required"} {
		if _, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}, ToolChoice: choice,
			Tools: []llm.ToolSpec{{Name: "t"}}}); err != nil || got["tool_choice"] != choice {
			t.Fatalf("tool_choice %q sent as %v (err %v)", choice, got["tool_choice"], err)
		}
	}
	legacy, _ := openai.New(openai.Config{BaseURL: srv.URL + "/v1", LegacyMaxTokens: true})
	if _, err := legacy.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}, MaxTokens: 9}); err != nil ||
		got["max_tokens"] != 9.0 || got["max_completion_tokens"] != nil {
		t.Fatalf("legacy max tokens: %v (err %v)", got, err)
	}
}

// TestIgnoresSDKEnvironment: the client is configured by Config alone (ConfigFromEnv
// reads the environment Fathom documents, OPENAI_ORG_ID and OPENAI_PROJECT_ID included);
// the SDK's own environment defaults (OPENAI_API_KEY, OPENAI_ADMIN_KEY, OPENAI_ORG_ID,
// OPENAI_PROJECT_ID, OPENAI_CUSTOM_HEADERS) add no credential or header to a call, so
// a client for a local server without a key never sends a key meant for another endpoint.
func TestIgnoresSDKEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "env-key")
	t.Setenv("OPENAI_ADMIN_KEY", "admin-key")
	t.Setenv("OPENAI_ORG_ID", "org-1")
	t.Setenv("OPENAI_PROJECT_ID", "proj-1")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Leak: yes")
	var hdr http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr = r.Header.Clone()
		_, _ = w.Write([]byte(`{"model":"m","choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	}))
	defer srv.Close()
	for _, key := range []string{"", "cfg-key"} {
		c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKey: key})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "hi"}}}); err != nil {
			t.Fatal(err)
		}
		want := ""
		if key != "" {
			want = "Bearer " + key
		}
		if got := hdr.Get("Authorization"); got != want {
			t.Errorf("key %q: Authorization %q, want %q", key, got, want)
		}
		for _, h := range []string{"OpenAI-Organization", "OpenAI-Project", "X-Leak"} {
			if v := hdr.Get(h); v != "" {
				t.Errorf("key %q: header %s: %q from the environment", key, h, v)
			}
		}
	}
	cfg := openai.ConfigFromEnv(os.Getenv)
	cfg.BaseURL = srv.URL + "/v1"
	c, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	if hdr.Get("Authorization") != "Bearer env-key" || hdr.Get("OpenAI-Organization") != "org-1" || hdr.Get("OpenAI-Project") != "proj-1" || hdr.Get("X-Leak") != "" {
		t.Errorf("ConfigFromEnv's client sent %v", hdr)
	}
}

// TestTimeoutBoundsEveryCall: Config.Timeout bounds a call whichever HTTP client makes
// it: the one New builds, and a caller's client with no timeout or a longer one; a
// caller's client with a shorter timeout bounds it by that. The server answers the
// headers (and, streamed, one chunk) and then stalls until the client gives up.
func TestTimeoutBoundsEveryCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n"))
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	}))
	defer srv.Close()
	for _, cfg := range []openai.Config{
		{Timeout: 150 * time.Millisecond},
		{HTTPClient: &http.Client{}, Timeout: 150 * time.Millisecond},
		{HTTPClient: &http.Client{Timeout: time.Hour}, Timeout: 150 * time.Millisecond},
		{HTTPClient: &http.Client{Timeout: 150 * time.Millisecond}, Timeout: time.Hour},
	} {
		cfg.BaseURL = srv.URL + "/v1"
		hc := cfg.HTTPClient
		c, err := openai.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, stream := range []bool{false, true} {
			req := llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}}
			if stream {
				req.OnDelta = func(string) {}
			}
			start := time.Now()
			_, err := c.Chat(context.Background(), req)
			if err == nil || !llm.IsRetryable(err) || time.Since(start) > 5*time.Second {
				t.Fatalf("client %v, stream %v: err %v (retryable %v) after %v", hc, stream, err, llm.IsRetryable(err), time.Since(start))
			}
		}
	}
}

// lateReader answers at once and keeps the first request's body unread, as net/http
// may still be writing a body after the answer came back.
type lateReader struct {
	mu   sync.Mutex
	held io.ReadCloser
}

func (l *lateReader) RoundTrip(r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	if l.held == nil {
		l.held = r.Body
	} else {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	l.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Request: r,
		Body: io.NopCloser(strings.NewReader(`{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`))}, nil
}

// TestBodyReadAfterTheCall: a request body the transport reads only after the call
// returned, and after other calls reused the client's buffers, is still the first
// call's body.
func TestBodyReadAfterTheCall(t *testing.T) {
	rt := &lateReader{}
	c, err := openai.New(openai.Config{BaseURL: "http://127.0.0.1:1/v1", HTTPClient: &http.Client{Transport: rt}})
	if err != nil {
		t.Fatal(err)
	}
	first := strings.Repeat("the first call's question ", 40)
	for i := range 20 {
		content := first
		if i > 0 {
			content = strings.Repeat(fmt.Sprintf("call %d overwrites ", i), 30) // fits the first buffer
		}
		if _, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: content}}}); err != nil {
			t.Fatal(err)
		}
	}
	var got struct {
		Messages []llm.Message `json:"messages"`
	}
	data, err := io.ReadAll(rt.held)
	if err != nil || json.Unmarshal(data, &got) != nil || len(got.Messages) != 1 || got.Messages[0].Content != first {
		t.Fatalf("first body read late: %q, %v", data, err)
	}
	_ = rt.held.Close()
}

// Concurrent calls to one endpoint reuse their connections: a node calls its model from
// many sessions at once, and net/http's default transport keeps only two idle
// connections per host, so every further call used to dial (and later close) one.
func TestConcurrentCallsReuseConnections(t *testing.T) {
	body := []byte(`{"choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	dialtest.ExpectReuseInEachCase(t, body, 16, func(t *testing.T, url string, hc *http.Client) func() error {
		cl, err := openai.New(openai.Config{BaseURL: url + "/v1", HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		return func() error {
			_, err := cl.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "hi"}}})
			return err
		}
	})
}

// A large request body (sent in the pieces the client's memos keep) reaches the server
// whole, with its Content-Length (not chunked), over HTTP/1.1 and HTTP/2, streamed or
// not.
func TestLargeBodyOnTheWire(t *testing.T) {
	var msgs []llm.Message
	for i := range 60 {
		msgs = append(msgs, llm.Message{Role: "user", Content: fmt.Sprintf("message %d: %s", i, strings.Repeat("é<&>", 30))})
	}
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		for _, streamed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/streamed=%v", proto, streamed), func(t *testing.T) {
				type seen struct {
					proto        string
					length, read int64
					chunked      bool
					contentType  string
					messages     []string
				}
				got := make(chan seen, 1)
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					data, err := io.ReadAll(r.Body)
					if err != nil {
						t.Errorf("read the request: %v", err)
					}
					var body struct {
						Messages []struct{ Content string } `json:"messages"`
					}
					if err := json.Unmarshal(data, &body); err != nil {
						t.Errorf("the request is not JSON: %v", err)
					}
					s := seen{proto: r.Proto, length: r.ContentLength, read: int64(len(data)), contentType: r.Header.Get("Content-Type"),
						chunked: len(r.TransferEncoding) > 0}
					for _, m := range body.Messages {
						s.messages = append(s.messages, m.Content)
					}
					got <- s
					if streamed {
						w.Header().Set("Content-Type", "text/event-stream")
						_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
						return
					}
					_, _ = io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
				})
				srv := httptest.NewUnstartedServer(h)
				if proto == "HTTP/2.0" {
					srv.EnableHTTP2 = true
					srv.StartTLS()
				} else {
					srv.Start()
				}
				defer srv.Close()
				c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "m", HTTPClient: srv.Client()})
				if err != nil {
					t.Fatal(err)
				}
				req := llm.Request{Messages: msgs, MaxTokens: 10}
				if streamed {
					req.OnDelta = func(string) {}
				}
				resp, err := c.Chat(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				s := <-got
				if resp.Content != "ok" || s.proto != proto {
					t.Fatalf("answer %q over %s, want ok over %s", resp.Content, s.proto, proto)
				}
				if s.read < 8<<10 || s.length != s.read || s.chunked || s.contentType != "application/json" {
					t.Fatalf("the server read %d bytes with Content-Length %d (chunked %v, Content-Type %q); want more than 8 KB, all of it announced, %q",
						s.read, s.length, s.chunked, s.contentType, "application/json")
				}
				if len(s.messages) != len(msgs) {
					t.Fatalf("the server got %d messages, want %d", len(s.messages), len(msgs))
				}
				for i, m := range msgs {
					if s.messages[i] != m.Content {
						t.Fatalf("message %d: the server got %q, want %q", i, s.messages[i], m.Content)
					}
				}
			})
		}
	}
}
