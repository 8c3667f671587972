package prompts_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/prompts"
)

func agentData(typ string) prompts.AgentData {
	return prompts.AgentData{
		AgentType: typ, Goal: "Compare quicksort and mergesort on 1e6 integers",
		Tools: prompts.DefaultTools[typ], Workspace: "s-42/",
		Step:     prompts.Step{ID: "s2", Type: "code", Description: "Benchmark both algorithms and save the script"},
		MaxSteps: 8, MaxIterations: 15,
	}
}

func mustDefault(t *testing.T) *prompts.Set {
	t.Helper()
	s, err := prompts.Default()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEveryTemplateRendersARealPrompt renders every template with sample data and checks
// its role marker, the variables it must show and its size: the agent prompts are real
// procedures, not placeholders.
func TestEveryTemplateRendersARealPrompt(t *testing.T) {
	s := mustDefault(t)
	tk, err := memory.GetTokenizer(memory.EncodingO200K)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		data      any
		marker    string
		minTokens int
		want      []string
	}{
		{prompts.Orchestrator, prompts.AgentData{AgentType: "orchestrator", Goal: "g", Workspace: "s-42/", MaxSteps: 7, Phase: prompts.PhasePlan},
			"FATHOM-ROLE: orchestrator\nFATHOM-PHASE: plan\n", 1000, []string{"never plan more than 7 steps", `{"steps":[`, "IN PARALLEL", "human_input"}},
		{prompts.Orchestrator, prompts.AgentData{AgentType: "orchestrator", Goal: "g", Workspace: "s-42/", MaxSteps: 7},
			"FATHOM-ROLE: orchestrator\nFATHOM-PHASE: plan\n", 1000, []string{"## Phase: plan"}},
		{prompts.Orchestrator, prompts.AgentData{AgentType: "orchestrator", Goal: "g", Workspace: "s-42/", Phase: prompts.PhaseSynthesize},
			"FATHOM-ROLE: orchestrator\nFATHOM-PHASE: synthesize\n", 600, []string{"## Phase: synthesize", "`s-42/drafts/report.md`", "Open issues"}},
		{prompts.Orchestrator, prompts.AgentData{AgentType: "orchestrator", Goal: "g", Workspace: "s-42/", MaxSteps: 3, Phase: prompts.PhaseReplan},
			"FATHOM-ROLE: orchestrator\nFATHOM-PHASE: replan\n", 1000, []string{"## Phase: replan", "REMAINING work only", "more than 3 new steps",
				"A NEW id", "steps still running", `{"steps":[`}},
		{prompts.Researcher, agentData("researcher"), "FATHOM-ROLE: researcher\n", 600,
			[]string{"web_search, write_todos", `"key_findings"`, `"knowledge_gaps"`, "ask_human tool", "s-42/{type}/{filename}", "Step s2: Benchmark"}},
		{prompts.Coder, agentData("coder"), "FATHOM-ROLE: coder\n", 600,
			[]string{"code_execute:", `"tests_status"`, `"files_created"`, "```json", "at most 15 model turns"}},
		{prompts.Writer, agentData("writer"), "FATHOM-ROLE: writer\n", 600,
			[]string{`"word_count"`, `"sections"`, "drafts"}},
		{prompts.Reviewer, agentData("reviewer"), "FATHOM-ROLE: reviewer\n", 600,
			[]string{`"verdict"`, `"issues"`, "you do not write them", "with\n     code_execute"}},
		{prompts.Executor, prompts.ExecutorData{StepType: "custom"}, "FATHOM-ROLE: executor\n", 100, []string{"You are a custom agent"}},
		{prompts.Summarizer, prompts.SummarizerData{TargetTokens: 2000, TargetWords: 1500}, "FATHOM-ROLE: summarizer\n", 200, []string{"2000 tokens"}},
	}
	for _, c := range cases {
		out, err := s.Render(c.name, c.data)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !strings.HasPrefix(out, c.marker) {
			t.Errorf("%s does not start with %q:\n%.200s", c.name, c.marker, out)
		}
		if n := tk.Count(out); n < c.minTokens {
			t.Errorf("%s is %d tokens, want at least %d", c.name, n, c.minTokens)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s lacks %q", c.name, w)
			}
		}
		if strings.Contains(out, "<no value>") || strings.Contains(out, "\n\n\n") {
			t.Errorf("%s renders badly (<no value> or blank runs):\n%s", c.name, out)
		}
	}
}

