package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/fathom-agents/fathom/llm"
)

// memoRequest is codecRequest with the parts an encoding can get wrong: several tool
// calls in one turn, text and calls in one turn, HTML characters, non-ASCII and
// invalid UTF-8, an empty tool result.
func memoRequest() llm.Request {
	req := codecRequest()
	req.Messages = append(req.Messages,
		llm.Message{Role: "assistant", Content: "two at once <b>&</b>", ToolCalls: []llm.ToolCall{
			{ID: "c1", Name: "read_file", Arguments: `{"path":"a<b>.txt"}`}, {ID: "c2", Name: "ls", Arguments: `{}`}}},
		llm.Message{Role: "tool", ToolCallID: "c1", Content: "caf\u00e9 \U0001F600 \xff"},
		llm.Message{Role: "tool", ToolCallID: "c2", Content: ""},
		llm.Message{Role: "assistant", Content: ""},
		llm.Message{Role: "user", Content: "line\nbreak \"quoted\" \u2028"})
	req.Tools = append(req.Tools, llm.ToolSpec{Name: "ls"}, llm.ToolSpec{Name: "grep", Description: "<search>",
		Parameters: json.RawMessage(` { "type" : "object", "properties" : { "z" : {}, "a" : {"type":"string"} } } `)})
	return req
}

// sdkBody is the request body as the SDK encodes params built without the memos (for
// a streamed request, the body its NewStreaming sends).
func sdkBody(t *testing.T, c *Client, req llm.Request) string {
	t.Helper()
	p := sdkParams(t, c, req)
	if req.OnDelta != nil {
		return sdkStreamedBody(t, p)
	}
	b, err := p.MarshalJSON() // the body the SDK sends (requestconfig calls MarshalJSON)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sdkStreamedBody is the body the SDK's NewStreaming sends for p.
func sdkStreamedBody(t *testing.T, p openai.ChatCompletionNewParams) string {
	t.Helper()
	var body []byte
	capture := roundTrip(func(r *http.Request) (*http.Response, error) {
		b, err := io.ReadAll(r.Body)
		body = b
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: io.NopCloser(strings.NewReader("data: [DONE]\n\n")), Request: r}, err
	})
	sdk := openai.NewClient(option.WithBaseURL("http://127.0.0.1:1/"), option.WithAPIKey("k"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: capture}))
	s := sdk.Chat.Completions.NewStreaming(context.Background(), p)
	for s.Next() {
	}
	if err := s.Err(); err != nil || body == nil {
		t.Fatalf("SDK streamed call: %v", err)
	}
	return string(body)
}

// roundTrip is an http.RoundTripper of a function.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// sdkParams is req in the SDK's params, built without the memos.
func sdkParams(t *testing.T, c *Client, req llm.Request) openai.ChatCompletionNewParams {
	t.Helper()
	p, err := c.params(req, req.Model)
	if err != nil {
		t.Fatal(err)
	}
	p.Messages = p.Messages[:0]
	for i := range req.Messages {
		p.Messages = append(p.Messages, messageParam(&req.Messages[i]))
	}
	p.Tools = p.Tools[:0]
	for i := range req.Tools {
		tp, err := toolParam(&req.Tools[i])
		if err != nil {
			t.Fatal(err)
		}
		p.Tools = append(p.Tools, tp)
	}
	return p
}

