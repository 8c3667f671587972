package core

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/prompts"
	"github.com/fathom-agents/fathom/tools"
)

// BuildRequest assembles the LLM request of the pending call from the state alone, so a
// call resumed after a crash asks exactly what the lost one asked. A step call gets the
// whole history (every step's opening message and transcript so far); the step runner
// uses buildContextRequest instead, which fits the history into the context budget.
func BuildRequest(s *messages.SessionState, p *prompts.Set, specs []llm.ToolSpec) (llm.Request, error) {
	pending := s.GetPending()
	if pending == nil {
		return llm.Request{}, fmt.Errorf("session %s has no pending call", s.GetSessionId())
	}
	req := llm.Request{Model: s.GetConfig().GetModel()}
	switch pending.GetPurpose() {
	case PurposePlan:
		sys, err := p.Render(prompts.Orchestrator, prompts.AgentData{
			AgentType: prompts.Orchestrator, Phase: prompts.PhasePlan, Goal: s.GetGoal(),
			Workspace: s.GetSessionId() + "/", MaxSteps: s.GetConfig().GetMaxSteps(),
		})
		if err != nil {
			return llm.Request{}, err
		}
		req.Messages = []llm.Message{
			{Role: "system", Content: sys},
			{Role: "user", Content: "Goal: " + s.GetGoal() + "\n"},
		}
		req.Messages = append(req.Messages, repromptMessages(pending)...)
	case PurposeStep:
		sys, err := stepSystemPrompt(s, p)
		if err != nil {
			return llm.Request{}, err
		}
		task, err := StepTaskPrompt(s)
		if err != nil {
			return llm.Request{}, err
		}
		req.Messages = []llm.Message{{Role: "system", Content: sys}}
		for _, m := range History(s) {
			req.Messages = append(req.Messages, m.LLM())
		}
		req.Messages = append(req.Messages, llm.Message{Role: "system", Content: task})
		req.Tools = specs
	case PurposeMessage:
		sys, err := FollowUpSystemPrompt(s, p)
		if err != nil {
			return llm.Request{}, err
		}
		req.Messages = []llm.Message{{Role: "system", Content: sys}}
		for _, m := range History(s) {
			req.Messages = append(req.Messages, m.LLM())
		}
		req.Messages = append(req.Messages, repromptMessages(pending)...)
	case PurposeReplan:
		_, replaced := revisionSplit(s, pending.GetStepId())
		room := uint32(0)
		if limit := s.GetConfig().GetMaxSteps(); limit > 0 {
			room = limit - min(limit, uint32(len(s.GetSteps())-len(replaced)))
		}
		sys, err := p.Render(prompts.Orchestrator, prompts.AgentData{
			AgentType: prompts.Orchestrator, Phase: prompts.PhaseReplan, Goal: s.GetGoal(),
			Workspace: s.GetSessionId() + "/", MaxSteps: room,
		})
		if err != nil {
			return llm.Request{}, err
		}
		req.Messages = []llm.Message{{Role: "system", Content: sys}, {Role: "user", Content: replanBrief(s, pending.GetStepId())}}
		req.Messages = append(req.Messages, repromptMessages(pending)...)
	case purposeSynthesize:
		sys, err := p.Render(prompts.Orchestrator, prompts.AgentData{
			AgentType: prompts.Orchestrator, Phase: prompts.PhaseSynthesize, Goal: s.GetGoal(), Workspace: s.GetSessionId() + "/",
		})
		if err != nil {
			return llm.Request{}, err
		}
		req.Messages = []llm.Message{{Role: "system", Content: sys}, {Role: "user", Content: synthesisBrief(s)}}
	default:
		return llm.Request{}, fmt.Errorf("session %s: unknown call purpose %q", s.GetSessionId(), pending.GetPurpose())
	}
	return req, nil
}

// ContextInfo describes context c, built from hist history messages with task the
// task message's seq, for llm_responded.
func ContextInfo(c *memory.Context, hist int, task uint64) *messages.ContextInfo {
	md := c.Metadata
	inContext := c.Task != nil
	for _, m := range c.Recent {
		inContext = inContext || (task != 0 && m.Seq == task)
	}
	return &messages.ContextInfo{
		TotalTokens: uint32(c.TotalTokens), Budget: uint32(c.Budget),
		RecentCount: uint32(md.RecentCount), SemanticCount: uint32(md.SemanticCount),
		HasSummary: md.HasSummary, SummaryThroughSeq: md.SummaryThrough, HistoryCount: uint32(hist),
		ElidedCount: uint32(md.Elided), TaskInContext: inContext,
	}
}

// stepSystemPrompt is the executor template for the current step's type, followed by
// the goal: the same text for every step of that type in the session, so that it and
// the history after it form a prefix that stays the same from call to call (prompt
// caching). What changes from step to step (the current step, the workspace listing)
// is StepTaskPrompt, sent after the history.
func stepSystemPrompt(s *messages.SessionState, p *prompts.Set) (string, error) {
	tmpl, rest, err := stepSystemPromptParts(s, p)
	return tmpl + rest, err
}

// stepSystemPromptParts is stepSystemPrompt in two parts: the executor template for the
// step's type (the same text for every step of that type, so its token count is cached)
// and what follows it (the goal).
func stepSystemPromptParts(s *messages.SessionState, p *prompts.Set) (tmpl, rest string, err error) {
	return StepSystemPromptPartsGoal(s, p, s.GetGoal())
}

