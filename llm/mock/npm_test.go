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
