package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/llm/mock"
)

// embedModel plans one research step; the researcher calls the program's count_words
// tool, then hands off what it returned; the synthesis quotes the hand-off.
const embedModel = `{"rules":[
 {"system_match":"FATHOM-PHASE: synthesize","response":"The line has {{if find \"6 words\" .Input}}6{{else}}an unknown number of{{end}} words."},
 {"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"count\",\"type\":\"research\",\"description\":\"Count the words of: to be or not to be\"}]}"},
 {"system_match":"FATHOM-ROLE: researcher","tool_match":"\"words\"","response":"Counted.\n\n` + "```" + `json\n{\"status\":\"completed\",\"summary\":\"count_words says {{.Tool}}: 6 words\",\"recommendations\":[],\"blockers\":[],\"confidence\":0.9,\"sources\":[],\"key_findings\":[\"6 words\"],\"knowledge_gaps\":[]}\n` + "```" + `\n"},
 {"system_match":"FATHOM-ROLE: researcher","tool_calls":[{"name":"count_words","arguments":"{\"text\":\"to be or not to be\"}"}]}
]}`

// TestEmbedRunsASessionThatCallsTheProgramsTool runs the example against a scripted
// OpenAI-compatible model over HTTP: the researcher calls count_words, the program's own
// typed tool, whose result reaches the hand-off and the session's result.
func TestEmbedRunsASessionThatCallsTheProgramsTool(t *testing.T) {
	out := runExample(t, embedModel)
	for _, want := range []string{"tool_called", "tool_result", "session_completed", "result: The line has 6 words."} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in the example's output:\n%s", want, out)
		}
	}
}

// checkerModel plans a research step and a step for the program's checker agent (only
// when the planner's prompt lists it); the synthesis quotes the checker's hand-off.
const checkerModel = `{"rules":[
 {"system_match":"FATHOM-PHASE: synthesize","response":"{{if find \"checked: step count's count of 6 words is right\" .Input}}Checked: 6 words.{{else}}Unchecked.{{end}}"},
 {"system_match":"(?s)FATHOM-ROLE: orchestrator.*\\| checker \\| the checker sub-agent \\| Checks a word count","response":"{\"steps\":[{\"id\":\"count\",\"type\":\"research\",\"description\":\"Count the words of: to be or not to be\"},{\"id\":\"check\",\"type\":\"checker\",\"description\":\"Check the count\",\"dependencies\":[\"count\"]}]}"},
 {"system_match":"FATHOM-ROLE: researcher","tool_match":"\"words\"","response":"Counted.\n\n` + "```" + `json\n{\"status\":\"completed\",\"summary\":\"count_words says {{.Tool}}: 6 words\",\"recommendations\":[],\"blockers\":[],\"confidence\":0.9}\n` + "```" + `\n"},
 {"system_match":"FATHOM-ROLE: researcher","tool_calls":[{"name":"count_words","arguments":"{\"text\":\"to be or not to be\"}"}]}
]}`

// TestEmbedPlannerDelegatesToTheProgramsAgent: the planner sees the program's checker
// agent (a Go function) and delegates a step to it; the function gets the researcher's
// hand-off in its brief, and its own hand-off is recorded like a model agent's and
// reaches the session's result.
func TestEmbedPlannerDelegatesToTheProgramsAgent(t *testing.T) {
	out := runExample(t, checkerModel)
	if !strings.Contains(out, "subagent_completed") || !strings.Contains(out, "result: Checked: 6 words.") {
		t.Fatalf("the checker's hand-off did not reach the result:\n%s", out)
	}
}

// TestEmbedRunsItsToolAndAgentOnTheDemoModel runs the example as `go run` does without
// an endpoint: on the built-in demo model, scripted by the example's DemoRules, the
// researcher calls count_words on the goal's quoted text, the checker agent (a Go
// function) checks the count it handed off, and the result quotes the check.
func TestEmbedRunsItsToolAndAgentOnTheDemoModel(t *testing.T) {
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.LLM = fathom.LLM{DemoRules: demoRules}
	var out bytes.Buffer
	if err := run(context.Background(), cfg, "How many words are in 'to be or not to be, that is the question'?", &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		`tool_called count_words {"text":"to be or not to be, that is the question"}`,
		"subagent_completed researcher: count_words says 10 words",
		"subagent_completed checker: checked: step count's count of 10 words is right",
		"result: (demo model) checked: step count's count of 10 words is right",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in the example's output:\n%s", want, out.String())
		}
	}
}

// runExample runs the example's program against a scripted OpenAI-compatible model
// serving rules over HTTP and returns what it printed.
func runExample(t *testing.T, rules string) string {
	t.Helper()
	script, err := mock.ParseScript([]byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	defer model.Close()
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.LLM = fathom.LLM{BaseURL: model.URL + "/v1", APIKey: "k", Model: "mock-model"}
	var out bytes.Buffer
	if err := run(context.Background(), cfg, "How many words are in 'to be or not to be'?", &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	return out.String()
}
