package mock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/llm/openai"
	"github.com/fathom-agents/fathom/prompts"
	"github.com/fathom-agents/fathom/tools"
	"github.com/fathom-agents/fathom/tools/builtin"
)

// The demo tests send the demo model requests shaped like the runtime's: the system
// message is the real rendered template, a sub-agent's first user message starts with
// "Task:", then its own assistant/tool turns follow.

const workspace = "s-demo1/"

func demoClient(t *testing.T) *openai.Client {
	t.Helper()
	srv := httptest.NewServer(mock.New(mock.Config{Script: mock.DemoScript()}).Handler())
	t.Cleanup(srv.Close)
	return client(t, srv, "")
}

func render(t *testing.T, name string, d prompts.AgentData) string {
	t.Helper()
	s, err := prompts.Default()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Render(name, d)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// subAgent is one sub-agent's conversation with the demo model.
type subAgent struct {
	t   *testing.T
	c   *openai.Client
	req llm.Request
}

func newSubAgent(t *testing.T, c *openai.Client, typ, task string) *subAgent {
	t.Helper()
	sys := render(t, typ, prompts.AgentData{
		AgentType: typ, Goal: "Write a haiku about event sourcing", Tools: prompts.DefaultTools[typ], Workspace: workspace,
		Step: prompts.Step{ID: "s2", Type: "code", Description: "Do the step"}, MaxIterations: 10,
	})
	var specs []llm.ToolSpec
	for _, n := range prompts.DefaultTools[typ] {
		specs = append(specs, llm.ToolSpec{Name: n, Description: n, Parameters: json.RawMessage(`{"type":"object"}`)})
	}
	return &subAgent{t: t, c: c, req: llm.Request{Tools: specs, Messages: []llm.Message{
		{Role: "system", Content: sys},
		{Role: "user", Content: "Task: " + task + "\nGoal: Write a haiku about event sourcing\n"},
	}}}
}

// call asks the model once; want is the tool it must call ("" for a final answer).
func (a *subAgent) call(want string) llm.Response {
	a.t.Helper()
	resp, err := a.c.Chat(context.Background(), a.req)
	if err != nil {
		a.t.Fatal(err)
	}
	switch {
	case want == "" && len(resp.ToolCalls) > 0:
		a.t.Fatalf("wanted a final answer, got tool calls %+v", resp.ToolCalls)
	case want != "" && (len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != want):
		a.t.Fatalf("wanted a %s call, got %+v (text %q)", want, resp.ToolCalls, resp.Content)
	}
	if want != "" && !json.Valid([]byte(resp.ToolCalls[0].Arguments)) {
		a.t.Fatalf("%s arguments are not JSON: %s", want, resp.ToolCalls[0].Arguments)
	}
	return resp
}

// result records the model's tool call and the tool's result in the conversation.
func (a *subAgent) result(resp llm.Response, content string) {
	a.req.Messages = append(a.req.Messages,
		llm.Message{Role: "assistant", ToolCalls: resp.ToolCalls},
		llm.Message{Role: "tool", ToolCallID: resp.ToolCalls[0].ID, Content: content})
}

func args(t *testing.T, resp llm.Response) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(resp.ToolCalls[0].Arguments), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// handoff extracts and decodes the JSON object in the answer's ```json fence.
func handoff(t *testing.T, content string) map[string]any {
	t.Helper()
	_, rest, ok := strings.Cut(content, "```json\n")
	body, _, ok2 := strings.Cut(rest, "\n```")
	if !ok || !ok2 {
		t.Fatalf("no ```json fence in %q", content)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("hand-off is not JSON: %v\n%s", err, body)
	}
	for _, k := range []string{"status", "summary", "recommendations", "blockers", "confidence"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("hand-off lacks %q: %s", k, body)
		}
	}
	return m
}

// wrote is a write_artifact result.
func wrote(path string, size int) string {
	return fmt.Sprintf(`{"path":%q,"size":%d}`, path, size)
}

