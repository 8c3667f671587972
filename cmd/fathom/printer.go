package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/live/feed"
	"github.com/fathom-agents/fathom/messages"
)

// printer renders events for people (text) or programs (--json: one object per line).
// In text mode it also prints the model's answers live as their deltas stream in.
type printer struct {
	// answerFlags are the node flags to repeat in the `fathom session input` hint
	// (replayFlags), each with a leading space.
	answerFlags string
	w           io.Writer
	json        bool
	steps       int
	started     time.Time
	// streaming is the call whose deltas are being printed ("" when none); attempt is
	// the provider attempt they belong to.
	streaming string
	attempt   uint32
	// streamedAnswer is the last answer already shown live, not to be printed twice.
	streamedAnswer string
	// lastOutput is the last step output shown (a result equal to it is not repeated).
	lastOutput string
	// outputMidLine is set while a tool's live output has an unfinished line.
	outputMidLine bool
	// lastSeq is the last event printed by watch.
	lastSeq uint64
	// skipUntilFork skips a fork's copied events up to its session_forked.
	skipUntilFork bool
	// ephemeral: the journal keeps nothing after this process (--journal memory), so a
	// session waiting for a human cannot be answered by a later command.
	ephemeral bool
}

// delta prints streamed text (text mode only: --json prints stored events alone).
func (p *printer) delta(d feed.Delta) error {
	if p.json || d.StepID == "" {
		return nil // --json prints stored events only; the plan prints once parsed
	}
	if d.Kind == feed.KindStdout || d.Kind == feed.KindStderr {
		return p.output(d)
	}
	var b strings.Builder
	switch {
	case d.CallID != p.streaming:
		p.streaming, p.attempt = d.CallID, d.Attempt
		b.WriteString("    ")
	case d.Attempt != p.attempt:
		p.attempt = d.Attempt
		fmt.Fprintf(&b, " [cut off; retrying, attempt %d]\n    ", d.Attempt)
	}
	b.WriteString(strings.ReplaceAll(d.Text, "\n", "\n    "))
	_, err := io.WriteString(p.w, b.String())
	return err
}

