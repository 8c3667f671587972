// Package llmtest holds fixtures for the tests and benchmarks of the model clients
// (llm/openai, llm/anthropic): requests shaped like the ones a session sends.
package llmtest

import (
	"encoding/json"
	"strings"

	"github.com/fathom-agents/fathom/llm"
)

// StepRequest is a typical step of a session for model: a system prompt, a history of
// four tool round trips, the step's task prompt and three tools (max 500 tokens).
func StepRequest(model string) llm.Request {
	schema := json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}},"required":["query"]}`)
	msgs := []llm.Message{{Role: "system", Content: strings.Repeat("You are a careful research agent. ", 40)}}
	for i := range 4 {
		id := "call_" + string(rune('a'+i))
		msgs = append(msgs,
			llm.Message{Role: "user", Content: "Step: look into part " + string(rune('a'+i)) + " of the question and report"},
			llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: id, Name: "web_search", Arguments: `{"query":"actors"}`}}},
			llm.Message{Role: "tool", ToolCallID: id, Content: strings.Repeat("result line ", 30)},
			llm.Message{Role: "assistant", Content: "Part done: " + strings.Repeat("finding ", 20)})
	}
	msgs = append(msgs, llm.Message{Role: "user", Content: "Step: write the summary"})
	return llm.Request{Model: model, Messages: msgs, MaxTokens: 500, Tools: []llm.ToolSpec{
		{Name: "web_search", Description: "search the web", Parameters: schema},
		{Name: "read_file", Description: "read a file", Parameters: schema},
		{Name: "write_todos", Description: "plan", Parameters: schema},
	}}
}
