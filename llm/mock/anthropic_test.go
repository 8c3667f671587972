package mock_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/anthropic"
	"github.com/fathom-agents/fathom/llm/mock"
)

// postMessages sends body to POST /v1/messages with the given headers.
func postMessages(t *testing.T, srv *httptest.Server, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type anthErrorBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeAnthError(t *testing.T, resp *http.Response) anthErrorBody {
	t.Helper()
	var b anthErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		t.Fatalf("error body: %v", err)
	}
	if b.Type != "error" || b.Error.Type == "" || b.Error.Message == "" {
		t.Fatalf("error body %+v", b)
	}
	return b
}

func anthClient(t *testing.T, srv *httptest.Server, key string) *anthropic.Client {
	t.Helper()
	c, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: key, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMessagesJSONAnswer(t *testing.T) {
	srv := streamServer(t, `{"rules":[{"system_match":"^S1\nS2$","response":"hi {{.User}}"}],"default":"no system"}`)
	resp := postMessages(t, srv, `{"model":"claude-test","max_tokens":10,"system":[{"type":"text","text":"S1"},{"type":"text","text":"S2"}],`+
		`"messages":[{"role":"user","content":"Ada"}]}`, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var msg struct {
		ID, Type, Role, Model string
		Content               []struct{ Type, Text string }
		StopReason            string `json:"stop_reason"`
		StopSequence          *string
		Usage                 struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(msg.ID, "msg_") || msg.Type != "message" || msg.Role != "assistant" || msg.Model != "claude-test" ||
		len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != "hi Ada" || msg.StopReason != "end_turn" ||
		msg.Usage.InputTokens == 0 || msg.Usage.OutputTokens == 0 {
		t.Fatalf("message %+v", msg)
	}
}

// events reads a streamed answer and returns its event types, checking each event's
// data names the same type.
func events(t *testing.T, resp *http.Response) ([]string, []map[string]any) {
	t.Helper()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	d := ssestream.NewDecoder(resp)
	defer d.Close()
	var (
		types []string
		datas []map[string]any
	)
	for d.Next() {
		ev := d.Event()
		var data map[string]any
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			t.Fatalf("event %s: %v", ev.Type, err)
		}
		if data["type"] != ev.Type {
			t.Fatalf("event %q carries type %v", ev.Type, data["type"])
		}
		types, datas = append(types, ev.Type), append(datas, data)
	}
	if err := d.Err(); err != nil {
		t.Fatal(err)
	}
	return types, datas
}

func TestMessagesStreamEventSequence(t *testing.T) {
	srv := streamServer(t, `{"rules":[{"match":"call","tool_calls":[{"name":"a","arguments":"{\"x\":1}"},{"name":"b","arguments":"{}"}]}],
		"default":"one two three"}`)
	types, datas := events(t, postMessages(t, srv, `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hello"}]}`, nil))
	want := "message_start ping content_block_start content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %v", types)
	}
	if d := datas[7]["delta"].(map[string]any); d["stop_reason"] != "end_turn" {
		t.Fatalf("message_delta %v", datas[7])
	}

	types, datas = events(t, postMessages(t, srv, `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"call"}]}`, nil))
	want = "message_start ping" +
		" content_block_start content_block_delta content_block_delta content_block_stop" +
		" content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %v", types)
	}
	var args [2]string
	for _, d := range datas {
		if d["type"] == "content_block_delta" {
			delta := d["delta"].(map[string]any)
			if delta["type"] != "input_json_delta" {
				t.Fatalf("delta %v", delta)
			}
			args[int(d["index"].(float64))] += delta["partial_json"].(string)
		}
	}
	if args[0] != `{"x":1}` || args[1] != `{}` {
		t.Fatalf("assembled inputs %q", args)
	}
	if cb := datas[6]["content_block"].(map[string]any); cb["type"] != "tool_use" || cb["name"] != "b" || datas[6]["index"] != 1.0 {
		t.Fatalf("second block start %v", datas[6])
	}
}

