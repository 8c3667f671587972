package mock_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm/mock"
)

// fidelityServer serves script (JSON) with no token.
func fidelityServer(t *testing.T, script string) *httptest.Server {
	t.Helper()
	s, err := mock.ParseScript([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mock.New(mock.Config{Script: s}).Handler())
	t.Cleanup(srv.Close)
	return srv
}

// do sends method path with body and headers and decodes the JSON answer into out.
func do(t *testing.T, srv *httptest.Server, method, path, body string, header map[string]string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
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
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s %s: HTTP %d, body is not JSON: %v", method, path, resp.StatusCode, err)
	}
	return resp.StatusCode
}

type chatAnswer struct {
	Choices []struct {
		Message struct{ Content string }
	}
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
	}
	Error *struct{ Message, Type string }
}

// TestChatContentParts: a message whose content is an array of parts (LangChain,
// LiteLLM, the Vercel AI SDK) is read as its text parts concatenated, image parts
// skipped; an unknown part type is refused with a message naming it.
func TestChatContentParts(t *testing.T) {
	srv := fidelityServer(t, `{"rules":[{"match":"^say hello$","system_match":"^be brief$","response":"hello!"}],"default":"unmatched"}`)
	var got chatAnswer
	code := do(t, srv, "POST", "/v1/chat/completions", `{"model":"m","messages":[
		{"role":"system","content":[{"type":"text","text":"be brief"}]},
		{"role":"user","content":[{"type":"text","text":"say "},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"text","text":"hello"}]}]}`, nil, &got)
	if code != 200 || len(got.Choices) != 1 || got.Choices[0].Message.Content != "hello!" {
		t.Fatalf("content parts: HTTP %d %+v", code, got)
	}
	got = chatAnswer{}
	code = do(t, srv, "POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"hologram","data":"x"}]}]}`, nil, &got)
	if code != 400 || got.Error == nil || !strings.Contains(got.Error.Message, `"hologram"`) || !strings.Contains(got.Error.Message, "messages[0].content") {
		t.Fatalf("unknown part: HTTP %d %+v", code, got.Error)
	}
	got = chatAnswer{}
	if code := do(t, srv, "POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":42}]}`, nil, &got); code != 400 || got.Error == nil {
		t.Fatalf("numeric content: HTTP %d %+v", code, got)
	}
}

// TestPromptTokensCountEveryMessage: prompt_tokens (and Anthropic's input_tokens) grow
// with every message of the request, not only the last user and tool messages.
func TestPromptTokensCountEveryMessage(t *testing.T) {
	srv := fidelityServer(t, `{"default":"ok"}`)
	long := strings.Repeat("history ", 400) // ~800 tokens by the mock's estimate
	var short, withHistory chatAnswer
	do(t, srv, "POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"now"}]}`, nil, &short)
	do(t, srv, "POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"`+long+`"},{"role":"assistant","content":"`+long+`"},{"role":"user","content":"now"}]}`, nil, &withHistory)
	if short.Usage.PromptTokens == 0 || withHistory.Usage.PromptTokens < short.Usage.PromptTokens+700*2 {
		t.Fatalf("prompt_tokens %d for one message, %d with two earlier ~800-token messages", short.Usage.PromptTokens, withHistory.Usage.PromptTokens)
	}
	type anthUsage struct {
		Usage struct {
			InputTokens int `json:"input_tokens"`
		}
	}
	var a1, a2 anthUsage
	do(t, srv, "POST", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"now"}]}`, nil, &a1)
	do(t, srv, "POST", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"`+long+`"},{"role":"assistant","content":"`+long+`"},{"role":"user","content":"now"}]}`, nil, &a2)
	if a1.Usage.InputTokens == 0 || a2.Usage.InputTokens < a1.Usage.InputTokens+700*2 {
		t.Fatalf("input_tokens %d for one message, %d with two earlier ~800-token messages", a1.Usage.InputTokens, a2.Usage.InputTokens)
	}
}

// TestRetrieveModel: GET /v1/models/{id} answers the model in the caller's API shape.
func TestRetrieveModel(t *testing.T) {
	srv := fidelityServer(t, `{"default":"ok"}`)
	var o struct{ ID, Object, Type string }
	if code := do(t, srv, "GET", "/v1/models/gpt-4o-mini", "", nil, &o); code != 200 || o.ID != "gpt-4o-mini" || o.Object != "model" {
		t.Fatalf("OpenAI shape: HTTP %d %+v", code, o)
	}
	o.ID, o.Object = "", ""
	if code := do(t, srv, "GET", "/v1/models/claude-x", "", map[string]string{"anthropic-version": "2023-06-01"}, &o); code != 200 || o.ID != "claude-x" || o.Type != "model" {
		t.Fatalf("Anthropic shape: HTTP %d %+v", code, o)
	}
}

