package anthropic

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/llmtest"
)

// codecRequest is a typical step of a session: a system prompt, a history with tool
// round trips, three tools and the step's task prompt, with cache breakpoints.
func codecRequest() llm.Request {
	r := llmtest.StepRequest("claude-sonnet-4-5")
	r.PromptCache = true
	return r
}

// codecAnswer is a typical Messages API answer: text, one tool call, usage with cache.
const codecAnswer = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"The summary: actors isolate state, messages carry work, supervisors restart what fails."},{"type":"tool_use","id":"toolu_1","name":"write_todos","input":{"todos":[]}}],` +
	`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":210,"cache_creation_input_tokens":0,"cache_read_input_tokens":1024,"output_tokens":20,"service_tier":"standard"}}`

// BenchmarkCodec is the client's own codec cost per call, without HTTP: building and
// encoding one typical request body and decoding one typical answer.
//
//	go test -run '^$' -bench Codec -benchmem ./llm/anthropic/
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

// codecRoundTrip encodes req and decodes answer as one call would: the SDK's encoding
// of the params and its decoding of the answer (requestconfig: a json.Decoder).
func codecRoundTrip(c *Client, req llm.Request, answer []byte) (llm.Response, error) {
	p, err := c.params(req)
	if err != nil {
		return llm.Response{}, err
	}
	if _, err := json.Marshal(p); err != nil {
		return llm.Response{}, err
	}
	var out anthropic.Message
	if err := json.NewDecoder(bytes.NewReader(answer)).Decode(&out); err != nil {
		return llm.Response{}, err
	}
	return response(&out), nil
}