func TestDemoPlanHasParallelSteps(t *testing.T) {
	c := demoClient(t)
	sys := render(t, prompts.Orchestrator, prompts.AgentData{AgentType: "orchestrator", Goal: "Write a haiku", Workspace: workspace, MaxSteps: 10, Phase: prompts.PhasePlan})
	resp, err := chat(c, sys, "Goal: Write a haiku\n")
	if err != nil {
		t.Fatal(err)
	}
	var plan struct {
		Steps []struct {
			ID, Type, Description string
			Dependencies          []string
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(resp.Content), &plan); err != nil {
		t.Fatalf("plan is not JSON: %v\n%s", err, resp.Content)
	}
	var got []string
	for _, s := range plan.Steps {
		got = append(got, s.ID+":"+s.Type+"<"+strings.Join(s.Dependencies, ","))
		if !strings.Contains(s.Description, "haiku") && s.ID != "s4" {
			t.Errorf("step %s does not carry the goal: %q", s.ID, s.Description)
		}
	}
	if want := "s1:research<,s2:code<s1,s3:write<s1,s4:review<s2,s3"; strings.Join(got, ",") != want {
		t.Fatalf("plan %v, want %s", got, want)
	}
}

// TestDemoReplan: the re-plan phase gets a plan of the remaining work with a new id.
func TestDemoReplan(t *testing.T) {
	c := demoClient(t)
	sys := render(t, prompts.Orchestrator, prompts.AgentData{AgentType: "orchestrator", Goal: "Write a haiku", Workspace: workspace, MaxSteps: 8, Phase: prompts.PhaseReplan})
	resp, err := chat(c, sys, "Goal: Write a haiku\n\nFailed step (dropped):\n- s1 (research): research\n")
	if err != nil {
		t.Fatal(err)
	}
	var plan struct {
		Steps []struct{ ID, Type, Description string } `json:"steps"`
	}
	if err := json.Unmarshal([]byte(resp.Content), &plan); err != nil {
		t.Fatalf("plan is not JSON: %v\n%s", err, resp.Content)
	}
	if len(plan.Steps) != 1 || plan.Steps[0].ID != "fallback-1" || plan.Steps[0].Type != "write" || !strings.Contains(plan.Steps[0].Description, "haiku") {
		t.Fatalf("re-plan %+v", plan.Steps)
	}
}

func TestDemoResearcher(t *testing.T) {
	c := demoClient(t)
	a := newSubAgent(t, c, prompts.Researcher, "research what a haiku needs")
	resp := a.call("write_todos")
	// The real tool's answer.
	res := (&tools.Executor{Registry: mustRegistry(t, builtin.WriteTodos())}).Run(context.Background(),
		tools.Call{ID: resp.ToolCalls[0].ID, Name: "write_todos", Args: json.RawMessage(resp.ToolCalls[0].Arguments)})
	if res.Err != nil {
		t.Fatalf("write_todos arguments rejected: %v", res.Err.FormatForLLM())
	}
	a.result(resp, res.Content())
	resp = a.call("write_artifact")
	if m := args(t, resp); m["type"] != "research" || m["filename"] != "notes.md" || !strings.Contains(m["content"].(string), "haiku about event sourcing") {
		t.Fatalf("write_artifact %v", m)
	}
	a.result(resp, wrote(workspace+"research/notes.md", 9))
	h := handoff(t, a.call("").Content)
	if h["status"] != "completed" || !strings.Contains(h["summary"].(string), workspace+"research/notes.md") {
		t.Fatalf("hand-off %v", h)
	}
	for _, k := range []string{"sources", "key_findings", "knowledge_gaps"} {
		if _, ok := h[k].([]any); !ok {
			t.Fatalf("hand-off lacks the list %q: %v", k, h)
		}
	}
}

func TestDemoCoder(t *testing.T) {
	for _, c := range []struct {
		name, run, tests string
	}{
		{"sandbox ran", `{"status":"completed","exit_code":0,"stdout":"4 words, 17 letters\n","stderr":"","duration_ms":31}`, "passing"},
		{"no sandbox", tools.SandboxError("code_execute", "no sandbox is configured for external tools", false).FormatForLLM(), "none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newSubAgent(t, demoClient(t), prompts.Coder, "write a program")
			resp := a.call("code_execute")
			if m := args(t, resp); m["language"] != "python" || !strings.Contains(m["code"].(string), "print(") {
				t.Fatalf("code_execute %v", m)
			}
			a.result(resp, c.run)
			resp = a.call("write_artifact")
			if m := args(t, resp); m["type"] != "code" || m["filename"] != "demo.py" || !strings.Contains(m["content"].(string), "print(") {
				t.Fatalf("write_artifact %v", m)
			}
			a.result(resp, wrote(workspace+"code/demo.py", 7))
			h := handoff(t, a.call("").Content)
			if h["status"] != "completed" || h["tests_status"] != c.tests || h["impl_notes"] == "" ||
				!slices.Equal(h["files_created"].([]any), []any{workspace + "code/demo.py"}) {
				t.Fatalf("hand-off %v", h)
			}
		})
	}
}

