package prompts

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
)

//go:embed *.md.tmpl _shared/*.md.tmpl
var files embed.FS

// Ext is the file extension of a template.
const Ext = ".md.tmpl"

// SharedDir is the folder of the partials, relative to the templates' root.
const SharedDir = "_shared"

// Names of the top-level templates.
const (
	Orchestrator = "orchestrator"
	Researcher   = "researcher"
	Coder        = "coder"
	Writer       = "writer"
	Reviewer     = "reviewer"
	Executor     = "executor"
	Summarizer   = "summarizer"
)

// Names of the shared partials.
const (
	ArtifactConventions = SharedDir + "/artifact_conventions"
	ToolGuidelines      = SharedDir + "/tool_guidelines"
	HITLProtocols       = SharedDir + "/hitl_protocols"
	Handoff             = SharedDir + "/handoff"
)

// Phases of the orchestrator template.
const (
	// PhasePlan is the planning call: the answer is the JSON plan.
	PhasePlan = "plan"
	// PhaseSynthesize is the closing call: the answer is the session's summary.
	PhaseSynthesize = "synthesize"
	// PhaseReplan is the call after a step failed for good: the answer is the JSON plan
	// of the remaining work (MaxSteps is the room left for new steps).
	PhaseReplan = "replan"
)

// SubAgentTypes maps a plan step type to the sub-agent (and template) it is delegated
// to. Other step types (human_input, custom) are not delegated.
var SubAgentTypes = map[string]string{
	"research": Researcher,
	"code":     Coder,
	"write":    Writer,
	"review":   Reviewer,
}

// AgentData is the data of the orchestrator and sub-agent templates, and of the
// partials.
type AgentData struct {
	// AgentType is orchestrator | researcher | coder | writer | reviewer.
	AgentType string
	// Goal is the session's goal.
	Goal string
	// Tools are the names of the tools the agent may call (empty: none).
	Tools []string
	// Workspace is the session's artifact prefix, "{session_id}/"; an artifact's path
	// is Workspace + "{type}/{filename}".
	Workspace string
	// Step is the plan step the agent works on (zero for the orchestrator).
	Step Step
	// MaxSteps is the most steps a plan may have (orchestrator).
	MaxSteps uint32
	// MaxIterations bounds the agent's model calls (0: not stated).
	MaxIterations uint32
	// Phase is the orchestrator's phase: PhasePlan ("" means plan too),
	// PhaseSynthesize or PhaseReplan.
	Phase string
}

// Step is a plan step as the templates see it.
type Step struct {
	// ID is the step's id in the plan ("s2").
	ID string
	// Type is research | code | write | review | human_input | custom.
	Type string
	// Description says what the step must deliver.
	Description string
}

// ExecutorData is the data of the executor template.
type ExecutorData struct {
	// StepType is the step's type (custom, or any type run without a sub-agent).
	StepType string
}

// SummarizerData is the data of the summarizer template.
type SummarizerData struct {
	// TargetTokens is the summary's target size; TargetWords the same in words (~3/4).
	TargetTokens, TargetWords int
}

// TemplateError is a template that failed to parse, or to render with the sample data
// Load and Default check every template with.
type TemplateError struct {
	// Name is the template's name ("coder", "_shared/tool_guidelines").
	Name string
	// File is where the template came from: the override's path, or
	// "prompts/<name>.md.tmpl" for an embedded one.
	File string
	// Line and Column locate the error (0 when text/template did not say).
	Line, Column int
	// Detail is text/template's message without its "template: name:line:" prefix.
	Detail string
	// Err is text/template's error.
	Err error
}

// Error renders "file:line[:column]: detail".
func (e *TemplateError) Error() string { return e.File + e.pos() + ": " + e.Detail }

func (e *TemplateError) pos() string {
	switch {
	case e.Line == 0:
		return ""
	case e.Column == 0:
		return ":" + strconv.Itoa(e.Line)
	}
	return ":" + strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Column)
}

// Unwrap returns text/template's error.
func (e *TemplateError) Unwrap() error { return e.Err }

// source is one template's text and where it came from.
type source struct {
	name, file, text string
}

// Set is a parsed and checked set of templates. It is safe for concurrent use.
type Set struct {
	t         *template.Template
	files     map[string]string // template name → file
	overrides []string          // names of the overridden templates
	agents    []AgentInfo       // the agents of the node's own (WithAgents)

	// rendered memoizes Render for data that is plain values (renderKey): every step
	// call renders the executor's prompt, and text/template was a twentieth of a step's
	// CPU. Templates are pure (their functions are join, has and the set's fixed agent
	// list) and a Set never changes, so an output depends on its name and data alone.
	// At most maxRendered outputs are kept; past that, Render just renders.
	rendered  sync.Map // renderKey → string
	nRendered atomic.Int32
}

// maxRendered bounds a Set's memoized outputs.
const maxRendered = 1024

// renderKey is a memoized output's key. Only data of the listed plain types is memoized
// (cacheable): values that compare by content and hold no slice or pointer.
type renderKey struct {
	name string
	data any
}

