// Package prompts owns Fathom's prompt templates: Go text/template files (*.md.tmpl)
// embedded in the binary, parsed once and cached.
//
// Templates:
//   - planner: the system prompt of the planning call; data [PlannerData].
//   - executor: the system prompt of a step's LLM call; data [ExecutorData].
//   - summarizer: the system prompt of a summary regeneration; data [SummarizerData].
//
// The first line of each template is a role marker ("FATHOM-ROLE: planner") that the
// built-in demo model (llm/mock) keys on.
package prompts

import (
	"bytes"
	"embed"
	"fmt"
	"sync"
	"text/template"
)

//go:embed *.md.tmpl
var files embed.FS

// Names of the templates.
const (
	Planner    = "planner"
	Executor   = "executor"
	Summarizer = "summarizer"
)

// PlannerData is the data of the planner template.
type PlannerData struct {
	// MaxSteps is the most steps a plan may have.
	MaxSteps uint32
}

// ExecutorData is the data of the executor template.
type ExecutorData struct {
	// StepType is the step's type (research, code, write, review, custom).
	StepType string
}

// SummarizerData is the data of the summarizer template.
type SummarizerData struct {
	// TargetTokens is the summary's target size; TargetWords the same in words (~3/4).
	TargetTokens, TargetWords int
}

// Set is a parsed set of templates.
type Set struct {
	t *template.Template
}

var (
	defaultOnce sync.Once
	defaultSet  *Set
	defaultErr  error
)

// Default returns the embedded templates, parsed once.
func Default() (*Set, error) {
	defaultOnce.Do(func() {
		t, err := template.New("prompts").Option("missingkey=error").ParseFS(files, "*.md.tmpl")
		if err != nil {
			defaultErr = fmt.Errorf("parse embedded prompts: %w", err)
			return
		}
		defaultSet = &Set{t: t}
	})
	return defaultSet, defaultErr
}

// Render executes template name ("planner", "executor") with data.
func (s *Set) Render(name string, data any) (string, error) {
	t := s.t.Lookup(name + ".md.tmpl")
	if t == nil {
		return "", fmt.Errorf("prompt template %q not found", name)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return "", fmt.Errorf("render prompt %q: %w", name, err)
	}
	return buf.String(), nil
}
