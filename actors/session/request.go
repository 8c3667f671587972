package session

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/prompts"
	"github.com/fathom-agents/fathom/tools"
)

// buildRequest assembles the LLM request of the pending call from the state alone, so a
// call resumed after a crash asks exactly what the lost one asked. A step call gets the
// whole history (every step's opening message and transcript so far); the step runner
// uses buildContextRequest instead, which fits the history into the context budget.
func buildRequest(s *messages.SessionState, p *prompts.Set, specs []llm.ToolSpec) (llm.Request, error) {
	pending := s.GetPending()
	if pending == nil {
		return llm.Request{}, fmt.Errorf("session %s has no pending call", s.GetSessionId())
	}
	req := llm.Request{Model: s.GetConfig().GetModel()}
	switch pending.GetPurpose() {
	case purposePlan:
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
	case purposeStep:
		sys, err := stepSystemPrompt(s, p)
		if err != nil {
			return llm.Request{}, err
		}
		req.Messages = []llm.Message{{Role: "system", Content: sys}}
		for _, m := range history(s) {
			req.Messages = append(req.Messages, m.LLM())
		}
		req.Tools = specs
	case purposeReplan:
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

// buildContextRequest is buildRequest with a step call's history fitted into the
// context budget by memory.BuildContext: the system prompt (executor template, goal and
// current step), the rolling summary, semantic hits for the step description (from
// d.Vectors; a failed search means no hits) and the most recent messages. It reads s
// only (committed state is never mutated), so the step runner calls it off the grain's
// mailbox. info describes the context (nil for a plan call).
func buildContextRequest(ctx context.Context, d *Deps, s *messages.SessionState, callID string) (req llm.Request, info *messages.ContextInfo, err error) {
	if sa := subAgentByCall(s, callID); sa != nil {
		return buildSubAgentRequest(ctx, d, s, sa)
	}
	if s.GetPending().GetPurpose() != purposeStep {
		req, err = buildRequest(s, d.Prompts, d.specs)
		return req, nil, err
	}
	st, err := currentStepState(s)
	if err != nil {
		return llm.Request{}, nil, err
	}
	model := s.GetConfig().GetModel()
	tmpl, rest, err := stepSystemPromptPartsGoal(s, d.Prompts, contextGoal(d, s))
	if err != nil {
		return llm.Request{}, nil, err
	}
	sys := tmpl + rest
	hist := history(s)
	in := memory.Input{
		// The step's opening message states its task: it stays in the context.
		Task:         st.GetStartedSeq(),
		Origin:       "session " + s.GetSessionId(),
		SystemPrompt: sys,
		// The template's count is cached (tokenizing it was a third of a step's CPU);
		// counting the two parts apart can only add a token at the seam: an upper bound,
		// which is what a budget needs.
		SystemTokens: d.templateTokens(s.GetConfig().GetModel(), tmpl) + d.Config.countText(s.GetConfig().GetModel(), rest),
		Messages:     hist,
		Hits:         searchHits(ctx, d, s.GetSessionId(), st.GetStep().GetDescription()),
		Now:          d.Now(),
	}
	if sum := s.GetSummary(); sum.GetContent() != "" {
		in.Summary = &memory.Summary{Content: sum.GetContent(), Tokens: int(sum.GetTokens()), Through: sum.GetCoveredThroughSeq()}
	}
	cc := d.Config.contextConfig()
	cc.Counter = d.Config.counterFor(model)
	c, err := memory.BuildContext(cc, in)
	if err != nil {
		return llm.Request{}, nil, fmt.Errorf("session %s: build context: %w", s.GetSessionId(), err)
	}
	info = contextInfo(c, len(hist), in.Task)
	return llm.Request{Model: s.GetConfig().GetModel(), Messages: c.Messages(), Tools: d.specs}, info, nil
}

// contextInfo describes context c, built from hist history messages with task the
// task message's seq, for llm_responded.
func contextInfo(c *memory.Context, hist int, task uint64) *messages.ContextInfo {
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

// searchHits embeds query and searches the session's vectors. Any failure means no
// hits (logged): the semantic tier is an aid, never a reason to fail a call.
func searchHits(ctx context.Context, d *Deps, sessionID, query string) []memory.Hit {
	if d.Embedder == nil || d.Vectors == nil || strings.TrimSpace(query) == "" {
		return nil
	}
	vecs, err := d.Embedder.Embed(ctx, []string{query})
	if err == nil && len(vecs) != 1 {
		err = fmt.Errorf("embedder returned %d vectors for 1 text", len(vecs))
	}
	var hits []persistence.VectorHit
	if err == nil {
		hits, err = d.Vectors.Search(ctx, sessionID, vecs[0], d.Config.topK())
	}
	if err != nil {
		d.Logger.Warn("semantic search failed; no semantic hits", "session_id", sessionID, "error", err)
		return nil
	}
	out := make([]memory.Hit, len(hits))
	for i, h := range hits {
		out[i] = memory.Hit{Seq: h.Seq, Score: h.Score}
	}
	return out
}

// stepSystemPrompt is the executor template for the current step's type, followed by
// the goal and the current step (kept in the system prompt so the model knows its task
// even when the step's opening message has left the recent tier).
func stepSystemPrompt(s *messages.SessionState, p *prompts.Set) (string, error) {
	tmpl, rest, err := stepSystemPromptParts(s, p)
	return tmpl + rest, err
}

// stepSystemPromptParts is stepSystemPrompt in two parts: the executor template for the
// step's type (the same text for every step of that type, so its token count is cached)
// and what follows it for this step (goal, current step, workspace listing).
func stepSystemPromptParts(s *messages.SessionState, p *prompts.Set) (tmpl, rest string, err error) {
	return stepSystemPromptPartsGoal(s, p, s.GetGoal())
}

// stepSystemPromptPartsGoal is stepSystemPromptParts with goal in place of the
// session's (contextGoal's, for a context that must fit its budget).
func stepSystemPromptPartsGoal(s *messages.SessionState, p *prompts.Set, goal string) (tmpl, rest string, err error) {
	st, err := currentStepState(s)
	if err != nil {
		return "", "", err
	}
	tmpl, err = p.Render(prompts.Executor, prompts.ExecutorData{StepType: st.GetStep().GetType()})
	if err != nil {
		return "", "", err
	}
	return tmpl, fmt.Sprintf("\n\nGoal: %s\nCurrent step: %s\n%s", goal, st.GetStep().GetDescription(), workspaceListing(s)), nil
}

// goalShare is the part of the context budget the goal may take in a system prompt.
const goalShare = 8

// contextGoal is the session's goal as a budgeted system prompt states it: whole when it
// costs at most 1/goalShare of the context budget, else elided to that (its head and
// tail, with a note: the whole goal is session_started, event seq 1), so that a long
// goal cannot crowd the step's own messages out of the context.
func contextGoal(d *Deps, s *messages.SessionState) string {
	goal := s.GetGoal()
	limit := d.Config.contextConfig().Budget / goalShare
	if len(goal) <= limit { // no token is shorter than a byte
		return goal
	}
	tok := d.Config.tokenizerFor(s.GetConfig().GetModel())
	if tok == nil {
		return goal
	}
	m := memory.Message{Seq: 1, Role: "user", Content: goal, Tokens: tok.CountMessage(llm.Message{Role: "user", Content: goal})}
	if e, ok := memory.Elide(m, limit, tok, "session "+s.GetSessionId()); ok {
		return e.Content
	}
	return goal
}

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

func currentStepState(s *messages.SessionState) (*messages.StepState, error) {
	idx := int(s.GetCurrentStepIndex())
	if idx >= len(s.GetSteps()) {
		return nil, fmt.Errorf("session %s: step index %d out of range", s.GetSessionId(), idx)
	}
	return s.GetSteps()[idx], nil
}

// openingMessage is the user message that opens a step (recorded at its step_started).
func openingMessage(goal, description string) string {
	return fmt.Sprintf("Goal: %s\nStep: %s\n", goal, description)
}

// history is the orchestrator's recorded conversation in seq order, with stored token
// counts: for every step it ran itself (up to the current one), its opening user message
// (seq of step_started) and its transcript (the current attempt's); for every step a
// sub-agent completed, its opening message and the hand-off (recorded with its
// step_completed). A running sub-agent's work is not the orchestrator's: it appears once
// handed off. Earlier steps' final answers are their last assistant messages.
func history(s *messages.SessionState) []memory.Message {
	steps := s.GetSteps()
	n := 0
	for _, st := range steps {
		if inHistory(st) {
			n += 1 + len(st.GetTranscript())
		}
	}
	out := make([]memory.Message, 0, n)
	for _, st := range steps {
		if !inHistory(st) {
			continue
		}
		out = append(out, memory.Message{
			Seq: st.GetStartedSeq(), Role: "user", Content: openingMessage(s.GetGoal(), st.GetStep().GetDescription()),
			Tokens: int(st.GetOpeningTokens()),
		})
		for _, m := range st.GetTranscript() {
			msg := memory.Message{Seq: m.GetSeq(), Role: m.GetRole(), Content: m.GetContent(), ToolCallID: m.GetToolCallId(), Tokens: int(m.GetTokens())}
			for _, c := range m.GetToolCalls() {
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.GetId(), Name: c.GetName(), Arguments: c.GetArguments()})
			}
			out = append(out, msg)
		}
	}
	// Steps that ran side by side interleave in the stream; the memory library reads
	// messages in seq order. A sequential plan is in order already.
	if !slices.IsSortedFunc(out, func(a, b memory.Message) int { return cmp.Compare(a.Seq, b.Seq) }) {
		slices.SortStableFunc(out, func(a, b memory.Message) int { return cmp.Compare(a.Seq, b.Seq) })
	}
	return out
}

// inHistory reports whether step st's messages are part of the orchestrator's history:
// a started step it runs itself, or a step a sub-agent completed.
func inHistory(st *messages.StepState) bool {
	if st.GetStartedSeq() == 0 {
		return false
	}
	return !delegated(st.GetStep()) || st.GetStatus() == messages.StepStatus_STEP_STATUS_COMPLETED
}

// toolSpecs describes the registry's tools for the model.
func toolSpecs(e *tools.Executor) []llm.ToolSpec {
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