// cacheable says whether Render may memoize its output for data.
func cacheable(data any) bool {
	switch data.(type) {
	case ExecutorData, SummarizerData:
		return true
	}
	return false
}

var (
	defaultOnce sync.Once
	defaultSet  *Set
	defaultErr  error
)

// Default returns the embedded templates, parsed and checked once.
func Default() (*Set, error) {
	defaultOnce.Do(func() {
		srcs, err := embedded()
		if err == nil {
			defaultSet, err = build(srcs, nil)
		}
		if err != nil {
			defaultErr = fmt.Errorf("embedded prompts: %w", err)
		}
	})
	return defaultSet, defaultErr
}

// Load returns the embedded templates with those found in dir laid over them, file by
// file: dir/coder.md.tmpl replaces "coder", dir/_shared/tool_guidelines.md.tmpl
// replaces "_shared/tool_guidelines", and dir/_shared/<new>.md.tmpl adds a partial.
// A top-level file that names no template is an error (a typo would otherwise be
// ignored); files without the .md.tmpl extension are ignored. An empty dir means
// Default. The set is parsed and every template rendered once with sample data: any
// failure is a [*TemplateError] naming the file and line.
func Load(dir string) (*Set, error) {
	if dir == "" {
		return Default()
	}
	srcs, err := embedded()
	if err != nil {
		return nil, fmt.Errorf("embedded prompts: %w", err)
	}
	over, err := readDir(dir, srcs)
	if err != nil {
		return nil, fmt.Errorf("prompts dir %s: %w", dir, err)
	}
	s, err := build(srcs, over)
	if err != nil {
		return nil, fmt.Errorf("prompts dir %s: %w", dir, err)
	}
	return s, nil
}

// ErrUnknownTemplate is returned (wrapped) by Render for a name the set has no template
// for, e.g. an agent type without a prompt.
var ErrUnknownTemplate = errors.New("no such prompt template")

// Render executes template name with data. Runs of blank lines in the output are
// collapsed to one. A name without a template is an [ErrUnknownTemplate]; a template
// that fails to execute is a [*TemplateError].
func (s *Set) Render(name string, data any) (string, error) {
	memo := cacheable(data)
	if memo {
		if out, ok := s.rendered.Load(renderKey{name, data}); ok {
			return out.(string), nil
		}
	}
	t := s.t.Lookup(name)
	if t == nil {
		return "", fmt.Errorf("prompt template %q: %w", name, ErrUnknownTemplate)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return "", fmt.Errorf("render prompt %q: %w", name, s.templateError(name, err))
	}
	out := blankRuns.ReplaceAllString(buf.String(), "\n\n")
	if memo && s.nRendered.Load() < maxRendered {
		if _, loaded := s.rendered.LoadOrStore(renderKey{name, data}, out); !loaded {
			s.nRendered.Add(1)
		}
	}
	return out, nil
}

// blankRuns matches two or more blank lines in a row: Render keeps one, so partials and
// conditional sections can be laid out freely.
var blankRuns = regexp.MustCompile(`\n(?:[ \t]*\n){2,}`)

// Names returns the names of the set's templates, sorted.
func (s *Set) Names() []string {
	names := make([]string, 0, len(s.files))
	for n := range s.files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// File returns where template name came from ("" for an unknown name).
func (s *Set) File(name string) string { return s.files[name] }

// Overrides returns the names of the templates read from the override directory,
// sorted (nil for the embedded set).
func (s *Set) Overrides() []string { return slices.Clone(s.overrides) }

// funcs are the functions templates may call besides text/template's built-ins.
var funcs = template.FuncMap{
	"join": strings.Join,
	"has":  slices.Contains[[]string],
}

// embedded reads the embedded templates.
func embedded() (map[string]source, error) {
	out := map[string]source{}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, Ext) {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(p, Ext)
		out[name] = source{name: name, file: path.Join("prompts", p), text: string(b)}
		return nil
	})
	return out, err
}

// readDir reads the override templates of dir: its *.md.tmpl files and those of its
// _shared folder.
func readDir(dir string, defaults map[string]source) (map[string]source, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, errors.New("not a directory")
	}
	out := map[string]source{}
	for _, sub := range []string{"", SharedDir} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if errors.Is(err, fs.ErrNotExist) && sub != "" {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), Ext) {
				continue
			}
			name := path.Join(sub, strings.TrimSuffix(e.Name(), Ext))
			file := filepath.Join(dir, sub, e.Name())
			if _, ok := defaults[name]; !ok && sub == "" {
				return nil, fmt.Errorf("%s: no template is named %q (templates: %s; new partials go in %s/)",
					file, name, strings.Join(topLevel(defaults), ", "), SharedDir)
			}
			b, err := os.ReadFile(file)
			if err != nil {
				return nil, err
			}
			if sub == "" && strings.TrimSpace(string(b)) == "" {
				return nil, &TemplateError{Name: name, File: file, Detail: "the template is empty (an empty partial is allowed, an empty prompt is not)"}
			}
			out[name] = source{name: name, file: file, text: string(b)}
		}
	}
	return out, nil
}

