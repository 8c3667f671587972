package openai

import (
	"encoding/json"
	"reflect"
	"testing"
)

// decodeCases are answers of the usual shape (the scanner must read them) and of
// unusual ones (left to encoding/json, or refused by both).
var decodeCases = []struct {
	doc     string
	scanned bool
}{
	{`{"id":"chatcmpl-1","object":"chat.completion","created":1764000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"The summary.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":1234,"completion_tokens":20,"total_tokens":1254,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":7,"accepted_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_1"}`, true},
	{`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c9","type":"function","function":{"name":"write_todos","arguments":"{\"todos\":[]}"}},{"id":"c10","type":"function","function":{"name":"ls","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`, true},
	{` { "model" : "m" , "choices" : [ ] , "usage" : null } `, true},
	{`{"choices":[null,{"message":null,"finish_reason":null}],"x":[1,-2.5e+3,true,false,null,{"y":"\u00e9\n"}]}`, true},
	{`{"model":"caf\u00e9 \ud83d\ude00 é","choices":[{"message":{"content":"bad ` + "\xff" + ` utf8","tool_calls":[]}}]}`, true},
	{`null`, true},
	{`{"Model":"case differs"}`, false},
	{`{"model":"a","model":"twice"}`, false},
	{`{"choices":[{"message":{"content":"a"}}],"choices":[{"finish_reason":"stop"}]}`, false},
	{`{"usage":{"prompt_tokens":1.0}}`, false},
	{`{"usage":{"prompt_tokens":1e3}}`, false},
	{`{"usage":{"prompt_tokens":99999999999999999999}}`, false},
	{`{"usage":{"prompt_tokens":"7"}}`, false},
	{`{"choices":{}}`, false},
	{`{"model":"x"`, false},
	{`{"model":"x"} trailing`, false},
	{`{"x":01}`, false},
	{`{"x":"\q"}`, false},
	{"{\"x\":\"ctrl\x01\"}", false},
	{`{"x":[1,]}`, false},
	{`{"\u006dodel":"escaped key"}`, false},
	{``, false},
}

// TestDecodeChatAgreesWithEncodingJSON: the scanner reads the usual answers, and
// decodeChat returns what encoding/json returns, errors included.
func TestDecodeChatAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range decodeCases {
		var out chatResponse
		if got := scanChat([]byte(c.doc), &out); got != c.scanned {
			t.Errorf("scanChat(%s) = %v, want %v", c.doc, got, c.scanned)
		}
		checkDecode(t, []byte(c.doc))
	}
}

// FuzzDecodeChat: whatever the scanner accepts, encoding/json accepts and decodes alike.
func FuzzDecodeChat(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c.doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDecode(t, data) })
}

func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	var want chatResponse
	wantErr := json.Unmarshal(data, &want)
	var scanned chatResponse
	if scanChat(data, &scanned) {
		if wantErr != nil {
			t.Fatalf("scanner read %q, which encoding/json refuses: %v", data, wantErr)
		}
		if !reflect.DeepEqual(scanned, want) {
			t.Fatalf("scanner read %q as %+v, encoding/json as %+v", data, scanned, want)
		}
	}
	got, err := decodeChat(data)
	if (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(got, want)) {
		t.Fatalf("decodeChat(%q) = %+v, %v; encoding/json: %+v, %v", data, got, err, want, wantErr)
	}
}