// TestToolsShapeTheAgentPrompt: the prompt talks about the tools the agent has, and
// only those.
func TestToolsShapeTheAgentPrompt(t *testing.T) {
	s := mustDefault(t)
	d := agentData("writer")
	d.Tools = []string{"read_artifact"}
	out, err := s.Render(prompts.Writer, d)
	if err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"- web_search:", "- code_execute:", "You can ask the user with the ask_human tool"} {
		if strings.Contains(out, absent) {
			t.Errorf("prompt without that tool mentions %q", absent)
		}
	}
	for _, want := range []string{"Your tools: read_artifact.", "You cannot ask the user directly", `status "blocked"`} {
		if !strings.Contains(out, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
}

func TestSubAgentTypesHaveTemplates(t *testing.T) {
	s := mustDefault(t)
	for typ, name := range prompts.SubAgentTypes {
		if s.File(name) == "" || len(prompts.DefaultTools[name]) == 0 {
			t.Errorf("step type %s → %s has no template or tools", typ, name)
		}
	}
	want := []string{"_shared/artifact_conventions", "_shared/handoff", "_shared/hitl_protocols", "_shared/tool_guidelines",
		"coder", "executor", "orchestrator", "researcher", "reviewer", "summarizer", "writer"}
	if got := s.Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	if s.File("coder") != "prompts/coder.md.tmpl" || s.Overrides() != nil {
		t.Fatalf("embedded set: File(coder) = %q, Overrides() = %v", s.File("coder"), s.Overrides())
	}
}

func write(t *testing.T, dir, rel, text string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOverrideReplacesOneFile: an override of one agent template and one partial is
// used; every other template keeps its default, and the defaults include the
// overridden partial.
func TestOverrideReplacesOneFile(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "coder.md.tmpl", "FATHOM-ROLE: coder\nHOUSE CODER for {{.Goal}} with {{join .Tools \"+\"}}\n{{template \"_shared/house_rules\" .}}")
	write(t, dir, "_shared/house_rules.md.tmpl", "Rule: tabs, not spaces.")
	write(t, dir, "_shared/tool_guidelines.md.tmpl", "HOUSE TOOL RULES for {{.AgentType}}")
	write(t, dir, "README.txt", "not a template: ignored")
	s, err := prompts.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := agentData("coder")
	d.Tools = []string{"code_execute", "write_artifact"}
	out, err := s.Render(prompts.Coder, d)
	if err != nil || out != "FATHOM-ROLE: coder\nHOUSE CODER for "+d.Goal+" with code_execute+write_artifact\nRule: tabs, not spaces." {
		t.Fatalf("overridden coder: %q %v", out, err)
	}
	out, err = s.Render(prompts.Researcher, agentData("researcher"))
	if err != nil || !strings.HasPrefix(out, "FATHOM-ROLE: researcher\n") || !strings.Contains(out, "HOUSE TOOL RULES for researcher") ||
		!strings.Contains(out, "## Artifacts") {
		t.Fatalf("default researcher with the overridden partial: %v\n%s", err, out)
	}
	if got := strings.Join(s.Overrides(), ","); got != "_shared/house_rules,_shared/tool_guidelines,coder" {
		t.Fatalf("Overrides() = %s", got)
	}
	if s.File("coder") != filepath.Join(dir, "coder.md.tmpl") || s.File("writer") != "prompts/writer.md.tmpl" {
		t.Fatalf("File: coder %q, writer %q", s.File("coder"), s.File("writer"))
	}
	// The embedded set is untouched.
	def := mustDefault(t)
	if out, err := def.Render(prompts.Coder, agentData("coder")); err != nil || strings.Contains(out, "HOUSE") {
		t.Fatalf("Default() changed by an override: %v", err)
	}
}

// TestBrokenOverrideFailsLoad: syntax errors, fields that do not exist and unknown
// partials fail Load with the override's file and line, as do unknown template names.
func TestBrokenOverrideFailsLoad(t *testing.T) {
	cases := []struct {
		name, rel, text string
		line            int
		want            string
	}{
		{"syntax error", "writer.md.tmpl", "FATHOM-ROLE: writer\n\nGoal: {{.Goal}\n", 3, "bad character"},
		{"unclosed action", "orchestrator.md.tmpl", "FATHOM-ROLE: orchestrator\n{{if .Goal}}\nno end\n", 0, "unexpected EOF"},
		{"missing field", "researcher.md.tmpl", "FATHOM-ROLE: researcher\nfine\n  {{.Nope}}\n", 3, "can't evaluate field Nope"},
		{"missing field in a phase", "orchestrator.md.tmpl", "FATHOM-ROLE: orchestrator\n{{if eq .Phase \"synthesize\"}}\n{{.Handoffs}}\n{{end}}", 3, "can't evaluate field Handoffs"},
		{"missing field in a partial", "_shared/hitl_protocols.md.tmpl", "## Asking\n{{.Question}}", 2, "can't evaluate field Question"},
		{"missing field in executor", "executor.md.tmpl", "FATHOM-ROLE: executor\n{{.Goal}}", 2, "can't evaluate field Goal"},
		{"unknown partial", "reviewer.md.tmpl", "FATHOM-ROLE: reviewer\n{{template \"_shared/nope\" .}}", 2, `"_shared/nope" not defined`},
		{"unknown function", "coder.md.tmpl", "FATHOM-ROLE: coder\n{{upper .Goal}}", 2, `"upper" not defined`},
		{"empty file", "writer.md.tmpl", " \n", 0, "the template is empty"},
		{"unknown template name", "reseacher.md.tmpl", "FATHOM-ROLE: researcher", 0, `no template is named "reseacher"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			file := write(t, dir, c.rel, c.text)
			_, err := prompts.Load(dir)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			msg := err.Error()
			if !strings.Contains(msg, file) || !strings.Contains(msg, c.want) {
				t.Fatalf("error does not name %s and say %q: %v", file, c.want, err)
			}
			var te *prompts.TemplateError
			if c.rel == "reseacher.md.tmpl" {
				return
			}
			if !errors.As(err, &te) || te.File != file {
				t.Fatalf("not a TemplateError for %s: %#v", file, err)
			}
			if c.line > 0 && (te.Line != c.line || !strings.Contains(msg, file+":"+strconv.Itoa(c.line)+":")) {
				t.Fatalf("line %d, want %d: %v", te.Line, c.line, err)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := prompts.Load(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing dir: %v", err)
	}
	f := write(t, t.TempDir(), "file", "x")
	if _, err := prompts.Load(f); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("file as dir: %v", err)
	}
	if s, err := prompts.Load(""); err != nil || s != mustDefault(t) {
		t.Fatalf(`Load("") = %v, %v; want Default()`, s, err)
	}
	if _, err := mustDefault(t).Render("nope", nil); err == nil {
		t.Fatal("rendering an unknown template succeeded")
	}
	// A render with data of the wrong type names the template's file too.
	_, err := mustDefault(t).Render(prompts.Coder, prompts.SummarizerData{})
	var te *prompts.TemplateError
	if !errors.As(err, &te) || te.File == "" || te.Line == 0 {
		t.Fatalf("render error %#v", err)
	}
}

// TestMemoizedRenderIsPerSetAndData: Render memoizes the executor's output (every step
// call renders it), keyed by the set, the template and the data: the second render is
// the first's text, another step type gets its own, and an override set its own.
func TestMemoizedRenderIsPerSetAndData(t *testing.T) {
	def := mustDefault(t)
	first, err := def.Render(prompts.Executor, prompts.ExecutorData{StepType: "custom"})
	if err != nil || !strings.Contains(first, "You are a custom agent") {
		t.Fatalf("executor: %v\n%s", err, first)
	}
	again, err := def.Render(prompts.Executor, prompts.ExecutorData{StepType: "custom"})
	if err != nil || again != first {
		t.Fatalf("second render differs: %v", err)
	}
	other, err := def.Render(prompts.Executor, prompts.ExecutorData{StepType: "analyst"})
	if err != nil || !strings.Contains(other, "You are a analyst agent") || other == first {
		t.Fatalf("another step type got the memoized text: %v\n%s", err, other)
	}
	dir := t.TempDir()
	write(t, dir, "executor.md.tmpl", "HOUSE EXECUTOR for {{.StepType}}")
	s, err := prompts.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.Render(prompts.Executor, prompts.ExecutorData{StepType: "custom"}); err != nil || out != "HOUSE EXECUTOR for custom" {
		t.Fatalf("override set: %q %v", out, err)
	}
	if out, _ := def.Render(prompts.Executor, prompts.ExecutorData{StepType: "custom"}); out != first {
		t.Fatal("the override changed the embedded set's memoized output")
	}
}
