package openai

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/llmtest"
)

// codecRequest is a typical step of a session: a system prompt, a history with tool
// round trips, three tools and the step's task prompt.
func codecRequest() llm.Request { return llmtest.StepRequest("gpt-4o-mini") }

// codecAnswer is a typical chat.completion: text, one tool call, usage with details.
const codecAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1764000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"The summary: actors isolate state, messages carry work, supervisors restart what fails.","refusal":null,"annotations":[],"tool_calls":[{"id":"c9","type":"function","function":{"name":"write_todos","arguments":"{\"todos\":[]}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],` +
	`"usage":{"prompt_tokens":1234,"completion_tokens":20,"total_tokens":1254,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":7,"accepted_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_1"}`

// BenchmarkCodec is the client's own codec cost per call, without HTTP: encoding one
// typical request body and decoding one typical answer into an llm.Response.
//
//	go test -run '^$' -bench Codec -benchmem ./llm/openai/
func BenchmarkCodec(b *testing.B) {
	c, err := New(Config{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		b.Fatal(err)
	}
	req := codecRequest()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := codecRoundTrip(c, req, []byte(codecAnswer)); err != nil {
			b.Fatal(err)
		}
	}
}

// codecRoundTrip encodes req and decodes answer as one call would: the request body
// (the SDK's encoding of the params) and the SDK's decoding of the answer
// (decodeChat).
func codecRoundTrip(c *Client, req llm.Request, answer []byte) (llm.Response, error) {
	if _, err := c.body(req, req.Model); err != nil {
		return llm.Response{}, err
	}
	out, err := decodeChat(answer)
	if err != nil {
		return llm.Response{}, err
	}
	return c.response(&out)
}

// BenchmarkCodecSession is the encoding cost per call of sessions as the engine runs
// them: 32 sessions at once, taking turns, 21 calls each, each call sending the whole
// history so far (two messages more per call: a tool call and its result), a system
// prompt rebuilt for every call and a task prompt that changes from call to call;
// every session's text is its own, and a session that is done is followed by a new
// one. So the memo both hits (the history) and misses (each new message, and each
// message sent a second time, when the memo admits on the second sighting alone).
//
//	go test -run '^$' -bench CodecSession -benchmem ./llm/openai/
func BenchmarkCodecSession(b *testing.B) {
	c, err := New(Config{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		b.Fatal(err)
	}
	tools := codecRequest().Tools
	tmpl := strings.Repeat("You are a careful research agent. ", 40)
	type session struct {
		id, call int
		goal     string
		hist     []llm.Message
	}
	sessions := make([]session, 32)
	next := 0
	for i := range sessions {
		sessions[i].call = 21
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s := &sessions[i%len(sessions)]
		if s.call == 21 {
			next++
			*s = session{id: next, goal: fmt.Sprintf("Goal: session %d: find out how actors isolate state\n", next)}
		}
		if s.call > 0 {
			id := fmt.Sprintf("call_%d_%d", s.id, s.call)
			s.hist = append(s.hist,
				llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: id, Name: "web_search", Arguments: `{"query":"actors ` + id + `"}`}}},
				llm.Message{Role: "tool", ToolCallID: id, Content: id + strings.Repeat(" result line", 30)})
		}
		msgs := make([]llm.Message, 0, len(s.hist)+2)
		msgs = append(msgs, llm.Message{Role: "system", Content: tmpl + s.goal})
		msgs = append(msgs, s.hist...)
		msgs = append(msgs, llm.Message{Role: "system", Content: fmt.Sprintf("Current step: %d of session %d", s.call, s.id)})
		s.call++
		if _, err := c.body(llm.Request{Model: "gpt-4o-mini", Messages: msgs, MaxTokens: 500, Tools: tools}, "gpt-4o-mini"); err != nil {
			b.Fatal(err)
		}
	}
}
