package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/internal/config"
)

// issueAgents is the agents section as issue 18 shows it, with the server its tool names.
const issueAgents = `agents:
  - name: analyst
    description: Reads order data and explains anomalies
    prompt_file: analyst.md.tmpl      # or prompt: "..." inline
    tools: [orders__lookup_order, write_artifact]
    model: gpt-4o-mini
    max_iterations: 8
mcp_servers:
  - name: orders
    command: node
    args: [orders-server.js]
`

const analystPrompt = "FATHOM-ROLE: analyst\nYou explain anomalies in order data.\nStep {{.Step.ID}}: {{.Step.Description}}\n{{template \"_shared/handoff\" .}}\n"

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestTheIssuesAgentsExampleParses(t *testing.T) {
	dir := writeFiles(t, map[string]string{"fathom.yaml": issueAgents, "analyst.md.tmpl": analystPrompt})
	f, err := config.Load(filepath.Join(dir, "fathom.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	specs := f.AgentSpecs()
	if len(specs) != 1 {
		t.Fatalf("agents %+v", specs)
	}
	a := specs[0]
	if a.Name != "analyst" || a.Description != "Reads order data and explains anomalies" || a.Prompt != analystPrompt ||
		a.PromptFile != filepath.Join(dir, "analyst.md.tmpl") || strings.Join(a.Tools, ",") != "orders__lookup_order,write_artifact" ||
		a.Model != "gpt-4o-mini" || a.MaxIterations != 8 || a.Run != nil {
		t.Fatalf("agent %+v", a)
	}
	if f.Agents[0].Line != 2 {
		t.Fatalf("line %d", f.Agents[0].Line)
	}
}

// TestBadAgentsFailWithFileLineAndKey: unknown keys, unknown tools, duplicate names (also
// with a built-in agent), unreadable or broken prompt files all name the file, the line
// and the key.
func TestBadAgentsFailWithFileLineAndKey(t *testing.T) {
	dir := writeFiles(t, map[string]string{"ok.md.tmpl": analystPrompt, "broken.md.tmpl": "line one\n{{.Nope}\n", "empty.md.tmpl": "  \n"})
	agent := func(extra string) string {
		return "agents:\n  - name: analyst\n    description: d\n" + extra
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown key", agent("    prompt: p\n    temperature: 0.2\n"),
			"fathom.yaml:5: agents[0].temperature: unknown key (want description, max_iterations, memory, model, name, prompt, prompt_file, tools, webhook_url)"},
		{"unknown tool", agent("    prompt: p\n    tools: [write_artifact, send_email]\n"),
			`fathom.yaml:5: agents[0].tools[1]: unknown tool "send_email": want a built-in tool (ask_human, code_execute, list_artifacts, read_artifact, web_search, write_artifact, write_todos)`},
		{"tool of an unknown server", agent("    prompt: p\n    tools: [orders__lookup_order]\n"),
			`fathom.yaml:5: agents[0].tools[0]: unknown tool "orders__lookup_order": no server "orders" in mcp_servers`},
		{"duplicate name", agent("    prompt: p\n  - name: analyst\n    description: e\n    prompt: q\n"),
			`fathom.yaml:5: agents[1].name: duplicate agent name "analyst" (first at line 2)`},
		{"name of a built-in agent", "agents:\n  - name: researcher\n    description: d\n    prompt: p\n",
			`fathom.yaml:2: agents[0].name: agent name: "researcher" is taken: it names a built-in agent`},
		{"name of a built-in step type", "agents:\n  - name: review\n    description: d\n    prompt: p\n",
			`fathom.yaml:2: agents[0].name: agent name: "review" is taken: it names a built-in step type`},
		{"bad name", "agents:\n  - name: my agent\n    description: d\n    prompt: p\n",
			`fathom.yaml:2: agents[0].name: agent name: "my agent" is not valid`},
		{"missing prompt file", agent("    prompt_file: nope.md.tmpl\n"),
			"fathom.yaml:4: agents[0].prompt_file: cannot read the prompt file: stat " + filepath.Join(dir, "nope.md.tmpl") + ": no such file or directory"},
		{"prompt file is a directory", agent("    prompt_file: .\n"), "fathom.yaml:4: agents[0].prompt_file: cannot read the prompt file: "},
		{"empty prompt file", agent("    prompt_file: empty.md.tmpl\n"), "fathom.yaml:4: agents[0].prompt_file: the prompt file " + filepath.Join(dir, "empty.md.tmpl") + " is empty"},
		{"broken prompt file", agent("    prompt_file: broken.md.tmpl\n"),
			"fathom.yaml:4: agents[0].prompt_file: the prompt template does not parse or render: " + filepath.Join(dir, "broken.md.tmpl") + ":2: "},
		{"prompt and prompt_file", agent("    prompt: p\n    prompt_file: ok.md.tmpl\n"), "fathom.yaml:4: agents[0].prompt: an agent has prompt (inline) or prompt_file, not both"},
		{"no prompt", agent(""), "fathom.yaml:2: agents[0]: set prompt (the template inline) or prompt_file"},
		{"no description", "agents:\n  - name: a\n    prompt: p\n", "fathom.yaml:2: agents[0]: description is required"},
		{"bad max_iterations", agent("    prompt: p\n    max_iterations: -1\n"), `fathom.yaml:5: agents[0].max_iterations: "-1" is not a positive whole number`},
		{"bad memory", agent("    prompt: p\n    memory: write\n"), `fathom.yaml:5: agents[0].memory: "write": want read, readwrite or none`},
		{"memory tool in tools", agent("    prompt: p\n    tools: [recall]\n"), "fathom.yaml:2: agents[0].name: agent spec: agent analyst: recall is given by the agent's memory setting"},
		{"bad webhook_url", agent("    prompt: p\n    webhook_url: ftp://example.com/in\n"),
			"fathom.yaml:5: agents[0].webhook_url: webhook url must be an absolute http or https URL without user info"},
		{"tools not a list", agent("    prompt: p\n    tools: write_artifact\n"), "fathom.yaml:5: agents[0].tools: must be a list of strings"},
		{"not a list", "agents: {name: a}\n", "fathom.yaml:1: agents: must be a list of agents"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse(filepath.Join(dir, "fathom.yaml"), []byte(tc.yaml))
			want := filepath.Join(dir, tc.want)
			var ce *config.Error
			if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.As(err, &ce) {
				t.Fatalf("error %v\nwant prefix %s", err, want)
			}
		})
	}
}

