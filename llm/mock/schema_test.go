package mock_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	jsv "github.com/santhosh-tekuri/jsonschema/v6"
)

// validate fails the test unless text is JSON valid against schema (formats asserted).
func validate(t *testing.T, what, schema, text string) {
	t.Helper()
	doc, err := jsv.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("%s: schema: %v", what, err)
	}
	c := jsv.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatalf("%s: compile schema: %v", what, err)
	}
	inst, err := jsv.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Errorf("%s: answer %q is not JSON: %v", what, text, err)
		return
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("%s: answer %s is not valid against the schema: %v", what, text, err)
	}
}

// streamedContent sends body (a streaming chat request) and joins the content deltas.
func streamedContent(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct{ Content string }
			}
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		for _, c := range chunk.Choices {
			out.WriteString(c.Delta.Content)
		}
	}
	return out.String()
}

// TestUnscriptedStructuredOutputIsValidJSON: a response_format call no rule answers gets
// JSON valid against its schema (streamed too) — the smallest instance — instead of the
// script's default prose, and so does a forced tool call; json_object gets {}; a
// scripted answer and a default that is a JSON object are answered as they are.
func TestUnscriptedStructuredOutputIsValidJSON(t *testing.T) {
	srv := fidelityServer(t, `{"rules":[{"match":"^scripted$","response":"{\"steps\":[\"read\"]}"}],"default":"I have nothing scripted for that."}`)
	schemas := map[string]string{
		"plan": `{"type":"object","properties":{"steps":{"type":"array","items":{"type":"string"}}},"required":["steps"],"additionalProperties":false}`,
		"rich": `{"type":"object","additionalProperties":false,
			"required":["id","when","kind","count","score","tags","owner","maybe","flag","fixed","pair"],
			"properties":{
				"id":{"type":"string","format":"uuid"},
				"when":{"type":"string","format":"date-time"},
				"kind":{"type":"string","enum":["task","note"]},
				"count":{"type":"integer","minimum":3,"multipleOf":2},
				"score":{"type":"number","exclusiveMinimum":0.5,"maximum":1},
				"tags":{"type":"array","minItems":2,"items":{"type":"string","minLength":2}},
				"owner":{"$ref":"#/$defs/person"},
				"maybe":{"anyOf":[{"type":"null"},{"type":"string"}]},
				"flag":{"type":"boolean"},
				"fixed":{"const":"v1"},
				"pair":{"type":["array","null"],"prefixItems":[{"type":"integer"},{"type":"string","format":"email"}],"minItems":2},
				"optional":{"type":"string","minLength":5}
			},
			"$defs":{"person":{"type":"object","required":["name","child"],"properties":{"name":{"type":"string","minLength":1},"child":{"anyOf":[{"$ref":"#/$defs/person"},{"type":"null"}]}}}}}`,
	}
	t.Run("forced tool", func(t *testing.T) { checkForcedToolsAnswerTheirSchema(t, srv, schemas["rich"]) })
	for name, schema := range schemas {
		format := `"response_format":{"type":"json_schema","json_schema":{"name":"` + name + `","strict":true,"schema":` + schema + `}}`
		var got chatAnswer
		if code := do(t, srv, "POST", "/v1/chat/completions", `{"model":"gpt-4o-mini",`+format+`,"messages":[{"role":"user","content":"unscripted"}]}`, nil, &got); code != 200 || len(got.Choices) != 1 {
			t.Fatalf("%s: HTTP %d %+v", name, code, got.Error)
		}
		validate(t, name, schema, got.Choices[0].Message.Content)
		validate(t, name+" streamed", schema, streamedContent(t, srv.URL, `{"model":"gpt-4o-mini","stream":true,`+format+`,"messages":[{"role":"user","content":"unscripted"}]}`))
	}
	for _, c := range []struct{ body, want string }{
		{`{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"unscripted"}]}`, `{}`},
		{`{"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"plan","schema":` + schemas["plan"] + `}},"messages":[{"role":"user","content":"scripted"}]}`, `{"steps":["read"]}`},
		{`{"model":"m","messages":[{"role":"user","content":"unscripted"}]}`, "I have nothing scripted for that."},
	} {
		var got chatAnswer
		if code := do(t, srv, "POST", "/v1/chat/completions", c.body, nil, &got); code != 200 || len(got.Choices) != 1 || got.Choices[0].Message.Content != c.want {
			t.Errorf("%s: HTTP %d %+v, want %q", c.body, code, got, c.want)
		}
	}
	jsonDefault := fidelityServer(t, `{"default":"{\"steps\":[\"default\"]}"}`)
	var got chatAnswer
	if do(t, jsonDefault, "POST", "/v1/chat/completions", `{"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"plan","schema":`+schemas["plan"]+`}},"messages":[{"role":"user","content":"x"}]}`, nil, &got); len(got.Choices) != 1 || got.Choices[0].Message.Content != `{"steps":["default"]}` {
		t.Errorf("a JSON default: %+v", got)
	}
}

// checkForcedToolsAnswerTheirSchema: an unscripted call forced to a tool (OpenAI
// tool_choice, Anthropic tool_choice — how llm/anthropic asks for structured output)
// answers an input valid against the tool's schema, not {}.
func checkForcedToolsAnswerTheirSchema(t *testing.T, srv *httptest.Server, schema string) {
	var oa struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	body := `{"model":"m","messages":[{"role":"user","content":"unscripted"}],"tools":[{"type":"function","function":{"name":"other","parameters":{"type":"object"}}},
		{"type":"function","function":{"name":"answer","parameters":` + schema + `}}],"tool_choice":{"type":"function","function":{"name":"answer"}}}`
	if code := do(t, srv, "POST", "/v1/chat/completions", body, nil, &oa); code != 200 || len(oa.Choices) != 1 || len(oa.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("OpenAI: HTTP %d %+v", code, oa)
	}
	validate(t, "OpenAI forced tool", schema, oa.Choices[0].Message.ToolCalls[0].Function.Arguments)
	var an struct {
		Content []struct {
			Type, Name string
			Input      json.RawMessage
		}
	}
	body = `{"model":"claude-sonnet-4-6","max_tokens":1024,"messages":[{"role":"user","content":"unscripted"}],"tools":[{"name":"answer","input_schema":` + schema + `},
		{"name":"other","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}}`
	if code := do(t, srv, "POST", "/v1/messages", body, nil, &an); code != 200 || len(an.Content) != 1 || an.Content[0].Name != "answer" {
		t.Fatalf("Anthropic: HTTP %d %+v", code, an)
	}
	validate(t, "Anthropic forced tool", schema, string(an.Content[0].Input))
}