// StepSystemPromptPartsGoal is stepSystemPromptParts with goal in place of the
// session's (contextGoal's, for a context that must fit its budget).
func StepSystemPromptPartsGoal(s *messages.SessionState, p *prompts.Set, goal string) (tmpl, rest string, err error) {
	st, err := CurrentStepState(s)
	if err != nil {
		return "", "", err
	}
	tmpl, err = p.Render(prompts.Executor, prompts.ExecutorData{StepType: st.GetStep().GetType()})
	if err != nil {
		return "", "", err
	}
	return tmpl, "\n\nGoal: " + goal + "\n", nil
}

// StepTaskPrompt is the system text of a step call that changes from step to step: the
// current step (kept in view so the model knows its task even when the step's opening
// message has left the recent tier) and the workspace listing. A step call sends it as
// a system message after the history, so the system prompt and the history before it
// stay a cacheable prefix across the session's steps.
func StepTaskPrompt(s *messages.SessionState) (string, error) {
	st, err := CurrentStepState(s)
	if err != nil {
		return "", err
	}
	return "Current step: " + st.GetStep().GetDescription() + "\n" + workspaceListing(s), nil
}

// GoalShare is the part of the context budget the goal may take in a system prompt.
const GoalShare = 8

// maxListedArtifacts bounds the workspace listing in a step's system prompt.
const maxListedArtifacts = 50

// workspaceListing names the session's artifacts (paths, never contents: the model reads
// what it needs with read_artifact), newest last, or "" when there are none.
func workspaceListing(s *messages.SessionState) string {
	arts := s.GetArtifacts()
	if len(arts) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nArtifacts in the workspace (read one with read_artifact when you need its content):\n")
	if len(arts) > maxListedArtifacts {
		fmt.Fprintf(&b, "- (%d older artifacts not shown; list_artifacts lists them all)\n", len(arts)-maxListedArtifacts)
		arts = arts[len(arts)-maxListedArtifacts:]
	}
	for _, a := range arts {
		fmt.Fprintf(&b, "- %s (%s, %d bytes)\n", a.GetPath(), a.GetContentType(), a.GetSize())
	}
	return b.String()
}

// CurrentStepState returns the state of the step the session is running, or an error
// when there is none.
func CurrentStepState(s *messages.SessionState) (*messages.StepState, error) {
	idx := int(s.GetCurrentStepIndex())
	if idx >= len(s.GetSteps()) {
		return nil, fmt.Errorf("session %s: step index %d out of range", s.GetSessionId(), idx)
	}
	return s.GetSteps()[idx], nil
}

// OpeningMessage is the user message that opens a step (recorded at its step_started).
func OpeningMessage(goal, description string) string {
	return fmt.Sprintf("Goal: %s\nStep: %s\n", goal, description)
}

// History is the orchestrator's recorded conversation in seq order, with stored token
// counts: for every step it ran itself (up to the current one), its opening user message
// (seq of step_started) and its transcript (the current attempt's); for every step a
// sub-agent completed, its opening message and the hand-off (recorded with its
// step_completed). A running sub-agent's work is not the orchestrator's: it appears once
// handed off. Earlier steps' final answers are their last assistant messages. After a
// follow-up message, the earlier turns (the state's thread) come first.
func History(s *messages.SessionState) []memory.Message {
	th := s.GetThread()
	if len(th) == 0 {
		return stepHistory(s)
	}
	out := make([]memory.Message, 0, len(th))
	for _, m := range th {
		out = append(out, transcriptMessage(m))
	}
	return append(out, stepHistory(s)...)
}

// stepHistory is the current turn's part of History: its steps' messages.
func stepHistory(s *messages.SessionState) []memory.Message {
	steps := s.GetSteps()
	n := 0
	for _, st := range steps {
		if InHistory(st) {
			n += 1 + len(st.GetTranscript())
		}
	}
	out := make([]memory.Message, 0, n)
	for _, st := range steps {
		if !InHistory(st) {
			continue
		}
		out = append(out, openingOf(s, st))
		for _, m := range st.GetTranscript() {
			out = append(out, transcriptMessage(m))
		}
	}
	// Steps that ran side by side interleave in the stream; the memory library reads
	// messages in seq order. A sequential plan is in order already.
	if !slices.IsSortedFunc(out, func(a, b memory.Message) int { return cmp.Compare(a.Seq, b.Seq) }) {
		slices.SortStableFunc(out, func(a, b memory.Message) int { return cmp.Compare(a.Seq, b.Seq) })
	}
	return out
}

// InHistory reports whether step st's messages are part of the orchestrator's history:
// a started step it runs itself, or a step a sub-agent completed.
func InHistory(st *messages.StepState) bool {
	if st.GetStartedSeq() == 0 {
		return false
	}
	return !delegated(st.GetStep()) || st.GetStatus() == messages.StepStatus_STEP_STATUS_COMPLETED
}

// ToolSpecs describes the registry's tools for the model.
func ToolSpecs(e *tools.Executor) []llm.ToolSpec {
	if e == nil || e.Registry == nil {
		return nil
	}
	ts := e.Registry.Tools()
	specs := make([]llm.ToolSpec, 0, len(ts))
	for _, t := range ts {
		specs = append(specs, llm.ToolSpec{Name: t.Name(), Description: t.Description(), Parameters: t.Schema()})
	}
	return specs
}