// TestAgentToolsMayNameServersDefinedLater: mcp_servers may follow agents in the file.
func TestAgentToolsMayNameServersDefinedLater(t *testing.T) {
	dir := writeFiles(t, map[string]string{"analyst.md.tmpl": analystPrompt})
	if _, err := config.Parse(filepath.Join(dir, "fathom.yaml"), []byte(issueAgents)); err != nil {
		t.Fatal(err)
	}
}

// TestAgentMemorySetting: an agent's memory key (read | readwrite | none) gives its
// sub-agents the memory tools it allows, and nothing when left out.
func TestAgentMemorySetting(t *testing.T) {
	yaml := "agents:\n" +
		"  - {name: reader, description: d, prompt: p, memory: read}\n" +
		"  - {name: scribe, description: d, prompt: p, memory: readwrite, tools: [write_todos]}\n" +
		"  - {name: mute, description: d, prompt: p, memory: none}\n" +
		"  - {name: plain, description: d, prompt: p}\n"
	f, err := config.Parse(filepath.Join(t.TempDir(), "fathom.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := core.NewAgents(f.AgentSpecs()...)
	if err != nil {
		t.Fatal(err)
	}
	for step, want := range map[string]string{"reader": "recall", "scribe": "write_todos,recall,remember,forget", "mute": "", "plain": ""} {
		p, ok := reg.ProfileFor(step)
		if !ok || strings.Join(p.Tools, ",") != want {
			t.Errorf("%s: tools %v, want %s", step, p.Tools, want)
		}
	}
}

// TestAgentWebhookURLKey: an agent's webhook_url is its spec's WebhookURL (the
// webhook_url of the sessions started for it); left out, none.
func TestAgentWebhookURLKey(t *testing.T) {
	yaml := "agents:\n" +
		"  - {name: auditor, description: d, prompt: p, webhook_url: \"https://hooks.example.com/auditor?k=1\"}\n" +
		"  - {name: quiet, description: d, prompt: p}\n"
	f, err := config.Parse("fathom.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	specs := f.AgentSpecs()
	if len(specs) != 2 || specs[0].WebhookURL != "https://hooks.example.com/auditor?k=1" || specs[1].WebhookURL != "" {
		t.Fatalf("agents %+v", specs)
	}
}
