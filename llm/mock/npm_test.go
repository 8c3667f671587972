package mock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// fidelityJS drives mock-llm with the official openai npm client: models, a plain
// completion, a tool-call completion, a streamed completion (for await over chunks) and
// embeddings. It prints one JSON object with what the client saw.
const fidelityJS = `
const OpenAI = require("openai");
(async () => {
  const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: "test-key", maxRetries: 0 });
  const out = {};
  out.models = (await client.models.list()).data.map(m => m.id);
  const plain = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "say hello" }] });
  out.plain = { content: plain.choices[0].message.content, finish: plain.choices[0].finish_reason, total: plain.usage.total_tokens };
  const tool = await client.chat.completions.create({
    model: "m", messages: [{ role: "user", content: "use a tool" }],
    tools: [{ type: "function", function: { name: "web_search", parameters: { type: "object", properties: { query: { type: "string" } } } } }],
  });
  const call = tool.choices[0].message.tool_calls[0];
  out.tool = { name: call.function.name, args: JSON.parse(call.function.arguments), finish: tool.choices[0].finish_reason };
  const stream = await client.chat.completions.create({ model: "m", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "stream please" }] });
  out.deltas = []; out.streamUsage = 0;
  for await (const chunk of stream) {
    if (chunk.usage) out.streamUsage = chunk.usage.total_tokens;
    for (const c of chunk.choices) if (c.delta && c.delta.content) out.deltas.push(c.delta.content);
  }
  const emb = await client.embeddings.create({ model: "e", input: ["a b", "c"], encoding_format: "float" });
  out.embeddings = emb.data.map(d => d.embedding.length);
  // Without encoding_format the client asks for base64 and decodes it to floats.
  const embDefault = await client.embeddings.create({ model: "e", input: "a b" });
  out.embeddingDefault = embDefault.data[0].embedding;
  out.embeddingFloat = emb.data[0].embedding;
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e); process.exit(1); });
`

