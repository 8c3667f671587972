package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/tools/mcp/mcptest"
)

// analystPromptFile is the custom agent's prompt template: its own words, the shared
// hand-off partial.
const analystPromptFile = `FATHOM-ROLE: analyst
You are the order analyst: you explain anomalies in order data.
Step {{.Step.ID}}: {{.Step.Description}}
{{template "_shared/tool_guidelines" .}}
{{template "_shared/handoff" .}}
`

// TestRunWithACustomAgentFromAConfigFile: `fathom run --config FILE` with an agent
// defined in the file's agents section. The planner's prompt lists the agent, the
// planner delegates a step to it by name, and the agent runs with its own prompt (the
// scripted model answers it only when the system prompt is the file's), its own model
// (the requests name it) and only its tools (a call to another tool is refused, its own
// tool runs); its hand-off is in the journal.
func TestRunWithACustomAgentFromAConfigFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := `agents:
  - name: analyst
    description: Reads order data and explains anomalies
    prompt_file: analyst.md.tmpl
    tools: [write_artifact]
    model: analyst-model
    max_iterations: 6
`
	cfgPath := filepath.Join(dir, "fathom.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "analyst.md.tmpl"), []byte(analystPromptFile), 0o600); err != nil {
		t.Fatal(err)
	}
	handoff := "Explained.\n```json\n" + `{"status":"completed","summary":"Order A-1 was double charged; see the notes.","recommendations":["refund"],"blockers":[],"confidence":0.9}` + "\n```"
	base := startMockLLM(t, scriptJSON(t, mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-PHASE: synthesize", Response: "Order A-1 was double charged."},
		// The planner delegates only when its prompt lists the analyst with its description.
		{SystemMatch: `(?s)FATHOM-ROLE: orchestrator.*\| analyst \| the analyst sub-agent \| Reads order data and explains anomalies \|.*"type": one of research, code, write, review, human_input, custom, analyst\.`,
			Response: `{"steps":[{"id":"s1","type":"analyst","description":"Explain why order A-1 was charged twice","dependencies":[]}]}`},
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"s1","type":"custom","description":"the planner did not see the analyst","dependencies":[]}]}`},
		{SystemMatch: "(?s)FATHOM-ROLE: analyst\nYou are the order analyst.*Your tools: write_artifact\\.", ToolMatch: "Saved artifact", Response: handoff},
		{SystemMatch: "(?s)FATHOM-ROLE: analyst\nYou are the order analyst", ToolMatch: `not available to the analyst`,
			ToolCalls: []mock.ToolCallRule{{Name: "write_artifact", Arguments: `{"type":"research","filename":"a1.md","content":"double charge"}`}}},
		{SystemMatch: "(?s)FATHOM-ROLE: analyst\nYou are the order analyst",
			ToolCalls: []mock.ToolCallRule{{Name: "code_execute", Arguments: `{"language":"python","code":"print(1)"}`}}},
	}, Default: "nothing scripted"}))
	r := fathom(t, cleanEnv("OPENAI_BASE_URL="+base, "OPENAI_API_KEY=k"), "run", "--config", cfgPath, "--data-dir", t.TempDir(), "--json", "Why was order A-1 charged twice?")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	evs := jsonEvents(t, r.stdout)
	checkCompletedRun(t, evs)
	var started, completed map[string]any
	var models, results []string
	for _, ev := range evs {
		switch {
		case ev["type"] == "subagent_started":
			started = ev
		case ev["type"] == "subagent_completed":
			completed = ev
		case ev["type"] == "llm_requested" && ev["sub_agent_id"] == "analyst-1", ev["type"] == "llm_responded" && ev["sub_agent_id"] == "analyst-1":
			models = append(models, ev["model"].(string))
		case ev["type"] == "tool_result" && ev["sub_agent_id"] == "analyst-1":
			res, _ := ev["result"].(string)
			if e, ok := ev["error"].(map[string]any); ok {
				res, _ = e["message"].(string)
			}
			results = append(results, ev["tool"].(string)+": "+res)
		}
	}
	if started == nil || started["agent_type"] != "analyst" || started["sub_agent_id"] != "analyst-1" || started["max_iterations"] != float64(6) {
		t.Fatalf("subagent_started %v\n%s", started, r.stdout)
	}
	if tools, _ := started["tools"].([]any); len(tools) != 1 || tools[0] != "write_artifact" {
		t.Fatalf("the analyst is offered %v, want only write_artifact", started["tools"])
	}
	if len(models) != 6 || slices.ContainsFunc(models, func(m string) bool { return m != "analyst-model" }) {
		t.Fatalf("models of the analyst's calls (requested, responded) %v, want analyst-model throughout", models)
	}
	if len(results) != 2 || !strings.Contains(results[0], `code_execute: tool "code_execute" is not available to the analyst`) || !strings.HasPrefix(results[1], "write_artifact: Saved artifact") {
		t.Fatalf("the analyst's tool results %q", results)
	}
	res, _ := completed["result"].(map[string]any)
	if completed["agent_type"] != "analyst" || res["status"] != "completed" || res["summary"] != "Order A-1 was double charged; see the notes." {
		t.Fatalf("subagent_completed %v", completed)
	}
}

// TestBadAgentsSectionFailsTheStart: what the file tells (an unknown key, an unknown
// tool, an unreadable prompt file) fails `fathom run` before anything starts, exit 2 with
// the file, the line and the key; so does, once the MCP servers are connected, a tool of
// a configured server that the server does not offer.
func TestBadAgentsSectionFailsTheStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "fathom.yaml")
	for _, tc := range []struct{ yaml, want string }{
		{"agents:\n  - name: analyst\n    description: d\n    prompt: p\n    tools: [send_email]\n", path + `:5: agents[0].tools[0]: unknown tool "send_email"`},
		{"agents:\n  - name: analyst\n    description: d\n    prompt: p\n    temprature: 1\n", path + ":5: agents[0].temprature: unknown key"},
		{"agents:\n  - name: analyst\n    description: d\n    prompt_file: missing.md.tmpl\n", path + ":4: agents[0].prompt_file: cannot read the prompt file"},
		{"agents:\n  - name: writer\n    description: d\n    prompt: p\n", path + `:2: agents[0].name: agent name: "writer" is taken: it names a built-in agent`},
	} {
		if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		r := fathom(t, cleanEnv(), "run", "--config", path, "--data-dir", t.TempDir(), "a goal")
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Fatalf("exit %d, stderr:\n%s\nwant %q", r.code, r.stderr, tc.want)
		}
	}
	script, nodePath := mcptest.Script(t)
	cfg := "agents:\n  - name: analyst\n    description: d\n    prompt: p\n    tools: [orders__no_such_tool]\n" +
		"mcp_servers:\n  - name: orders\n    command: node\n    args: [" + script + ", stdio]\n    env: {NODE_PATH: " + nodePath + "}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := fathom(t, cleanEnv(), "run", "--config", path, "--data-dir", t.TempDir(), "a goal")
	want := path + `:5: agents[0].tools[0]: tool "orders__no_such_tool": the node has no such tool (no MCP server lists it)`
	if r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Fatalf("exit %d, stderr:\n%s\nwant %q", r.code, r.stderr, want)
	}
}