func TestDemoWriterAndFailedArtifact(t *testing.T) {
	a := newSubAgent(t, demoClient(t), prompts.Writer, "write the haiku")
	resp := a.call("write_artifact")
	if m := args(t, resp); m["type"] != "drafts" || m["filename"] != "draft.md" || !strings.Contains(m["content"].(string), "journal") {
		t.Fatalf("write_artifact %v", m)
	}
	b := *a // the same conversation, forked: once the write succeeds, once it fails
	b.req.Messages = slices.Clone(a.req.Messages)
	a.result(resp, wrote(workspace+"drafts/draft.md", 8))
	h := handoff(t, a.call("").Content)
	if h["status"] != "completed" || h["document_type"] != "draft" || h["word_count"] != float64(14) || len(h["sections"].([]any)) != 1 {
		t.Fatalf("hand-off %v", h)
	}
	fail := tools.ExecutionError("write_artifact", "the artifact store is unreachable", true).FormatForLLM()
	b.result(resp, fail)
	h = handoff(t, b.call("").Content)
	if h["status"] != "partial" || len(h["blockers"].([]any)) != 1 || !strings.Contains(h["blockers"].([]any)[0].(string), "unreachable") {
		t.Fatalf("hand-off after a failed write %v", h)
	}
}

func TestDemoReviewer(t *testing.T) {
	for _, c := range []struct{ name, task, path string }{
		{"path in the task", "review the draft.\nHand-off of s3 (writer): the draft is in " + workspace + "drafts/draft.md.\nArtifacts: " + workspace + "drafts/draft.md", workspace + "drafts/draft.md"},
		{"path from the workspace", "review the draft", workspace + "drafts/draft.md"},
		{"another draft", "review it. Artifacts: " + workspace + "drafts/final_report.md", workspace + "drafts/final_report.md"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newSubAgent(t, demoClient(t), prompts.Reviewer, c.task)
			resp := a.call("read_artifact")
			if m := args(t, resp); m["path"] != c.path {
				t.Fatalf("read_artifact %v, want path %s", m, c.path)
			}
			a.result(resp, "# Write a haiku\n\nEvents fall like rain,\n")
			h := handoff(t, a.call("").Content)
			if h["status"] != "completed" || h["verdict"] != "approve" || !strings.Contains(h["summary"].(string), "approved") {
				t.Fatalf("hand-off %v", h)
			}
			if _, ok := h["issues"].([]any); !ok {
				t.Fatalf("hand-off lacks issues: %v", h)
			}
		})
	}
}