// TestMessagesMergesSameRoleTurns: consecutive turns of one role are merged, as the real
// API does, instead of refused; the merged user turn is what rules match.
func TestMessagesMergesSameRoleTurns(t *testing.T) {
	srv := fidelityServer(t, `{"rules":[{"match":"(?s)first.*second","response":"both seen"}],"default":"only one"}`)
	var got struct {
		Content []struct{ Text string }
	}
	code := do(t, srv, "POST", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"first"},{"role":"user","content":[{"type":"text","text":"second"}]},
		{"role":"assistant","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"first and second"}]}`, nil, &got)
	if code != 200 || len(got.Content) != 1 || got.Content[0].Text != "both seen" {
		t.Fatalf("HTTP %d %+v", code, got)
	}
	got.Content = nil
	code = do(t, srv, "POST", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"first"},{"role":"user","content":"second"}]}`, nil, &got)
	if code != 200 || len(got.Content) != 1 || got.Content[0].Text != "both seen" {
		t.Fatalf("two user turns: HTTP %d %+v", code, got)
	}
}

// TestCountTokens: POST /v1/messages/count_tokens checks the request like /v1/messages
// (max_tokens not needed) and counts what the answer's usage.input_tokens reports.
func TestCountTokens(t *testing.T) {
	srv := fidelityServer(t, `{"default":"ok"}`)
	body := `{"model":"m","system":"be brief","messages":[{"role":"user","content":"hello there"},{"role":"assistant","content":"hi"},{"role":"user","content":"and again"}]}`
	var count struct {
		InputTokens int `json:"input_tokens"`
	}
	if code := do(t, srv, "POST", "/v1/messages/count_tokens", body, nil, &count); code != 200 || count.InputTokens == 0 {
		t.Fatalf("count_tokens: HTTP %d %+v", code, count)
	}
	var msg struct {
		Usage struct {
			InputTokens int `json:"input_tokens"`
		}
	}
	do(t, srv, "POST", "/v1/messages", strings.Replace(body, `"model":"m"`, `"model":"m","max_tokens":5`, 1), nil, &msg)
	if msg.Usage.InputTokens != count.InputTokens {
		t.Fatalf("count_tokens says %d, the answer's usage %d", count.InputTokens, msg.Usage.InputTokens)
	}
	var bad anthErrorBody
	if code := do(t, srv, "POST", "/v1/messages/count_tokens", `{"model":"m","messages":[]}`, nil, &bad); code != 400 || bad.Type != "error" || bad.Error.Type != "invalid_request_error" {
		t.Fatalf("bad count_tokens: HTTP %d %+v", code, bad)
	}
}

// TestAnthropicErrorShape: errors on Anthropic requests (a /v1/messages path, or an
// anthropic-version header) have the Anthropic shape; OpenAI paths keep OpenAI's.
func TestAnthropicErrorShape(t *testing.T) {
	srv := fidelityServer(t, `{"default":"ok"}`)
	for _, c := range []struct {
		method, path string
		header       map[string]string
	}{
		{"POST", "/v1/messages/batches", nil},
		{"GET", "/v1/messages", nil},
		{"GET", "/v1/files", map[string]string{"anthropic-version": "2023-06-01"}},
	} {
		var b anthErrorBody
		code := do(t, srv, c.method, c.path, "{}", c.header, &b)
		if code != 404 || b.Type != "error" || b.Error.Type != "not_found_error" || b.Error.Message == "" {
			t.Errorf("%s %s: HTTP %d %+v", c.method, c.path, code, b)
		}
	}
	var o chatAnswer
	if code := do(t, srv, "GET", "/v1/nothing", "", nil, &o); code != 404 || o.Error == nil || o.Error.Type != "invalid_request_error" {
		t.Fatalf("OpenAI path: HTTP %d %+v", code, o.Error)
	}
}

// TestEmbeddingDimensionsPerModel: each OpenAI embedding model answers its real
// dimension, "dimensions" shortens text-embedding-3 vectors as the real API does, and a
// model the mock does not know answers DefaultEmbeddingDims.
func TestEmbeddingDimensionsPerModel(t *testing.T) {
	srv := fidelityServer(t, `{"default":"ok"}`)
	for _, c := range []struct {
		body   string
		status int
		dims   int
	}{
		{`{"model":"text-embedding-3-small","input":"x"}`, 200, 1536},
		{`{"model":"text-embedding-3-large","input":"x"}`, 200, 3072},
		{`{"model":"text-embedding-ada-002","input":"x"}`, 200, 1536},
		{`{"model":"fathom-mock-embed","input":"x"}`, 200, mock.DefaultEmbeddingDims},
		{`{"model":"text-embedding-3-small","input":"x","dimensions":256}`, 200, 256},
		{`{"model":"text-embedding-3-large","input":"x","dimensions":1024}`, 200, 1024},
		{`{"model":"text-embedding-3-small","input":"x","dimensions":2000}`, 400, 0},
		{`{"model":"text-embedding-ada-002","input":"x","dimensions":256}`, 400, 0},
		{`{"model":"text-embedding-3-small","input":"x","dimensions":-1}`, 400, 0},
	} {
		var out struct {
			Data []struct {
				Embedding []float32 `json:"embedding"`
			} `json:"data"`
			Error *struct{ Message string }
		}
		code := do(t, srv, "POST", "/v1/embeddings", c.body, nil, &out)
		if code != c.status {
			t.Errorf("%s: HTTP %d, want %d (%+v)", c.body, code, c.status, out.Error)
			continue
		}
		if c.status == 200 && (len(out.Data) != 1 || len(out.Data[0].Embedding) != c.dims) {
			t.Errorf("%s: %d dimensions, want %d", c.body, len(out.Data[0].Embedding), c.dims)
		}
		if c.status != 200 && (out.Error == nil || out.Error.Message == "") {
			t.Errorf("%s: no error message", c.body)
		}
	}
	if mock.EmbeddingDims("text-embedding-3-small") != 1536 {
		t.Fatalf("EmbeddingDims(text-embedding-3-small) = %d", mock.EmbeddingDims("text-embedding-3-small"))
	}
}

// openAIError is the Chat Completions API's error body.
type openAIError struct {
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// checkOpenAIError fails unless e is invalid_request_error with param and code ("":
// null) and a message containing msg.
func checkOpenAIError(t *testing.T, what string, code int, e openAIError, status int, param, errCode, msg string) {
	t.Helper()
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	if code != status || e.Error == nil || e.Error.Type != "invalid_request_error" || str(e.Error.Param) != param ||
		str(e.Error.Code) != errCode || !strings.Contains(e.Error.Message, msg) {
		t.Errorf("%s: HTTP %d %+v, want %d param %q code %q message with %q", what, code, e.Error, status, param, errCode, msg)
	}
}

// TestChatRefusesWhatTheAPIRefuses: what the Chat Completions API answers 400 for, the
// mock does too, with the API's status, error type, param and code — max_tokens for a
// reasoning model, an unknown reasoning_effort, a tool message that answers no call of
// the assistant message before it, tool calls left unanswered — while the same requests
// done right are answered.
func TestChatRefusesWhatTheAPIRefuses(t *testing.T) {
	srv := fidelityServer(t, `{"default":"ok"}`)
	user := `{"role":"user","content":"hi"}`
	asked := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"call_2","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	answer := func(id string) string { return `{"role":"tool","tool_call_id":"` + id + `","content":"done"}` }
	for _, c := range []struct {
		what, body           string
		param, code, message string
	}{
		{"max_tokens on o4-mini", `{"model":"o4-mini","max_tokens":50,"messages":[` + user + `]}`,
			"max_tokens", "unsupported_parameter", "Use 'max_completion_tokens' instead"},
		{"max_tokens on gpt-5", `{"model":"gpt-5-mini","max_tokens":50,"messages":[` + user + `]}`,
			"max_tokens", "unsupported_parameter", "'max_tokens' is not supported with this model"},
		{"reasoning_effort extreme", `{"model":"o3","reasoning_effort":"extreme","messages":[` + user + `]}`,
			"reasoning_effort", "invalid_value", "Invalid value: 'extreme'"},
		{"tool message first", `{"model":"m","messages":[` + user + `,` + answer("call_1") + `]}`,
			"messages.[1].role", "", "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'"},
		{"tool message after text", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":"x"},` + answer("call_1") + `]}`,
			"messages.[2].role", "", "must be a response to a preceeding message with 'tool_calls'"},
		{"tool message for another call", `{"model":"m","messages":[` + user + `,` + asked + `,` + answer("call_1") + `,` + answer("call_9") + `]}`,
			"messages.[3].tool_call_id", "", "'tool_call_id' of 'call_9' not found in 'tool_calls' of previous message"},
		{"call left unanswered", `{"model":"m","messages":[` + user + `,` + asked + `,` + answer("call_2") + `,` + user + `]}`,
			"messages.[1].role", "", "The following tool_call_ids did not have response messages: call_1"},
		{"calls unanswered at the end", `{"model":"m","messages":[` + user + `,` + asked + `]}`,
			"messages.[1].role", "", "did not have response messages: call_1, call_2"},
	} {
		var e openAIError
		code := do(t, srv, "POST", "/v1/chat/completions", c.body, nil, &e)
		checkOpenAIError(t, c.what, code, e, 400, c.param, c.code, c.message)
	}
	for _, body := range []string{
		`{"model":"o4-mini","max_completion_tokens":50,"reasoning_effort":"minimal","messages":[` + user + `]}`,
		`{"model":"gpt-4o-mini","max_tokens":50,"messages":[` + user + `]}`,
		`{"model":"gpt-5-chat-latest","max_tokens":50,"messages":[` + user + `]}`,
		`{"model":"m","messages":[` + user + `,` + asked + `,` + answer("call_2") + `,` + answer("call_1") + `,` + user + `]}`,
	} {
		var got chatAnswer
		if code := do(t, srv, "POST", "/v1/chat/completions", body, nil, &got); code != 200 || len(got.Choices) != 1 {
			t.Errorf("%s: HTTP %d %+v", body, code, got.Error)
		}
	}
}

