package mock_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/tools"
)

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// TestToolCallConversation runs the LLM↔tool exchange over real HTTP: the model sends
// invalid arguments, reads the validation ToolError, corrects itself, and answers with
// the tool's result.
func TestToolCallConversation(t *testing.T) {
	script, err := mock.ParseScript([]byte(`{"rules":[
		{"match":"write","times":1,"tool_calls":[{"name":"write_file","arguments":"{\"path\": null, \"content\": 123}"}]},
		{"tool_match":"Error type: validation","tool_calls":[{"name":"write_file","arguments":"{\"path\":\"a.txt\",\"content\":\"hi\"}"}]},
		{"tool_match":"bytes","response":"wrote it: {{.Tool}}"}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	defer srv.Close()
	c := client(t, srv, "")
	writeFile := tools.MustNew("write_file", "Write a file", tools.SandboxNone, func(_ context.Context, a writeArgs) (any, error) {
		return map[string]int{"bytes": len(a.Content)}, nil
	})
	reg, err := tools.NewRegistry(writeFile)
	if err != nil {
		t.Fatal(err)
	}
	ex := &tools.Executor{Registry: reg}
	req := llm.Request{
		Messages: []llm.Message{{Role: "user", Content: "write a file"}},
		Tools:    []llm.ToolSpec{{Name: writeFile.Name(), Description: writeFile.Description(), Parameters: writeFile.Schema()}},
	}
	var transcript []string
	for turn := 0; turn < 5; turn++ {
		resp, err := c.Chat(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ToolCalls) == 0 {
			if resp.Content != `wrote it: {"bytes":2}` || resp.FinishReason != "stop" {
				t.Fatalf("final answer %q (%s)", resp.Content, resp.FinishReason)
			}
			if strings.Join(transcript, ",") != "validation,ok" {
				t.Fatalf("tool outcomes %v, want validation then ok", transcript)
			}
			return
		}
		if resp.FinishReason != "tool_calls" {
			t.Fatalf("finish reason %q with tool calls", resp.FinishReason)
		}
		req.Messages = append(req.Messages, llm.Message{Role: "assistant", ToolCalls: resp.ToolCalls})
		for _, call := range resp.ToolCalls {
			res := ex.Run(context.Background(), tools.Call{ID: call.ID, Name: call.Name, Args: json.RawMessage(call.Arguments)})
			if res.Err != nil {
				transcript = append(transcript, string(res.Err.Type))
			} else {
				transcript = append(transcript, "ok")
			}
			req.Messages = append(req.Messages, llm.Message{Role: "tool", ToolCallID: call.ID, Content: res.Content()})
		}
	}
	t.Fatalf("no final answer after 5 turns: %v", transcript)
}