// TestDemoSynthesis: the closing summary cites the artifact paths of its input, and not
// the example paths of its own prompt.
func TestDemoSynthesis(t *testing.T) {
	c := demoClient(t)
	sys := render(t, prompts.Orchestrator, prompts.AgentData{AgentType: "orchestrator", Goal: "Write a haiku", Workspace: workspace, Phase: prompts.PhaseSynthesize})
	if !strings.Contains(sys, workspace+"drafts/report.md") {
		t.Fatal("the prompt no longer shows an example path: this test checks nothing")
	}
	in := "Goal: Write a haiku\n\nHand-offs:\n" +
		`s1 researcher completed: {"summary":"Notes are in ` + workspace + `research/notes.md."}` + "\n" +
		`s2 coder completed: {"files_created":["` + workspace + `code/demo.py"]}` + "\n" +
		"s3 writer completed. Artifacts: " + workspace + "drafts/draft.md, " + workspace + "research/notes.md\n"
	resp, err := chat(c, sys, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"research/notes.md", "code/demo.py", "drafts/draft.md"} {
		if strings.Count(resp.Content, "`"+workspace+p+"`") != 1 {
			t.Errorf("summary does not cite %s once:\n%s", p, resp.Content)
		}
	}
	if strings.Contains(resp.Content, "report.md") || !strings.Contains(resp.Content, "Summary for: Write a haiku") {
		t.Fatalf("summary:\n%s", resp.Content)
	}
	// With nothing to cite it says so.
	resp, err = chat(c, sys, "Goal: g\nNo artifacts.")
	if err != nil || !strings.Contains(resp.Content, "none were reported") {
		t.Fatalf("summary without artifacts: %v\n%s", err, resp.Content)
	}
}

// TestDemoExecutorAndSummarizer: the steps the orchestrator runs itself and the
// summarizer keep their demo answers.
func TestDemoExecutorAndSummarizer(t *testing.T) {
	c := demoClient(t)
	p, err := prompts.Default()
	if err != nil {
		t.Fatal(err)
	}
	sys, err := p.Render(prompts.Executor, prompts.ExecutorData{StepType: "custom"})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := chat(c, sys, "Goal: g\nStep: tidy up\n"); err != nil || resp.Content != "(demo model) Completed: tidy up" {
		t.Fatalf("custom step: %q %v", resp.Content, err)
	}
	sys, err = p.Render(prompts.Summarizer, prompts.SummarizerData{TargetTokens: 100, TargetWords: 75})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := chat(c, sys, "#1 user: hello"); err != nil || !strings.HasPrefix(resp.Content, "(demo model) Summary:") {
		t.Fatalf("summarizer: %q %v", resp.Content, err)
	}
}

func mustRegistry(t *testing.T, ts ...tools.Tool) *tools.Registry {
	t.Helper()
	r, err := tools.NewRegistry(ts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestTemplateFunctions: find returns the first match (or its first group), findAll
// every distinct match (.All holds id=99, id=1, id=2, id=1, id=3), and .Input leaves
// the system prompt out.
func TestTemplateFunctions(t *testing.T) {
	script, err := mock.ParseScript([]byte(`{"rules":[{"response":` +
		`"first={{find \"id=(\\\\d+)\" .Input}} whole={{find \"id=\\\\d+\" .Input}} none=[{{find \"zzz\" .Input}}] ` +
		`all={{range findAll \"id=(\\\\d+)\" .Input}}{{.}},{{end}} sys={{len (findAll \"id=\\\\d+\" .All)}}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	defer srv.Close()
	resp, err := client(t, srv, "").Chat(context.Background(), llm.Request{Messages: []llm.Message{
		{Role: "system", Content: "example id=99"},
		{Role: "user", Content: "id=1 and id=2"},
		{Role: "assistant", Content: "noted id=1"},
		{Role: "user", Content: "and id=3"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "first=1 whole=id=1 none=[] all=1,2,3, sys=4"; resp.Content != want {
		t.Fatalf("got %q, want %q", resp.Content, want)
	}
	// A bad pattern is an error answer, not a crash.
	bad, err := mock.ParseScript([]byte(`{"rules":[{"response":"{{find \"(\" .User}}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	srv2 := httptest.NewServer(mock.New(mock.Config{Script: bad}).Handler())
	defer srv2.Close()
	if _, err := chat(client(t, srv2, ""), "", "x"); err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("bad pattern: %v", err)
	}
}