// TestRetrieveUnknownModel: GET /v1/models/{id} of a model nobody has answers the API's
// 404 (OpenAI: model_not_found; Anthropic: not_found_error), not a model.
func TestRetrieveUnknownModel(t *testing.T) {
	srv := fidelityServer(t, `{"default":"ok"}`)
	var e openAIError
	code := do(t, srv, "GET", "/v1/models/does-not-exist", "", nil, &e)
	checkOpenAIError(t, "OpenAI", code, e, 404, "", "model_not_found", "The model `does-not-exist` does not exist or you do not have access to it.")
	var a anthErrorBody
	if code := do(t, srv, "GET", "/v1/models/does-not-exist", "", map[string]string{"anthropic-version": "2023-06-01"}, &a); code != 404 || a.Type != "error" || a.Error.Type != "not_found_error" || !strings.Contains(a.Error.Message, "does-not-exist") {
		t.Fatalf("Anthropic: HTTP %d %+v", code, a)
	}
	var o struct{ ID string }
	if code := do(t, srv, "GET", "/v1/models/fathom-mock", "", nil, &o); code != 200 || o.ID != "fathom-mock" {
		t.Fatalf("the configured model: HTTP %d %+v", code, o)
	}
}

// TestMessagesTemperature: the Messages API takes a temperature within [0, 1], and none
// but 1 with thinking on; the mock answers the same 400s.
func TestMessagesTemperature(t *testing.T) {
	srv := fidelityServer(t, `{"default":"ok"}`)
	const think = `"thinking":{"type":"enabled","budget_tokens":1024},`
	for _, c := range []struct {
		fields, message string
	}{
		{think + `"temperature":0.2,`, "`temperature` may only be set to 1 when thinking is enabled"},
		{think + `"temperature":0,`, "`temperature` may only be set to 1 when thinking is enabled"},
		{`"temperature":1.5,`, "temperature: Input should be less than or equal to 1"},
		{`"temperature":-0.1,`, "temperature: Input should be greater than or equal to 0"},
	} {
		var b anthErrorBody
		code := do(t, srv, "POST", "/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":2048,`+c.fields+`"messages":[{"role":"user","content":"hi"}]}`, nil, &b)
		if code != 400 || b.Type != "error" || b.Error.Type != "invalid_request_error" || !strings.Contains(b.Error.Message, c.message) {
			t.Errorf("%s: HTTP %d %+v", c.fields, code, b)
		}
	}
	for _, fields := range []string{think + `"temperature":1,`, `"temperature":0.2,`, think} {
		var got struct{ Content []struct{ Type string } }
		if code := do(t, srv, "POST", "/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":2048,`+fields+`"messages":[{"role":"user","content":"hi"}]}`, nil, &got); code != 200 || len(got.Content) == 0 {
			t.Errorf("%s: HTTP %d %+v", fields, code, got)
		}
	}
}