func TestOfficialOpenAINodeClient(t *testing.T) {
	dir := testenv.NodeOpenAI(t)
	script, err := mock.ParseScript([]byte(`{"rules":[
		{"match":"tool","tool_calls":[{"name":"web_search","arguments":"{\"query\":\"proto actor\"}"}]},
		{"match":"stream","response":"streamed words arrive in order"}
	],"default":"hello from mock"}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mock.New(mock.Config{Script: script, Token: "test-key"}).Handler())
	defer srv.Close()
	js := filepath.Join(t.TempDir(), "fidelity.js")
	if err := os.WriteFile(js, []byte(fidelityJS), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", js)
	cmd.Env = append(os.Environ(), "BASE_URL="+srv.URL+"/v1", "NODE_PATH="+filepath.Join(dir, "node_modules"))
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node: %v\n%s", err, stderr)
	}
	var got struct {
		Models []string
		Plain  struct {
			Content, Finish string
			Total           int
		}
		Tool struct {
			Name   string
			Args   map[string]string
			Finish string
		}
		Deltas      []string
		StreamUsage int
		Embeddings  []int
		// EmbeddingDefault (base64 on the wire) must equal EmbeddingFloat.
		EmbeddingDefault []float32
		EmbeddingFloat   []float32
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	if len(got.Models) != 1 || got.Plain.Content != "hello from mock" || got.Plain.Finish != "stop" || got.Plain.Total == 0 {
		t.Fatalf("models/plain: %+v", got)
	}
	if got.Tool.Name != "web_search" || got.Tool.Args["query"] != "proto actor" || got.Tool.Finish != "tool_calls" {
		t.Fatalf("tool call: %+v", got.Tool)
	}
	if len(got.Deltas) < 2 || strings.Join(got.Deltas, "") != "streamed words arrive in order" || got.StreamUsage == 0 {
		t.Fatalf("stream: %q usage %d", got.Deltas, got.StreamUsage)
	}
	if len(got.Embeddings) != 2 || got.Embeddings[0] != mock.DefaultEmbeddingDims {
		t.Fatalf("embeddings: %v", got.Embeddings)
	}
	if len(got.EmbeddingDefault) != mock.DefaultEmbeddingDims || fmt.Sprint(got.EmbeddingDefault) != fmt.Sprint(got.EmbeddingFloat) {
		t.Fatalf("base64 embedding decoded by the client differs from the float one: %v vs %v", got.EmbeddingDefault[:4], got.EmbeddingFloat[:4])
	}
}

// currentClientsJS drives mock-llm with the current official npm clients, openai 6.x
// and @anthropic-ai/sdk, the way frameworks call them: content-part messages, model
// retrieval, streaming (raw events and the SDKs' stream helpers), tool calls, token
// counting, embeddings of a named model and its shortened form, and error objects. It
// prints one JSON object with what the clients saw.
const currentClientsJS = `
const { OpenAI } = require("openai");
const { Anthropic } = require("@anthropic-ai/sdk");
(async () => {
  const out = { openai: {}, anthropic: {} };
  const oa = new OpenAI({ baseURL: process.env.BASE_URL + "/v1", apiKey: "test-key", maxRetries: 0 });
  const o = out.openai;
  o.retrieved = (await oa.models.retrieve("gpt-4o-mini")).id;
  o.models = (await oa.models.list()).data.map(m => m.id);
  const parts = await oa.chat.completions.create({ model: "gpt-4o-mini", messages: [
    { role: "system", content: [{ type: "text", text: "be brief" }] },
    { role: "user", content: [{ type: "text", text: "say " }, { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }, { type: "text", text: "hello" }] }] });
  o.parts = parts.choices[0].message.content;
  const oneMsg = await oa.chat.completions.create({ model: "m", messages: [{ role: "user", content: "say hello" }] });
  const history = await oa.chat.completions.create({ model: "m", messages: [
    { role: "user", content: "a long earlier question ".repeat(50) }, { role: "assistant", content: "a long earlier answer ".repeat(50) },
    { role: "user", content: "say hello" }] });
  o.promptTokens = [oneMsg.usage.prompt_tokens, history.usage.prompt_tokens];
  const tool = await oa.chat.completions.create({ model: "m", messages: [{ role: "user", content: [{ type: "text", text: "use a tool" }] }],
    tools: [{ type: "function", function: { name: "web_search", parameters: { type: "object", properties: { query: { type: "string" } } } } }] });
  const call = tool.choices[0].message.tool_calls[0];
  o.tool = { name: call.function.name, args: JSON.parse(call.function.arguments) };
  const stream = await oa.chat.completions.create({ model: "m", stream: true, stream_options: { include_usage: true },
    messages: [{ role: "user", content: [{ type: "text", text: "stream please" }] }] });
  o.deltas = []; o.streamUsage = 0;
  for await (const chunk of stream) {
    if (chunk.usage) o.streamUsage = chunk.usage.total_tokens;
    for (const c of chunk.choices) if (c.delta && c.delta.content) o.deltas.push(c.delta.content);
  }
  const helper = oa.chat.completions.stream({ model: "m", messages: [{ role: "user", content: "stream please" }] });
  o.helperText = (await helper.finalChatCompletion()).choices[0].message.content;
  o.embedding = (await oa.embeddings.create({ model: "text-embedding-3-small", input: "a b" })).data[0].embedding.length;
  o.embeddingShort = (await oa.embeddings.create({ model: "text-embedding-3-small", input: "a b", dimensions: 256 })).data[0].embedding.length;
  try { await oa.chat.completions.create({ model: "m", messages: [{ role: "user", content: "overload me" }] }); }
  catch (e) { o.error = { status: e.status, message: e.error && e.error.message }; }

  const an = new Anthropic({ baseURL: process.env.BASE_URL, apiKey: "test-key", maxRetries: 0 });
  const a = out.anthropic;
  a.retrieved = (await an.models.retrieve("claude-sonnet-4-6")).id;
  const turns = [{ role: "user", content: "say " }, { role: "user", content: [{ type: "text", text: "hello" }] }];
  const msg = await an.messages.create({ model: "claude-sonnet-4-6", max_tokens: 64, system: "be brief", messages: turns });
  a.merged = msg.content[0].text;
  a.inputTokens = msg.usage.input_tokens;
  a.counted = (await an.messages.countTokens({ model: "claude-sonnet-4-6", system: "be brief", messages: turns })).input_tokens;
  const use = await an.messages.create({ model: "m", max_tokens: 64, messages: [{ role: "user", content: "use a tool" }],
    tools: [{ name: "web_search", input_schema: { type: "object", properties: { query: { type: "string" } } } }] });
  const tu = use.content.find(b => b.type === "tool_use");
  a.tool = { name: tu.name, args: tu.input, stop: use.stop_reason };
  const after = await an.messages.create({ model: "m", max_tokens: 64, messages: [
    { role: "user", content: "use a tool" }, { role: "assistant", content: use.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: tu.id, content: "found it" }] }] });
  a.afterTool = after.content[0].text;
  const raw = await an.messages.create({ model: "m", max_tokens: 64, stream: true, messages: [{ role: "user", content: "stream please" }] });
  a.events = []; a.deltas = [];
  for await (const ev of raw) {
    a.events.push(ev.type);
    if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") a.deltas.push(ev.delta.text);
  }
  const helperStream = an.messages.stream({ model: "m", max_tokens: 64, messages: [{ role: "user", content: "stream please" }] });
  a.helperTexts = []; helperStream.on("text", t => a.helperTexts.push(t));
  a.helperFinal = (await helperStream.finalMessage()).content[0].text;
  try { await an.messages.create({ model: "m", max_tokens: 64, messages: [{ role: "user", content: "overload me" }] }); }
  catch (e) { a.error = { status: e.status, type: e.type, message: e.apiMessage }; }
  try { await an.messages.batches.retrieve("msgbatch_nope"); }
  catch (e) { a.notFound = { status: e.status, type: e.type }; }

  // What current models add, case by case.
  const longSystem = "Follow the house rules of planning. ".repeat(200);
  const cacheMsgs = (q) => [{ role: "system", content: longSystem }, { role: "user", content: q }];
  const c1 = await oa.chat.completions.create({ model: "gpt-4o-mini", messages: cacheMsgs("first") });
  const c2 = await oa.chat.completions.create({ model: "gpt-4o-mini", messages: cacheMsgs("second") });
  o.cached = [c1.usage.prompt_tokens_details.cached_tokens, c2.usage.prompt_tokens_details.cached_tokens, c2.usage.prompt_tokens];
  const cs = await oa.chat.completions.create({ model: "gpt-4o-mini", stream: true, stream_options: { include_usage: true }, messages: cacheMsgs("third") });
  for await (const chunk of cs) if (chunk.usage) o.streamCached = chunk.usage.prompt_tokens_details.cached_tokens;
  const r = await oa.chat.completions.create({ model: "o4-mini", reasoning_effort: "low", max_completion_tokens: 500, messages: [{ role: "user", content: "say hello" }] });
  o.reasoning = [r.usage.completion_tokens_details.reasoning_tokens, r.usage.completion_tokens];
  const planSchema = { type: "object", properties: { steps: { type: "array", items: { type: "string" } } }, required: ["steps"], additionalProperties: false };
  const parsed = await oa.chat.completions.parse({ model: "gpt-4o-mini", messages: [{ role: "user", content: "plan" }],
    response_format: { type: "json_schema", json_schema: { name: "plan", schema: planSchema, strict: true } } });
  o.parsed = parsed.choices[0].message.parsed;
  try { await oa.chat.completions.create({ model: "m", messages: [{ role: "user", content: "plan" }], response_format: { type: "json_schema", json_schema: { schema: planSchema } } }); }
  catch (e) { o.badFormat = e.status; }
  const searchTool = { type: "function", function: { name: "web_search", parameters: { type: "object", properties: { query: { type: "string" } } } } };
  const planTool = { type: "function", function: { name: "write_plan", parameters: planSchema } };
  const forced = await oa.chat.completions.create({ model: "m", messages: [{ role: "user", content: "plan" }], tools: [searchTool, planTool],
    tool_choice: { type: "function", function: { name: "write_plan" } } });
  o.forced = { name: forced.choices[0].message.tool_calls[0].function.name, args: JSON.parse(forced.choices[0].message.tool_calls[0].function.arguments) };
  const forcedStream = oa.chat.completions.stream({ model: "m", messages: [{ role: "user", content: "plan" }], tools: [searchTool, planTool], tool_choice: "required", parallel_tool_calls: false });
  const fsFinal = await forcedStream.finalChatCompletion();
  o.forcedStream = fsFinal.choices[0].message.tool_calls.map(c => c.function.name);
  // What the API refuses, with its status, code and param.
  const refused = async (req) => {
    try { await req(); return { status: 200 }; } catch (e) { return { status: e.status, type: e.type, code: e.code, param: e.param, name: e.constructor.name }; }
  };
  o.refused = {
    maxTokens: await refused(() => oa.chat.completions.create({ model: "o4-mini", max_tokens: 50, messages: [{ role: "user", content: "say hello" }] })),
    effort: await refused(() => oa.chat.completions.create({ model: "o4-mini", reasoning_effort: "extreme", messages: [{ role: "user", content: "say hello" }] })),
    orphanTool: await refused(() => oa.chat.completions.create({ model: "m", messages: [{ role: "user", content: "say hello" }, { role: "tool", tool_call_id: "call_1", content: "x" }] })),
    unknownModel: await refused(() => oa.models.retrieve("does-not-exist")),
  };
  const unscripted = await oa.chat.completions.parse({ model: "gpt-4o-mini", messages: [{ role: "user", content: "unscripted plan" }],
    response_format: { type: "json_schema", json_schema: { name: "plan", schema: planSchema, strict: true } } });
  o.unscriptedParsed = unscripted.choices[0].message.parsed;

  const sysBlocks = [{ type: "text", text: longSystem, cache_control: { type: "ephemeral" } }];
  const k1 = await an.messages.create({ model: "claude-sonnet-4-6", max_tokens: 64, system: sysBlocks, messages: [{ role: "user", content: "first" }] });
  const k2 = await an.messages.create({ model: "claude-sonnet-4-6", max_tokens: 64, system: sysBlocks, messages: [{ role: "user", content: "second" }] });
  a.cache = [k1.usage.cache_creation_input_tokens, k1.usage.cache_read_input_tokens, k2.usage.cache_creation_input_tokens, k2.usage.cache_read_input_tokens, k2.usage.input_tokens];
  const anTool = { name: "web_search", input_schema: { type: "object", properties: { query: { type: "string" } } } };
  const think = { type: "enabled", budget_tokens: 1024 };
  const t1 = await an.messages.create({ model: "claude-sonnet-4-6", max_tokens: 2048, thinking: think, tools: [anTool], messages: [{ role: "user", content: "use a tool" }] });
  a.thinkingTypes = t1.content.map(b => b.type);
  const tu1 = t1.content.find(b => b.type === "tool_use");
  const t2 = await an.messages.create({ model: "claude-sonnet-4-6", max_tokens: 2048, thinking: think, tools: [anTool], messages: [
    { role: "user", content: "use a tool" }, { role: "assistant", content: t1.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: tu1.id, content: "found it" }] }] });
  a.afterThinking = t2.content.filter(b => b.type === "text").map(b => b.text).join("");
  try {
    await an.messages.create({ model: "claude-sonnet-4-6", max_tokens: 2048, thinking: think, tools: [anTool], messages: [
      { role: "user", content: "use a tool" }, { role: "assistant", content: [tu1] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: tu1.id, content: "found it" }] }] });
  } catch (e) { a.thinkingDropped = { status: e.status, type: e.type }; }
  const ts = an.messages.stream({ model: "claude-sonnet-4-6", max_tokens: 2048, thinking: think, messages: [{ role: "user", content: "stream please" }] });
  a.thinkingDeltas = 0; ts.on("thinking", () => { a.thinkingDeltas++; });
  const tsFinal = await ts.finalMessage();
  a.streamThinking = { types: tsFinal.content.map(b => b.type), signed: !!tsFinal.content[0].signature, text: tsFinal.content[1].text };
  const ft = await an.messages.create({ model: "m", max_tokens: 64, tools: [anTool, { name: "plan", input_schema: planSchema }],
    tool_choice: { type: "tool", name: "plan" }, messages: [{ role: "user", content: "plan" }] });
  a.forced = { name: ft.content[0].name, input: ft.content[0].input, stop: ft.stop_reason };
  a.refused = {};
  try { await an.messages.create({ model: "claude-sonnet-4-6", max_tokens: 2048, thinking: think, temperature: 0.2, messages: [{ role: "user", content: "say hello" }] }); a.refused.thinkingTemperature = { status: 200 }; }
  catch (e) { a.refused.thinkingTemperature = { status: e.status, type: e.type }; }
  try { await an.models.retrieve("does-not-exist"); a.refused.unknownModel = { status: 200 }; }
  catch (e) { a.refused.unknownModel = { status: e.status, type: e.type }; }
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e); process.exit(1); });
`

// TestCurrentOfficialNodeClients: the current official npm clients (openai 6.x and
// @anthropic-ai/sdk) work against mock-llm end to end, streaming included.
func TestCurrentOfficialNodeClients(t *testing.T) {
	dir := testenv.NodeModelClients(t)
	script, err := mock.ParseScript([]byte(`{"rules":[
		{"match":"overload","status":429,"error_message":"slow down"},
		{"tool_match":"found it","response":"the tool found it"},
		{"match":"^use a tool$","tool_calls":[{"name":"web_search","arguments":"{\"query\":\"proto actor\"}"}]},
		{"match":"stream","response":"streamed words arrive in order"},
		{"match":"^plan$","response":"{\"steps\":[\"read\",\"write\"]}"},
		{"match":"(?s)^say \\s*hello$","system_match":"^be brief$","response":"hello from parts"}
	],"default":"hello from mock"}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mock.New(mock.Config{Script: script, Token: "test-key"}).Handler())
	defer srv.Close()
	js := filepath.Join(t.TempDir(), "current.js")
	if err := os.WriteFile(js, []byte(currentClientsJS), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", js)
	cmd.Env = append(os.Environ(), "BASE_URL="+srv.URL, "NODE_PATH="+filepath.Join(dir, "node_modules"))
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node: %v\n%s", err, stderr)
	}
	type apiError struct {
		Status        int
		Type, Message string
	}
	type refusal struct {
		Status                  int
		Type, Code, Param, Name string
	}
	var got struct {
		OpenAI struct {
			Retrieved    string
			Models       []string
			Parts        string
			PromptTokens []int
			Tool         struct {
				Name string
				Args map[string]string
			}
			Deltas         []string
			StreamUsage    int
			HelperText     string
			Embedding      int
			EmbeddingShort int
			Error          apiError
			Cached         []int
			StreamCached   int
			Reasoning      []int
			Parsed         struct{ Steps []string }
			BadFormat      int
			Forced         struct {
				Name string
				Args struct{ Steps []string }
			}
			ForcedStream []string
			Refused      struct {
				MaxTokens, Effort, OrphanTool, UnknownModel refusal
			}
			UnscriptedParsed *struct{ Steps []string }
		}
		Anthropic struct {
			Retrieved, Merged    string
			InputTokens, Counted int
			Tool                 struct {
				Name, Stop string
				Args       map[string]string
			}
			AfterTool       string
			Events, Deltas  []string
			HelperTexts     []string
			HelperFinal     string
			Error, NotFound apiError
			Cache           []int
			ThinkingTypes   []string
			AfterThinking   string
			ThinkingDropped apiError
			ThinkingDeltas  int
			StreamThinking  struct {
				Types  []string
				Signed bool
				Text   string
			}
			Forced struct {
				Name, Stop string
				Input      struct{ Steps []string }
			}
			Refused struct {
				ThinkingTemperature, UnknownModel refusal
			}
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	o, a := got.OpenAI, got.Anthropic
	if o.Retrieved != "gpt-4o-mini" || len(o.Models) != 1 {
		t.Errorf("openai models: retrieve %q, list %v", o.Retrieved, o.Models)
	}
	if o.Parts != "hello from parts" {
		t.Errorf("openai content parts answered %q", o.Parts)
	}
	if len(o.PromptTokens) != 2 || o.PromptTokens[1] <= o.PromptTokens[0]+100 {
		t.Errorf("openai prompt_tokens without and with history: %v", o.PromptTokens)
	}
	if o.Tool.Name != "web_search" || o.Tool.Args["query"] != "proto actor" {
		t.Errorf("openai tool call: %+v", o.Tool)
	}
	if len(o.Deltas) < 2 || strings.Join(o.Deltas, "") != "streamed words arrive in order" || o.StreamUsage == 0 || o.HelperText != "streamed words arrive in order" {
		t.Errorf("openai stream: %q usage %d, helper %q", o.Deltas, o.StreamUsage, o.HelperText)
	}
	if o.Embedding != 1536 || o.EmbeddingShort != 256 {
		t.Errorf("openai text-embedding-3-small: %d dimensions, %d with dimensions 256", o.Embedding, o.EmbeddingShort)
	}
	if o.Error.Status != 429 || o.Error.Message != "slow down" {
		t.Errorf("openai error: %+v", o.Error)
	}
	if a.Retrieved != "claude-sonnet-4-6" || a.Merged != "hello from parts" {
		t.Errorf("anthropic: retrieve %q, merged same-role turns answered %q", a.Retrieved, a.Merged)
	}
	if a.InputTokens == 0 || a.Counted != a.InputTokens {
		t.Errorf("anthropic count_tokens %d, the answer's input_tokens %d", a.Counted, a.InputTokens)
	}
	if a.Tool.Name != "web_search" || a.Tool.Args["query"] != "proto actor" || a.Tool.Stop != "tool_use" || a.AfterTool != "the tool found it" {
		t.Errorf("anthropic tool round trip: %+v, then %q", a.Tool, a.AfterTool)
	}
	if strings.Join(a.Deltas, "") != "streamed words arrive in order" || len(a.Events) == 0 || a.Events[0] != "message_start" || a.Events[len(a.Events)-1] != "message_stop" {
		t.Errorf("anthropic raw stream: events %v, deltas %q", a.Events, a.Deltas)
	}
	if len(a.HelperTexts) < 2 || strings.Join(a.HelperTexts, "") != a.HelperFinal || a.HelperFinal != "streamed words arrive in order" {
		t.Errorf("anthropic stream helper: texts %q, final %q", a.HelperTexts, a.HelperFinal)
	}
	if a.Error.Status != 429 || a.Error.Type != "rate_limit_error" || a.Error.Message != "slow down" {
		t.Errorf("anthropic error: %+v", a.Error)
	}
	if a.NotFound.Status != 404 || a.NotFound.Type != "not_found_error" {
		t.Errorf("anthropic unknown endpoint: %+v", a.NotFound)
	}
	checkCurrentModelFeatures(t, o.Cached, o.StreamCached, o.Reasoning, o.Parsed.Steps, o.BadFormat, o.Forced.Name, o.Forced.Args.Steps, o.ForcedStream)
	steps := "read,write"
	if len(a.Cache) != 5 || a.Cache[0] < 1024 || a.Cache[1] != 0 || a.Cache[2] != 0 || a.Cache[3] != a.Cache[0] || a.Cache[4] <= 0 || a.Cache[4] >= a.Cache[3] {
		t.Errorf("anthropic cache usage [creation1 read1 creation2 read2 input2]: %v", a.Cache)
	}
	if strings.Join(a.ThinkingTypes, ",") != "thinking,tool_use" || a.AfterThinking != "the tool found it" {
		t.Errorf("anthropic thinking: blocks %v, then %q", a.ThinkingTypes, a.AfterThinking)
	}
	if a.ThinkingDropped.Status != 400 || a.ThinkingDropped.Type != "invalid_request_error" {
		t.Errorf("anthropic thinking dropped before tool results: %+v", a.ThinkingDropped)
	}
	if strings.Join(a.StreamThinking.Types, ",") != "thinking,text" || !a.StreamThinking.Signed || a.ThinkingDeltas < 2 || a.StreamThinking.Text != "streamed words arrive in order" {
		t.Errorf("anthropic streamed thinking: %+v, %d thinking deltas", a.StreamThinking, a.ThinkingDeltas)
	}
	if r := o.Refused; r.MaxTokens != (refusal{400, "invalid_request_error", "unsupported_parameter", "max_tokens", "BadRequestError"}) ||
		r.Effort != (refusal{400, "invalid_request_error", "invalid_value", "reasoning_effort", "BadRequestError"}) ||
		r.OrphanTool != (refusal{400, "invalid_request_error", "", "messages.[1].role", "BadRequestError"}) ||
		r.UnknownModel != (refusal{404, "invalid_request_error", "model_not_found", "", "NotFoundError"}) {
		t.Errorf("openai refusals: %+v", r)
	}
	if o.UnscriptedParsed == nil || o.UnscriptedParsed.Steps == nil {
		t.Errorf("openai parse() of an unscripted json_schema call: %+v", o.UnscriptedParsed)
	}
	if r := a.Refused; r.ThinkingTemperature != (refusal{Status: 400, Type: "invalid_request_error"}) || r.UnknownModel != (refusal{Status: 404, Type: "not_found_error"}) {
		t.Errorf("anthropic refusals: %+v", r)
	}
	if a.Forced.Name != "plan" || a.Forced.Stop != "tool_use" || strings.Join(a.Forced.Input.Steps, ",") != steps {
		t.Errorf("anthropic forced tool: %+v", a.Forced)
	}
}

// checkCurrentModelFeatures checks what openai 6.x saw of prompt caching, reasoning,
// structured outputs and tool_choice.
func checkCurrentModelFeatures(t *testing.T, cached []int, streamCached int, reasoning []int, parsed []string, badFormat int, forced string, forcedArgs, forcedStream []string) {
	t.Helper()
	if len(cached) != 3 || cached[0] != 0 || cached[1] < 1024 || cached[1]%128 != 0 || cached[1] > cached[2] || streamCached != cached[1] {
		t.Errorf("openai cached_tokens [first second prompt2]: %v, streamed %d", cached, streamCached)
	}
	if len(reasoning) != 2 || reasoning[0] != 64 || reasoning[1] <= 64 {
		t.Errorf("openai reasoning_tokens, completion_tokens: %v", reasoning)
	}
	if strings.Join(parsed, ",") != "read,write" || badFormat != 400 {
		t.Errorf("openai parse() with json_schema: %v; schema without a name: HTTP %d", parsed, badFormat)
	}
	if forced != "write_plan" || strings.Join(forcedArgs, ",") != "read,write" {
		t.Errorf("openai forced function: %s %v", forced, forcedArgs)
	}
	if len(forcedStream) != 1 {
		t.Errorf("openai streamed tool_choice required, parallel_tool_calls false: calls %v", forcedStream)
	}
}