// TestStreamedBodyIsTheSDKs: the body of a streamed call is, byte for byte, the one the
// SDK's own NewStreaming sends for the same params, on the first call and on later
// ones, with every option and without tools.
func TestStreamedBodyIsTheSDKs(t *testing.T) {
	bodies := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		bodies <- b
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	c, err := New(Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	sdk := openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("k"), option.WithMaxRetries(0))
	temp, parallel := 0.25, false
	full := memoRequest()
	full.MaxTokens, full.Temperature, full.ParallelToolCalls = 300, &temp, &parallel
	full.ToolChoice, full.ReasoningEffort = "read_file", "low"
	full.ResponseFormat = &llm.JSONSchema{Name: "answer", Description: "the <answer>", Strict: true,
		Schema: json.RawMessage(`{"type":"object","properties":{"stream":{"type":"boolean"}}}`)}
	noTools := full
	noTools.Tools = nil
	for i, req := range []llm.Request{codecRequest(), full, noTools} {
		req.OnDelta = func(string) {}
		s := sdk.Chat.Completions.NewStreaming(context.Background(), sdkParams(t, c, req))
		for s.Next() {
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		want := <-bodies
		for call := range 2 {
			if _, err := c.Chat(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if got := <-bodies; string(got) != string(want) {
				t.Fatalf("request %d, call %d: streamed body\n%s\nwant the SDK's\n%s", i, call, got, want)
			}
		}
	}
}

// TestMemoizedBodyIsTheSDKs: a request body built from the memos' encodings, on the
// first call (encoded now) and on later ones (kept), is byte for byte the SDK's
// encoding of the same params.
func TestMemoizedBodyIsTheSDKs(t *testing.T) {
	c, err := New(Config{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	req := memoRequest()
	bodiesAreTheSDKs(t, c, req)
	// A message that differs from a kept one in any field is encoded anew.
	for i, m := range []llm.Message{
		{Role: "user", Content: "Step: write the summary!"},
		{Role: "system", Content: "Step: write the summary"},
		{Role: "tool", ToolCallID: "c3", Content: ""},
		{Role: "assistant", Content: "two at once <b>&</b>", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path":"a<b>.txt"}`}}},
		{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path":"b.txt"}`}}},
	} {
		r := req
		r.Messages = append(append([]llm.Message(nil), req.Messages...), m)
		r.Tools = append(append([]llm.ToolSpec(nil), req.Tools...), llm.ToolSpec{Name: fmt.Sprintf("t%d", i), Description: strings.Repeat("d", i)})
		got, err := c.bodyBytes(r, r.Model)
		if err != nil {
			t.Fatal(err)
		}
		if want := sdkBody(t, c, r); string(got) != want {
			t.Fatalf("variant %d: body\n%s\nwant the SDK's\n%s", i, got, want)
		}
	}
}

// FuzzBodyIsTheSDKs: for any text in the messages (content, tool call ids, names and
// arguments) and any tool schema, the body the client builds from the memos'
// encodings, on the first call and on later ones, is byte for byte the SDK's encoding
// of the same params.
func FuzzBodyIsTheSDKs(f *testing.F) {
	f.Add("plain", `{"q":"a"}`, []byte(`{"type":"object"}`))
	f.Add("<b>&</b> \u2028 \u2029 caf\u00e9 \xff\xfe", "{ \"q\" : [ 1 , 2 ] }", []byte(` { "z" : {}, "a" : [ 1e2, -0.5, "\u00e9<>" ] } `))
	f.Add("", "", []byte(`null`))
	f.Add("line\nbreak\t\"quoted\" \\ \x00\x1f", "not json <x>", []byte(`{"properties":{"messages":[0],"tools":[0]}}`))
	f.Fuzz(func(t *testing.T, text, args string, schema []byte) {
		c, err := New(Config{BaseURL: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		req := llm.Request{Model: text, MaxTokens: len(text), Messages: []llm.Message{
			{Role: "system", Content: text},
			{Role: "user", Content: text + args},
			{Role: "assistant", Content: text, ToolCalls: []llm.ToolCall{{ID: text, Name: args, Arguments: args}}},
			{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: args, Name: text, Arguments: text}}},
			{Role: "tool", ToolCallID: args, Content: text},
		}, Tools: []llm.ToolSpec{{Name: text, Description: args, Parameters: schema}, {Name: args}}}
		if _, err := toolParam(&req.Tools[0]); err != nil {
			req.Tools[0].Parameters = nil // not JSON: refused (TestMemoizedToolsStillValidated)
		}
		bodiesAreTheSDKs(t, c, req)
	})
}

// TestBodyWithEveryOptionIsTheSDKs: a body with every request option the client maps
// (a response format whose schema has "messages" and "tools" keys of its own, tool
// choice, streaming's usage option), with tools and without, is byte for byte the
// SDK's encoding of the same params.
func TestBodyWithEveryOptionIsTheSDKs(t *testing.T) {
	c, err := New(Config{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	temp, parallel := 0.25, false
	full := memoRequest()
	full.MaxTokens, full.Temperature, full.ParallelToolCalls = 300, &temp, &parallel
	full.ToolChoice, full.ReasoningEffort, full.OnDelta = "read_file", "low", func(string) {}
	full.ResponseFormat = &llm.JSONSchema{Name: "answer", Description: "the <answer>", Strict: true,
		Schema: json.RawMessage(`{"type":"object","properties":{"messages":[0],"tools":[0]},"tools":[0]}`)}
	bare := llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}, ToolChoice: "none"}
	noTools := full
	noTools.Tools = nil
	for i, req := range []llm.Request{full, bare, noTools} {
		for call := range 2 {
			got, err := c.bodyBytes(req, req.Model)
			if err != nil {
				t.Fatal(err)
			}
			if want := sdkBody(t, c, req); string(got) != want {
				t.Fatalf("request %d, call %d: body\n%s\nwant the SDK's\n%s", i, call, got, want)
			}
		}
	}
}

// TestKeptHeadsFollowEveryOption: requests that differ from one another in one option
// each, asked in turn of one client again and again (its heads then come from its
// cache), each get the SDK's encoding of their own params, byte for byte; an option
// the SDK refuses is refused on every call.
func TestKeptHeadsFollowEveryOption(t *testing.T) {
	zero, negZero, half := 0.0, math.Copysign(0, -1), 0.5
	yes, no := true, false
	format := func(f llm.JSONSchema) *llm.JSONSchema { return &f }
	base := memoRequest()
	variants := []func(r *llm.Request){
		func(r *llm.Request) {},
		func(r *llm.Request) { r.Model = "gpt-4o" },
		func(r *llm.Request) { r.MaxTokens = 0 },
		func(r *llm.Request) { r.MaxTokens = 501 },
		func(r *llm.Request) { r.Temperature = &zero },
		func(r *llm.Request) { r.Temperature = &negZero },
		func(r *llm.Request) { r.Temperature = &half },
		func(r *llm.Request) { r.OnDelta = func(string) {} },
		func(r *llm.Request) { r.ToolChoice = "auto" },
		func(r *llm.Request) { r.ToolChoice = "required" },
		func(r *llm.Request) { r.ToolChoice = "read_file" },
		func(r *llm.Request) { r.ParallelToolCalls = &yes },
		func(r *llm.Request) { r.ParallelToolCalls = &no },
		func(r *llm.Request) { r.ParallelToolCalls, r.Tools = &no, nil },
		func(r *llm.Request) { r.Tools = nil },
		func(r *llm.Request) { r.ReasoningEffort = "high" },
		func(r *llm.Request) {
			r.ResponseFormat = format(llm.JSONSchema{Name: "a", Schema: json.RawMessage(`{"type":"object"}`)})
		},
		func(r *llm.Request) {
			r.ResponseFormat = format(llm.JSONSchema{Name: "b", Schema: json.RawMessage(`{"type":"object"}`)})
		},
		func(r *llm.Request) {
			r.ResponseFormat = format(llm.JSONSchema{Name: "a", Description: "d", Schema: json.RawMessage(`{"type":"object"}`)})
		},
		func(r *llm.Request) {
			r.ResponseFormat = format(llm.JSONSchema{Name: "a", Strict: true, Schema: json.RawMessage(`{"type":"object"}`)})
		},
		func(r *llm.Request) {
			r.ResponseFormat = format(llm.JSONSchema{Name: "a", Schema: json.RawMessage(`{"type":"array"}`)})
		},
		func(r *llm.Request) { r.ResponseFormat = format(llm.JSONSchema{Name: "a"}) },
		// An empty schema is not a nil one: the SDK writes nothing for it (not JSON).
		func(r *llm.Request) { r.ResponseFormat = format(llm.JSONSchema{Name: "a", Schema: json.RawMessage{}}) },
	}
	refused := []func(r *llm.Request){
		func(r *llm.Request) { nan := math.NaN(); r.Temperature = &nan },
		func(r *llm.Request) { inf := math.Inf(-1); r.Temperature = &inf },
	}
	for _, legacy := range []bool{false, true} {
		c, err := New(Config{BaseURL: "http://127.0.0.1:1", LegacyMaxTokens: legacy})
		if err != nil {
			t.Fatal(err)
		}
		for round := range 3 {
			for i, v := range variants {
				req := base
				v(&req)
				got, err := c.bodyBytes(req, req.Model)
				if err != nil {
					t.Fatal(err)
				}
				if want := sdkBody(t, c, req); string(got) != want {
					t.Fatalf("legacy %v, round %d, variant %d: body\n%s\nwant the SDK's\n%s", legacy, round, i, got, want)
				}
			}
			for i, v := range refused {
				req := base
				v(&req)
				if _, err := c.body(req, req.Model); err == nil {
					t.Fatalf("legacy %v, round %d: refused variant %d encoded", legacy, round, i)
				}
			}
		}
	}
}

// TestMemoizedToolsStillValidated: a tool whose parameters are not JSON is refused on
// every call, not only the first.
func TestMemoizedToolsStillValidated(t *testing.T) {
	c, err := New(Config{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{Messages: []llm.Message{{Role: "user", Content: "hi"}}, Tools: []llm.ToolSpec{{Name: "bad", Parameters: json.RawMessage(`{`)}}}
	for range 2 {
		if _, err := c.body(req, "m"); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
			t.Fatalf("err %v", err)
		}
	}
}

// TestRepeatedRequestEncodesCheaply: encoding a request whose messages and tools the
// client sent before costs a few allocations per message, not the SDK's reflective
// encoding of each message and tool schema again (~700 allocations for codecRequest).
func TestRepeatedRequestEncodesCheaply(t *testing.T) {
	c, err := New(Config{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	req := codecRequest()
	encode := func() {
		if _, err := c.body(req, req.Model); err != nil {
			t.Fatal(err)
		}
	}
	encode()
	allocs := testing.AllocsPerRun(20, encode)
	t.Logf("%.0f allocations for %d messages and %d tools", allocs, len(req.Messages), len(req.Tools))
	limit := 4.0 * float64(len(req.Messages)+len(req.Tools))
	if raceDetector {
		limit *= 2 // sync.Pool drops pooled buffers under -race; still far below the ~700 of no memo
	}
	if allocs > limit {
		t.Fatalf("%.0f allocations to encode a request sent before, want ≤ %.0f", allocs, limit)
	}
}

// TestOneShotMessagesAreNotKept: the message memo keeps a message's encoding only once
// the message was sent a second time. A session's planning prompt (its goal makes it
// unique, and it is sent once) is not kept for the memo's life, and the room goes to
// the history the session's calls send again and again. A message sent once is held
// with its encoding for a while (up to two generations of msgHeldBytes), so that
// sending it again soon after (a session's newest messages, with its next call) does
// not encode it again.
func TestOneShotMessagesAreNotKept(t *testing.T) {
	c, err := New(Config{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	plan := llm.Request{Model: "m", Messages: []llm.Message{
		{Role: "system", Content: "You are the orchestrator. Goal: " + strings.Repeat("g", 4096)},
		{Role: "user", Content: "Goal: " + strings.Repeat("g", 4096)},
	}}
	want := sdkBody(t, c, plan)
	body := func(req llm.Request, want string) {
		t.Helper()
		got, err := c.bodyBytes(req, req.Model)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("body\n%s\nwant the SDK's\n%s", got, want)
		}
	}
	body(plan, want)
	if n := c.msgMemo.Len(); n != 0 {
		t.Fatalf("after one call the memo keeps %d messages, want none", n)
	}
	if n, _ := c.msgMemo.Held(); n != len(plan.Messages) {
		t.Fatalf("after one call the memo holds %d messages, want the %d sent", n, len(plan.Messages))
	}
	body(plan, want)
	if n := c.msgMemo.Len(); n != len(plan.Messages) {
		t.Fatalf("after the messages were sent again the memo keeps %d of them, want %d", n, len(plan.Messages))
	}
	body(plan, want)
	// Other sessions' one-shot messages, 3 MiB of them: none is kept, and what is held
	// stays bounded.
	for i := range 3 * msgHeldBytes / 4096 {
		once := llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: fmt.Sprintf("%d %s", i, strings.Repeat("o", 4096))}}}
		if _, err := c.body(once, once.Model); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.msgMemo.Len(); n != len(plan.Messages) {
		t.Fatalf("after one-shot messages the memo keeps %d messages, want the %d sent twice", n, len(plan.Messages))
	}
	if n, bytes := c.msgMemo.Held(); bytes > 2*msgHeldBytes {
		t.Fatalf("the memo holds %d messages of %d bytes, want at most %d bytes", n, bytes, 2*msgHeldBytes)
	}
}

// bodiesAreTheSDKs checks that c builds req's body as the SDK encodes its params, byte
// for byte, on the first call (memo misses) and on two later ones (memo hits).
func bodiesAreTheSDKs(t *testing.T, c *Client, req llm.Request) {
	t.Helper()
	want := sdkBody(t, c, req)
	for call := range 3 {
		got, err := c.bodyBytes(req, req.Model)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("call %d: body\n%s\nwant the SDK's\n%s", call, got, want)
		}
	}
}

// bodyBytes is c.body's body in one buffer.
func (c *Client) bodyBytes(req llm.Request, model string) ([]byte, error) {
	b, err := c.body(req, model)
	if err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