// output prints a running tool's stdout ("    │ ") and stderr ("    ! ") live, line by
// line; the tool_result that follows repeats it whole.
func (p *printer) output(d feed.Delta) error {
	mark := "    │ "
	if d.Kind == feed.KindStderr {
		mark = "    ! "
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(d.Text, "\n") {
		if line == "" {
			continue
		}
		if !p.outputMidLine {
			b.WriteString(mark)
		}
		b.WriteString(line)
		p.outputMidLine = !strings.HasSuffix(line, "\n")
	}
	_, err := io.WriteString(p.w, b.String())
	return err
}

func newPrinter(w io.Writer, json bool) *printer { return &printer{w: w, json: json} }

// resume gives a printer that joins a session midway (session input, watch --from) what
// the events it will not see carried: the plan's length and the start time.
func (p *printer) resume(s *messages.SessionState) {
	p.steps = len(s.GetSteps())
	if t := s.GetStartedAtUnixNano(); t != 0 {
		p.started = time.Unix(0, t)
	}
}

// stepOf renders step index i (0-based) as "i+1/N", or "i+1" while the plan's length is
// unknown.
func (p *printer) stepOf(i uint32) string {
	if p.steps <= 0 {
		return fmt.Sprint(i + 1)
	}
	return fmt.Sprintf("%d/%d", i+1, p.steps)
}

func (p *printer) print(ev *messages.Event) error {
	if p.json {
		b, err := messages.MarshalEventJSON(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	text := p.text(ev)
	if p.outputMidLine { // a tool's live output ended without a newline
		text, p.outputMidLine = "\n"+text, false
	}
	if p.streaming != "" {
		// The answer was printed as it streamed: end its line, and do not print the
		// step output again.
		if r, ok := ev.GetPayload().(*messages.Event_LlmResponded); ok && r.LlmResponded.GetCallId() == p.streaming {
			text = "\n" + text
			p.streaming, p.streamedAnswer = "", r.LlmResponded.GetContent()
		}
	}
	_, err := io.WriteString(p.w, text)
	return err
}

func (p *printer) text(ev *messages.Event) string {
	switch e := ev.GetPayload().(type) {
	case *messages.Event_SessionStarted:
		p.started = ev.At()
		return fmt.Sprintf("▶ goal: %s\n  model %s, up to %d steps and %d LLM calls\n", e.SessionStarted.GetGoal(),
			e.SessionStarted.GetConfig().GetModel(), e.SessionStarted.GetConfig().GetMaxSteps(), e.SessionStarted.GetConfig().GetMaxIterations())
	case *messages.Event_LlmRequested:
		switch e.LlmRequested.GetPurpose() {
		case "plan":
			return "… planning\n"
		case "synthesize":
			return "… writing the closing summary\n"
		case "replan":
			return fmt.Sprintf("… re-planning the remaining work after step %s failed\n", e.LlmRequested.GetStepId())
		}
		return ""
	case *messages.Event_LlmResponded:
		r := e.LlmResponded
		u := r.GetUsage()
		line := fmt.Sprintf("  %sllm %s: %d+%d tokens in %s", agentTag(r.GetSubAgentId()), r.GetCallId(), u.GetInputTokens(), u.GetOutputTokens(), time.Duration(r.GetDurationMs())*time.Millisecond)
		if r.GetCostUsd() > 0 {
			line += fmt.Sprintf(", $%.6f", r.GetCostUsd())
		}
		if n := len(r.GetToolCalls()); n > 0 {
			line += fmt.Sprintf(", %d tool call(s)", n)
		}
		return line + "\n"
	case *messages.Event_ToolCalled:
		c := e.ToolCalled
		return fmt.Sprintf("  %s→ tool %s %s\n", agentTag(c.GetSubAgentId()), c.GetTool(), truncateLine(c.GetArgs(), 160))
	case *messages.Event_ToolResult:
		r := e.ToolResult
		if f := r.GetError(); f != nil {
			return fmt.Sprintf("  %s✗ tool %s: %s error: %s\n", agentTag(r.GetSubAgentId()), r.GetTool(), f.GetErrorType(), truncateLine(f.GetMessage(), 200))
		}
		return fmt.Sprintf("  %s← tool %s (%s):\n%s\n", agentTag(r.GetSubAgentId()), r.GetTool(), time.Duration(r.GetDurationMs())*time.Millisecond, indent(truncateLine(r.GetResult(), 2000)))
	case *messages.Event_PlanFailed:
		f := e.PlanFailed
		if f.GetRetryAtUnixNano() != 0 {
			return fmt.Sprintf("✗ planning failed (attempt %d): %s; retrying at %s\n", f.GetAttempt(), f.GetError(), time.Unix(0, f.GetRetryAtUnixNano()).Format(time.TimeOnly))
		}
		return fmt.Sprintf("✗ planning failed: %s\n", f.GetError())
	case *messages.Event_PlanCreated:
		p.steps = len(e.PlanCreated.GetSteps())
		var b strings.Builder
		fmt.Fprintf(&b, "✓ plan: %d steps\n", p.steps)
		for i, s := range e.PlanCreated.GetSteps() {
			fmt.Fprintf(&b, "  %d. [%s] %s\n", i+1, s.GetType(), s.GetDescription())
		}
		return b.String()
	case *messages.Event_PlanRevised:
		r := e.PlanRevised
		p.steps += len(r.GetSteps()) - len(r.GetReplacedStepIds())
		var b strings.Builder
		fmt.Fprintf(&b, "↻ plan revised (%s) after step %s failed: %s replaced by %d new step(s), %d in all\n",
			r.GetPlanId(), r.GetFailedStepId(), strings.Join(r.GetReplacedStepIds(), ", "), len(r.GetSteps()), p.steps)
		first := p.steps - len(r.GetSteps())
		for i, s := range r.GetSteps() {
			fmt.Fprintf(&b, "  %d. [%s] %s\n", first+i+1, s.GetType(), s.GetDescription())
		}
		return b.String()
	case *messages.Event_StepStarted:
		return fmt.Sprintf("… step %s (%s): %s\n", p.stepOf(e.StepStarted.GetStepIndex()), e.StepStarted.GetStepType(), e.StepStarted.GetDescription())
	case *messages.Event_StepCompleted:
		p.lastOutput = e.StepCompleted.GetOutput()
		if out := e.StepCompleted.GetOutput(); out != "" && out == p.streamedAnswer {
			return fmt.Sprintf("✓ step %s done\n", p.stepOf(e.StepCompleted.GetStepIndex()))
		}
		return fmt.Sprintf("✓ step %s done\n%s\n", p.stepOf(e.StepCompleted.GetStepIndex()), indent(e.StepCompleted.GetOutput()))
	case *messages.Event_StepFailed:
		f := e.StepFailed
		if f.GetRetryAtUnixNano() != 0 {
			return fmt.Sprintf("✗ step %s failed (attempt %d): %s; retrying at %s\n", f.GetStepId(), f.GetAttempt(), f.GetError(), time.Unix(0, f.GetRetryAtUnixNano()).Format(time.TimeOnly))
		}
		return fmt.Sprintf("✗ step %s failed: %s\n", f.GetStepId(), f.GetError())
	case *messages.Event_SessionCompleted:
		u := e.SessionCompleted.GetUsage()
		cost := ""
		if c := e.SessionCompleted.GetCostUsd(); c > 0 {
			cost = fmt.Sprintf(", $%.6f", c)
		}
		took := ""
		if !p.started.IsZero() { // unknown when the printer joined midway
			took = " in " + ev.At().Sub(p.started).Round(time.Millisecond).String()
		}
		line := fmt.Sprintf("✓ session completed%s (%d tokens%s)\n", took, u.GetTotalTokens(), cost)
		if res := e.SessionCompleted.GetResult(); res != "" && res != p.streamedAnswer && res != p.lastOutput {
			line = indent(res) + "\n" + line
		}
		return line
	case *messages.Event_SessionFailed:
		return fmt.Sprintf("✗ session failed: %s\n", e.SessionFailed.GetError())
	case *messages.Event_SessionCancelled:
		return fmt.Sprintf("✗ session cancelled by %s: %s\n", e.SessionCancelled.GetBy(), e.SessionCancelled.GetReason())
	case *messages.Event_InterruptTriggered:
		it := e.InterruptTriggered
		line := fmt.Sprintf("⏸ %s %s step %d (%s)", it.GetReason(), it.GetPosition(), it.GetStepIndex()+1, it.GetStepId())
		if it.GetDeadlineUnixNano() != 0 {
			line += fmt.Sprintf("; %s at %s", it.GetDefaultAction(), time.Unix(0, it.GetDeadlineUnixNano()).UTC().Format(time.RFC3339))
		}
		return line + "\n"
	case *messages.Event_InterruptResumed:
		r := e.InterruptResumed
		line := fmt.Sprintf("▶ resumed by %s: %s", r.GetBy(), r.GetAction())
		if m := r.GetModifiedStep(); m != nil {
			line += fmt.Sprintf(" with step %s changed to %q", m.GetId(), m.GetDescription())
		}
		return line + "\n"
	case *messages.Event_SubagentStarted:
		a := e.SubagentStarted
		verb := "delegated to"
		if a.GetResumed() {
			verb = "resumed"
		}
		tools := strings.Join(a.GetTools(), ", ")
		if tools == "" {
			tools = "none"
		}
		return fmt.Sprintf("  ↳ step %s %s %s (%s); tools: %s\n", a.GetStepId(), verb, a.GetSubAgentId(), a.GetAgentType(), tools)
	case *messages.Event_SubagentCompleted:
		c := e.SubagentCompleted
		r := c.GetResult()
		return fmt.Sprintf("  ↲ %s handed off: %s (confidence %.2f, %d tokens, %s) → %s\n", c.GetSubAgentId(), r.GetStatus(), r.GetConfidence(),
			r.GetUsage().GetTotalTokens(), time.Duration(r.GetDurationMs())*time.Millisecond, c.GetAction())
	case *messages.Event_ArtifactWritten:
		a := e.ArtifactWritten
		return fmt.Sprintf("  %s✎ artifact %s (%d bytes, %s)\n", agentTag(a.GetSubAgentId()), a.GetPath(), a.GetSize(), a.GetContentType())
	case *messages.Event_MemorySaved:
		m := e.MemorySaved
		return fmt.Sprintf("  %s◆ remembered %s for user %s: %s\n", agentTag(m.GetSubAgentId()), m.GetMemoryId(), m.GetUserId(), m.GetText())
	case *messages.Event_MemoryDeleted:
		m := e.MemoryDeleted
		return fmt.Sprintf("  %s◇ forgot %s of user %s\n", agentTag(m.GetSubAgentId()), m.GetMemoryId(), m.GetUserId())
	case *messages.Event_BreakpointSet:
		bp := e.BreakpointSet.GetBreakpoint()
		if bp.GetTool() != "" {
			return fmt.Sprintf("  breakpoint %s: before %s calls%s%s\n", bp.GetId(), bp.GetTool(), prefixed(" in steps of type ", bp.GetStepType()), prefixed(" in step ", bp.GetStepId()))
		}
		return fmt.Sprintf("  breakpoint %s: %s steps%s%s\n", bp.GetId(), bp.GetPosition(), prefixed(" of type ", bp.GetStepType()), prefixed(" with id ", bp.GetStepId()))
	case *messages.Event_HitlRequested:
		return hitlRequestedText(ev.GetSessionId(), e.HitlRequested)
	case *messages.Event_HitlReceived:
		r := e.HitlReceived
		if r.GetBy() == "timeout" && r.GetDecision() == "reject" {
			return fmt.Sprintf("⌛ no decision on %s (step %s) before its deadline: the call is rejected and does not run\n", r.GetRequestId(), r.GetStepId())
		}
		if r.GetBy() == "timeout" {
			return fmt.Sprintf("⌛ no human answer for %s (step %s) before its deadline\n", r.GetRequestId(), r.GetStepId())
		}
		if r.GetDecision() != "" {
			return fmt.Sprintf("✓ human decided %s on %s (step %s): %s\n", r.GetDecision(), r.GetRequestId(), r.GetStepId(), truncateLine(r.GetInput(), 200))
		}
		return fmt.Sprintf("✓ human answered %s (step %s): %s\n", r.GetRequestId(), r.GetStepId(), truncateLine(r.GetInput(), 200))
	case *messages.Event_MessageReceived:
		m := e.MessageReceived
		p.steps, p.started = 0, ev.At() // the new turn's plan, if any, numbers its steps
		return fmt.Sprintf("» follow-up message (turn %d): %s\n", m.GetTurn(), truncateLine(m.GetContent(), 400))
	case *messages.Event_SessionForked:
		f := e.SessionForked
		p.started = ev.At() // a fork's own run starts here
		return fmt.Sprintf("⑂ forked from session %s after step %d (its seq %d); running on its own from here\n", f.GetSourceSessionId(), f.GetStepIndex(), f.GetSourceSeq())
	}
	return fmt.Sprintf("  %s (seq %d)\n", ev.Type(), ev.GetSeq())
}

// agentTag prefixes a sub-agent's lines with its id.
func agentTag(subAgentID string) string {
	if subAgentID == "" {
		return ""
	}
	return "[" + subAgentID + "] "
}

// truncateLine shortens s to about n bytes for a one-line display.
func truncateLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

func indent(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// decisionInputs are the JSON answers of the approval decisions.
var decisionInputs = map[string]string{
	"approve": `{"decision":"approve"}`,
	"edit":    `{"decision":"edit","args":{...}}`,
	"reject":  `{"decision":"reject","message":"..."}`,
}

// decisionHint lists the JSON answers of the allowed decisions (all three when the
// request names none).
func decisionHint(allowed []string) string {
	if len(allowed) == 0 {
		allowed = []string{"approve", "edit", "reject"}
	}
	hints := make([]string, 0, len(allowed))
	for _, d := range allowed {
		if in, ok := decisionInputs[d]; ok {
			hints = append(hints, in)
		}
	}
	return strings.Join(hints, " | ")
}

// defaultActionText says what happens at a request's deadline: for an approval the
// default action "continue" rejects the call.
func defaultActionText(r *messages.HitlRequested) string {
	switch {
	case r.GetDefaultAction() == "fail":
		return "fail (the session fails)"
	case r.GetKind() == "approval":
		return "reject (the call does not run)"
	}
	return r.GetDefaultAction()
}

// hitlRequestedText shows a human-input request with how to answer it.
func hitlRequestedText(sessionID string, r *messages.HitlRequested) string {
	var b strings.Builder
	who := "step " + r.GetStepId()
	switch r.GetKind() {
	case "tool":
		who = "the model (ask_human in step " + r.GetStepId() + ")"
	case "approval":
		who = agentTag(r.GetSubAgentId()) + "the call of " + r.GetTool() + " in step " + r.GetStepId()
		fmt.Fprintf(&b, "? %s waits for approval: %s(%s)\n", who, r.GetTool(), truncateLine(r.GetArgs(), 300))
		fmt.Fprintf(&b, "  decide with JSON: %s\n", decisionHint(r.GetAllowedDecisions()))
	}
	if r.GetKind() != "approval" {
		fmt.Fprintf(&b, "? %s asks a human: %s\n", who, r.GetQuestion())
	}
	if len(r.GetOptions()) > 0 {
		fmt.Fprintf(&b, "  options: %s\n", strings.Join(r.GetOptions(), " | "))
	}
	if r.GetInputSchema() != "" {
		fmt.Fprintf(&b, "  answer schema: %s\n", truncateLine(r.GetInputSchema(), 300))
	}
	if r.GetDeadlineUnixNano() != 0 {
		fmt.Fprintf(&b, "  waiting until %s, then: %s\n", time.Unix(0, r.GetDeadlineUnixNano()).UTC().Format(time.RFC3339), defaultActionText(r))
	}
	req := ""
	if r.GetKind() == "tool" || r.GetKind() == "approval" {
		req = " --request-id " + r.GetRequestId()
	}
	fmt.Fprintf(&b, "  answer with: fathom session input%s %s %s JSON\n", req, sessionID, r.GetStepId())
	return b.String()
}
