package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/messages"
)

// printer renders events for people (text) or programs (--json: one object per line).
type printer struct {
	w       io.Writer
	json    bool
	steps   int
	started time.Time
}

func newPrinter(w io.Writer, json bool) *printer { return &printer{w: w, json: json} }

func (p *printer) print(ev *messages.Event) error {
	if p.json {
		b, err := messages.MarshalEventJSON(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	_, err := io.WriteString(p.w, p.text(ev))
	return err
}

func (p *printer) text(ev *messages.Event) string {
	switch e := ev.GetPayload().(type) {
	case *messages.Event_SessionStarted:
		p.started = ev.At()
		return fmt.Sprintf("▶ goal: %s\n  model %s, up to %d steps and %d LLM calls\n", e.SessionStarted.GetGoal(),
			e.SessionStarted.GetConfig().GetModel(), e.SessionStarted.GetConfig().GetMaxSteps(), e.SessionStarted.GetConfig().GetMaxIterations())
	case *messages.Event_LlmRequested:
		if e.LlmRequested.GetPurpose() == "plan" {
			return "… planning\n"
		}
		return ""
	case *messages.Event_LlmResponded:
		u := e.LlmResponded.GetUsage()
		return fmt.Sprintf("  llm %s: %d+%d tokens in %s\n", e.LlmResponded.GetCallId(), u.GetInputTokens(), u.GetOutputTokens(), time.Duration(e.LlmResponded.GetDurationMs())*time.Millisecond)
	case *messages.Event_PlanCreated:
		p.steps = len(e.PlanCreated.GetSteps())
		var b strings.Builder
		fmt.Fprintf(&b, "✓ plan: %d steps\n", p.steps)
		for i, s := range e.PlanCreated.GetSteps() {
			fmt.Fprintf(&b, "  %d. [%s] %s\n", i+1, s.GetType(), s.GetDescription())
		}
		return b.String()
	case *messages.Event_StepStarted:
		return fmt.Sprintf("… step %d/%d (%s): %s\n", e.StepStarted.GetStepIndex()+1, p.steps, e.StepStarted.GetStepType(), e.StepStarted.GetDescription())
	case *messages.Event_StepCompleted:
		return fmt.Sprintf("✓ step %d/%d done\n%s\n", e.StepCompleted.GetStepIndex()+1, p.steps, indent(e.StepCompleted.GetOutput()))
	case *messages.Event_StepFailed:
		return fmt.Sprintf("✗ step %s failed: %s\n", e.StepFailed.GetStepId(), e.StepFailed.GetError())
	case *messages.Event_SessionCompleted:
		u := e.SessionCompleted.GetUsage()
		return fmt.Sprintf("✓ session completed in %s (%d tokens)\n", ev.At().Sub(p.started).Round(time.Millisecond), u.GetTotalTokens())
	case *messages.Event_SessionFailed:
		return fmt.Sprintf("✗ session failed: %s\n", e.SessionFailed.GetError())
	}
	return fmt.Sprintf("  %s (seq %d)\n", ev.Type(), ev.GetSeq())
}

func indent(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