func topLevel(srcs map[string]source) []string {
	var names []string
	for n := range srcs {
		if !strings.HasPrefix(n, SharedDir+"/") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// build parses defaults with over laid on top and checks the result.
func build(defaults, over map[string]source) (*Set, error) {
	srcs := make(map[string]source, len(defaults)+len(over))
	for n, src := range defaults {
		srcs[n] = src
	}
	s := &Set{files: map[string]string{}}
	for n, src := range over {
		srcs[n] = src
		s.overrides = append(s.overrides, n)
	}
	sort.Strings(s.overrides)
	names := make([]string, 0, len(srcs))
	for n, src := range srcs {
		names = append(names, n)
		s.files[n] = src.file
	}
	sort.Strings(names)
	s.t = template.New("prompts").Option("missingkey=error").Funcs(funcs).Funcs(template.FuncMap{"agents": s.agentList})
	for _, n := range names {
		if _, err := s.t.New(n).Parse(srcs[n].text); err != nil {
			return nil, s.templateError(n, err)
		}
	}
	if err := s.check(names); err != nil {
		return nil, err
	}
	return s, nil
}

// check renders every template once with sample data, so errors that text/template
// finds only when executing (a field that does not exist, a partial that is not
// defined, a wrong function argument) surface at load.
func (s *Set) check(names []string) error {
	agents := sampleAgents()
	all := make([]any, len(agents))
	for i, a := range agents {
		all[i] = a
	}
	for _, n := range names {
		var samples []any
		switch {
		case n == Executor:
			samples = []any{ExecutorData{StepType: "custom"}}
		case n == Summarizer:
			samples = []any{SummarizerData{TargetTokens: 2000, TargetWords: 1500}}
		case n == Orchestrator:
			samples = []any{agents[0], agents[1]}
		case strings.HasPrefix(n, SharedDir+"/"):
			samples = all
		default:
			for _, a := range agents {
				if a.AgentType == n {
					samples = append(samples, a)
				}
			}
			if len(samples) == 0 {
				samples = all
			}
		}
		for _, d := range samples {
			var buf bytes.Buffer
			if err := s.t.ExecuteTemplate(&buf, n, d); err != nil {
				return s.templateError(n, err)
			}
		}
	}
	return nil
}

// sampleAgents is the data Load checks the agent templates and partials with: the
// orchestrator in each phase, then each sub-agent with its default tools.
func sampleAgents() []AgentData {
	base := AgentData{Goal: "Compare two sorting algorithms and report which is faster", Workspace: "s-sample/", MaxSteps: 10, MaxIterations: 12}
	orch := base
	orch.AgentType, orch.Phase = Orchestrator, PhasePlan
	synth := orch
	synth.Phase = PhaseSynthesize
	replan := orch
	replan.Phase, replan.MaxSteps = PhaseReplan, 3
	out := []AgentData{orch, synth, replan}
	for _, typ := range []string{"research", "code", "write", "review"} {
		a := base
		a.AgentType = SubAgentTypes[typ]
		a.Tools = DefaultTools[a.AgentType]
		a.Step = Step{ID: "s1", Type: typ, Description: "Sample step description"}
		out = append(out, a)
	}
	return out
}

// DefaultTools are the tools each sub-agent type gets by default.
var DefaultTools = map[string][]string{
	Researcher: {"web_search", "write_todos", "write_artifact", "read_artifact", "list_artifacts", "ask_human"},
	Coder:      {"code_execute", "write_artifact", "read_artifact", "list_artifacts", "write_todos", "ask_human"},
	Writer:     {"write_artifact", "read_artifact", "list_artifacts", "ask_human"},
	Reviewer:   {"read_artifact", "list_artifacts", "code_execute", "ask_human"},
}

// errPosition matches the "LINE[:COL]: " that follows "template: NAME:" in
// text/template's errors.
var errPosition = regexp.MustCompile(`^(\d+)(?::(\d+))?: `)

// templateError turns a text/template error met while parsing or executing template
// name into a TemplateError naming the file the failing line is in (a partial's, when
// the error is inside one).
func (s *Set) templateError(name string, err error) *TemplateError {
	te := &TemplateError{Name: name, File: s.files[name], Detail: err.Error(), Err: err}
	// The message starts with "template: NAME:" where NAME is the template whose text
	// holds the failing node: find the longest known name it starts with.
	msg, best := err.Error(), ""
	for n := range s.files {
		if strings.HasPrefix(msg, "template: "+n+":") && len(n) > len(best) {
			best = n
		}
	}
	if best == "" {
		return te
	}
	te.Name, te.File = best, s.files[best]
	rest := strings.TrimPrefix(msg, "template: "+best+":")
	m := errPosition.FindStringSubmatch(rest)
	if m == nil {
		te.Detail = strings.TrimSpace(rest)
		return te
	}
	te.Line, _ = strconv.Atoi(m[1])
	if m[2] != "" {
		te.Column, _ = strconv.Atoi(m[2])
	}
	te.Detail = rest[len(m[0]):]
	return te
}
