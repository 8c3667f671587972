package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm"
)

// decodeCases are answers of the usual shape and unusual ones, valid and not.
var decodeCases = []string{
	codecAnswer,
	`{"id":"chatcmpl-1","object":"chat.completion","created":1764000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"The summary.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":1234,"completion_tokens":20,"total_tokens":1254,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":7,"accepted_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_1"}`,
	`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c9","type":"function","function":{"name":"write_todos","arguments":"{\"todos\":[]}"}},{"id":"c10","type":"function","function":{"name":"ls","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
	` { "model" : "m" , "choices" : [ ] , "usage" : null } `,
	`{"choices":[{"message":{"content":"a"},"finish_reason":null}],"x":[1,-2.5e+3,true,false,null,{"y":"\u00e9\n"}]}`,
	`{"model":"caf\u00e9 \ud83d\ude00 é","choices":[{"message":{"content":"bad ` + "\xff" + ` utf8","tool_calls":[]}}]}`,
	`null`,
	`{"Model":"case differs","choices":[{"message":{"content":"a"}}]}`,
	`{"usage":{"prompt_tokens":1.0}}`,
	`{"usage":{"prompt_tokens":"7"}}`,
	`{"choices":{}}`,
	`{"model":"x"`,
	`{"x":01}`,
	`{"x":"\q"}`,
	"{\"x\":\"ctrl\x01\"}",
	`{"x":[1,]}`,
	``,
}

// TestDecodeChatAgreesWithEncodingJSON: the SDK's decoding of an answer, as the client
// converts it, says what encoding/json says of the fields Fathom reads.
func TestDecodeChatAgreesWithEncodingJSON(t *testing.T) {
	for _, doc := range decodeCases {
		checkDecode(t, []byte(doc))
	}
}

// FuzzDecodeChat: whatever encoding/json reads as a chat completion, the SDK path reads
// alike; whatever is not JSON, the SDK path refuses as malformed.
func FuzzDecodeChat(f *testing.F) {
	for _, doc := range decodeCases {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDecode(t, data) })
}

// refChat is the part of a chat.completion Fathom reads, for encoding/json.
type refChat struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		TotalTokens         int64 `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
}

func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	c := &Client{}
	// As the client decodes an answer (the SDK's decoder).
	sdk, sdkErr := decodeChat(data)
	var ref refChat
	refErr := json.Unmarshal(data, &ref)
	if !json.Valid(data) {
		if !errors.Is(sdkErr, llm.ErrMalformedResponse) {
			t.Fatalf("SDK path read %q, which is not JSON, as %+v, %v", data, sdk, sdkErr)
		}
		return
	}
	if refErr != nil || foldedKey(data) {
		// JSON of another shape: the SDK may read it leniently. encoding/json matches
		// keys case-insensitively, the SDK (and the APIs) exactly.
		return
	}
	if sdkErr != nil {
		t.Fatalf("SDK refused %q, which encoding/json reads: %v", data, sdkErr)
	}
	got, gotErr := c.response(&sdk)
	if len(ref.Choices) == 0 {
		if gotErr == nil {
			t.Fatalf("SDK path read %q (no choices) as %+v", data, got)
		}
		return
	}
	ch := ref.Choices[0]
	want := llm.Response{FinishReason: ch.FinishReason, Model: ref.Model, Usage: llm.Usage{
		InputTokens: ref.Usage.PromptTokens, OutputTokens: ref.Usage.CompletionTokens, TotalTokens: ref.Usage.TotalTokens,
		CachedInputTokens: ref.Usage.PromptTokensDetails.CachedTokens, ReasoningTokens: ref.Usage.CompletionTokensDetails.ReasoningTokens}}
	if ch.Message.Content != nil {
		want.Content = *ch.Message.Content
	}
	// encoding/json replaces invalid UTF-8 with U+FFFD; the SDK keeps the bytes.
	valid := func(s string) string { return strings.Map(func(r rune) rune { return r }, s) } // each bad byte: U+FFFD
	got.Content, got.Model = valid(got.Content), valid(got.Model)
	for _, tc := range ch.Message.ToolCalls {
		want.ToolCalls = append(want.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if gotErr != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("SDK path read %q as %+v, %v; encoding/json as %+v", data, got, gotErr, want)
	}
}

// knownKeys are the keys refChat reads.
var knownKeys = []string{"model", "choices", "message", "content", "tool_calls", "id", "function", "name", "arguments",
	"finish_reason", "usage", "prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
	"cached_tokens", "completion_tokens_details", "reasoning_tokens"}

// foldedKey reports an object key (anywhere in data) that differs from a known key in
// case only.
func foldedKey(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []bool // per open container: is it an object, and is the next string a key
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, true)
				expectKey = true
				continue
			case '[':
				stack = append(stack, false)
				expectKey = false
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if expectKey {
				for _, k := range knownKeys {
					if v != k && strings.EqualFold(v, k) {
						return true
					}
				}
				expectKey = false
				continue
			}
		}
		// A value ended: in an object the next token is a key.
		expectKey = len(stack) > 0 && stack[len(stack)-1]
	}
}
