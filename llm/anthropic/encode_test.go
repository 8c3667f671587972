package anthropic

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/fathom-agents/fathom/llm"
)

// TestEncodeBodyMatchesSDK: the hand-written request body says what the SDK's encoding
// of the same params says (compared as JSON values), for every kind of block Fathom
// sends, with cache breakpoints, thinking, tools and a block only the SDK encodes.
func TestEncodeBodyMatchesSDK(t *testing.T) {
	c, err := New(Config{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{Model: "claude-x", MaxTokens: 900, ThinkingBudget: 2000, PromptCache: true, Messages: []llm.Message{
		{Role: "system", Content: "be \"good\"\n<ok> & \u2028"},
		{Role: "user", Content: "Step: find\tit \xff"},
		{Role: "assistant", Content: "let me look", Thinking: []llm.ThinkingBlock{{Thinking: "hm", Signature: "sig"}, {RedactedData: "enc"}},
			ToolCalls: []llm.ToolCall{{ID: "t1", Name: "web_search", Arguments: `{"q": "a",  "n": [1, 2]}`}, {ID: "t2", Name: "web_search", Arguments: "oops"}}},
		{Role: "tool", ToolCallID: "t1", Content: "found"},
		{Role: "tool", ToolCallID: "t2", Content: ""},
		{Role: "system", Content: "Current step: find it"},
	}, Tools: []llm.ToolSpec{{Name: "web_search", Description: "search", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	p, err := c.params(req)
	if err != nil {
		t.Fatal(err)
	}
	// A block kind the hand-written encoder leaves to the SDK.
	p.Messages[0].Content = append(p.Messages[0].Content, anthropic.NewImageBlockBase64("image/png", "AAAA"))
	got, err := encodeBody(p)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("hand-written body is not JSON: %v\n%s", err, got)
	}
	_ = json.Unmarshal(want, &w)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("hand-written body\n%s\nSDK's\n%s", got, want)
	}
}