func TestMessagesRejectsBadRequests(t *testing.T) {
	srv := streamServer(t, `{"default":"ok"}`)
	for _, c := range []struct {
		name, body, want string
	}{
		{"not json", `{`, "not valid JSON"},
		{"no max_tokens", `{"messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{"no messages", `{"max_tokens":5,"messages":[]}`, "messages"},
		{"system role", `{"max_tokens":5,"messages":[{"role":"system","content":"x"}]}`, "role"},
		{"tool_result without tool_use", `{"max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"}]}]}`, "tool_result"},
		{"tool_use without tool_result", `{"max_tokens":5,"messages":[{"role":"user","content":"x"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"n","input":{}}]},{"role":"user","content":"y"}]}`, "without tool_result"},
		{"tool_use input not an object", `{"max_tokens":5,"messages":[{"role":"user","content":"x"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"n","input":"{}"}]}]}`, "JSON object"},
		{"content of the wrong type", `{"max_tokens":5,"messages":[{"role":"user","content":5}]}`, "content"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := postMessages(t, srv, c.body, nil)
			b := decodeAnthError(t, resp)
			if resp.StatusCode != 400 || b.Error.Type != "invalid_request_error" || !strings.Contains(b.Error.Message, c.want) {
				t.Fatalf("status %d body %+v", resp.StatusCode, b)
			}
		})
	}
	// A well-formed tool round trip with string and block tool_result content passes.
	resp := postMessages(t, srv, `{"max_tokens":5,"messages":[{"role":"user","content":"x"},`+
		`{"role":"assistant","content":[{"type":"text","text":"t"},{"type":"tool_use","id":"t1","name":"n","input":{}},{"type":"tool_use","id":"t2","name":"n","input":{}}]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"},{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"r2"}]}]}]}`, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("valid round trip: status %d", resp.StatusCode)
	}
}

func TestMessagesAuth(t *testing.T) {
	s, err := mock.ParseScript([]byte(`{"default":"ok"}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mock.New(mock.Config{Script: s, Token: "tok"}).Handler())
	defer srv.Close()
	body := `{"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`
	for _, c := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"x-api-key", map[string]string{"x-api-key": "tok"}, 200},
		{"bearer", map[string]string{"Authorization": "Bearer tok"}, 200},
		{"none", nil, 401},
		{"wrong key", map[string]string{"x-api-key": "nope"}, 401},
	} {
		resp := postMessages(t, srv, body, c.header)
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.status)
		}
		if c.status == 401 {
			if b := decodeAnthError(t, resp); b.Error.Type != "authentication_error" {
				t.Errorf("%s: error type %q", c.name, b.Error.Type)
			}
		}
	}
}

// TestMessagesSharesTheRuleEngine checks both endpoints draw on one script: a rule's
// times and hit count span them, and Requests counts both.
func TestMessagesSharesTheRuleEngine(t *testing.T) {
	s, err := mock.ParseScript([]byte(`{"rules":[
		{"match":"flaky","status":429,"error_message":"slow down","retry_after_s":1,"times":2},
		{"match":"flaky","response":"ok after {{.N}}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := mock.New(mock.Config{Script: s})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	oc, ac := client(t, srv, ""), anthClient(t, srv, "")
	req := llm.Request{Messages: []llm.Message{{Role: "user", Content: "flaky"}}}
	var apiErr *llm.APIError
	if _, err := oc.Chat(context.Background(), req); !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
		t.Fatalf("chat endpoint: %v", err)
	}
	if _, err := ac.Chat(context.Background(), req); !errors.As(err, &apiErr) || apiErr.StatusCode != 429 ||
		apiErr.Type != "rate_limit_error" || apiErr.RetryAfter != time.Second {
		t.Fatalf("messages endpoint: %v", err)
	}
	if resp, err := ac.Chat(context.Background(), req); err != nil || resp.Content != "ok after 1" {
		t.Fatalf("messages endpoint after the errors: %q %v", resp.Content, err)
	}
	if resp, err := oc.Chat(context.Background(), req); err != nil || resp.Content != "ok after 2" {
		t.Fatalf("chat endpoint after the errors: %q %v", resp.Content, err)
	}
	if m.Requests() != 4 {
		t.Fatalf("Requests = %d, want 4", m.Requests())
	}
}

// TestMessagesInvalidScriptedArguments: arguments that are not a JSON object cannot be
// a tool_use input, so they arrive wrapped as {"_raw": ...}, streamed or not.
func TestMessagesInvalidScriptedArguments(t *testing.T) {
	srv := streamServer(t, `{"rules":[{"tool_calls":[{"name":"t","arguments":"{not json"},{"name":"u","arguments":"{ \"a\" : 1 }"}]}]}`)
	c := anthClient(t, srv, "")
	for _, stream := range []bool{false, true} {
		req := llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}}
		if stream {
			req.OnDelta = func(string) {}
		}
		resp, err := c.Chat(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ToolCalls) != 2 || resp.ToolCalls[0].Arguments != `{"_raw":"{not json"}` || resp.ToolCalls[1].Arguments != `{"a":1}` {
			t.Fatalf("stream %v: calls %+v", stream, resp.ToolCalls)
		}
	}
}
