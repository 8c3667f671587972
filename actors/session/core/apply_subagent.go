package core

import (
	"fmt"
	"slices"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// Apply's cases for a sub-agent's events: they change SessionState.sub_agents[id] (its
// isolated context) and the session's totals, never the orchestrator's steps.

// subAgentOf is s's own copy (ownSubAgent) of running sub-agent id.
func subAgentOf(s *messages.SessionState, id, what string) (*messages.SubagentState, error) {
	sa := s.GetSubAgents()[id]
	if sa == nil || !sa.GetRunning() {
		return nil, fmt.Errorf("%w: %s for sub-agent %q, which is not running", ErrBadEvent, what, id)
	}
	return ownSubAgent(s, id), nil
}

// ownSubAgent replaces sub-agent id of s (which must exist) by a copy and returns the
// copy: like steps (ownStep), sub-agents are shared with the state s was cloned from until
// Apply changes one.
func ownSubAgent(s *messages.SessionState, id string) *messages.SubagentState {
	sa := cloneSubAgent(s.SubAgents[id])
	s.SubAgents[id] = sa
	return sa
}

func applySubAgentStarted(s *messages.SessionState, e *messages.SubagentStarted, ev *messages.Event) error {
	id := e.GetSubAgentId()
	if id == "" {
		return fmt.Errorf("%w: subagent_started without a sub_agent_id", ErrBadEvent)
	}
	if _, err := stepAt(s, e.GetStepIndex(), e.GetStepId()); err != nil {
		return err
	}
	if s.SubAgents == nil {
		s.SubAgents = map[string]*messages.SubagentState{}
	}
	sa := s.SubAgents[id]
	switch {
	case sa == nil:
		sa = &messages.SubagentState{Id: id, AgentType: e.GetAgentType()}
		s.SubAgents[id] = sa
	case sa.GetRunning():
		return fmt.Errorf("%w: subagent_started for %q, which is running", ErrBadEvent, id)
	case sa.GetAgentType() != e.GetAgentType():
		return fmt.Errorf("%w: sub-agent %q is a %s, not a %s", ErrBadEvent, id, sa.GetAgentType(), e.GetAgentType())
	default:
		sa = ownSubAgent(s, id)
	}
	sa.StepId, sa.StepIndex, sa.Running = e.GetStepId(), e.GetStepIndex(), true
	sa.MaxIterations, sa.Tools, sa.Iterations = e.GetMaxIterations(), e.GetTools(), 0
	sa.Runs++
	sa.RunStartedSeq, sa.RunStartedAtUnixNano = ev.GetSeq(), ev.GetAtUnixNano()
	sa.RunToolsUsed, sa.RunArtifactsCreated, sa.RunArtifactsModified, sa.RunUsage, sa.RunCostUsd = nil, nil, nil, nil, 0
	sa.RunConfigError = ""
	sa.Pending, sa.PendingTools = nil, nil
	sa.Transcript = append(sa.Transcript, &messages.TranscriptEntry{Role: "user", Content: e.GetTask(), Seq: ev.GetSeq(), Tokens: e.GetTaskTokens()})
	return nil
}

func applySubAgentRequested(s *messages.SessionState, r *messages.LlmRequested, ev *messages.Event) error {
	sa, err := subAgentOf(s, r.GetSubAgentId(), "llm_requested")
	if err != nil {
		return err
	}
	if sa.Pending != nil || len(sa.PendingTools) > 0 {
		return fmt.Errorf("%w: llm_requested %q while sub-agent %s is busy", ErrBadEvent, r.GetCallId(), sa.GetId())
	}
	sa.Pending = &messages.PendingCall{CallId: r.GetCallId(), StepId: r.GetStepId(), Purpose: r.GetPurpose(), RequestedSeq: ev.GetSeq()}
	sa.LlmCalls++
	sa.Iterations = r.GetIteration()
	if st := stepOf(s, sa); st != nil {
		st.LlmCalls++ // the timeline's count for the step the sub-agent runs
	}
	return nil
}

func applySubAgentResponded(s *messages.SessionState, r *messages.LlmResponded, ev *messages.Event) error {
	sa, err := subAgentOf(s, r.GetSubAgentId(), "llm_responded")
	if err != nil {
		return err
	}
	if sa.GetPending().GetCallId() != r.GetCallId() {
		return fmt.Errorf("%w: llm_responded for %q while sub-agent %s waits for %q", ErrBadEvent, r.GetCallId(), sa.GetId(), sa.GetPending().GetCallId())
	}
	sa.Pending = nil
	sa.Transcript = append(sa.Transcript, &messages.TranscriptEntry{
		Role: "assistant", Content: r.GetContent(), ToolCalls: r.GetToolCalls(), Seq: ev.GetSeq(), Tokens: r.GetTokens(),
		Thinking: r.GetThinking(),
	})
	sa.Usage, sa.RunUsage = addUsage(sa.Usage, r.GetUsage()), addUsage(sa.RunUsage, r.GetUsage())
	sa.CostUsd += r.GetCostUsd()
	sa.RunCostUsd += r.GetCostUsd()
	s.Usage = addUsage(s.Usage, r.GetUsage())
	s.CostUsd += r.GetCostUsd()
	return nil
}

func applySubAgentToolCalled(s *messages.SessionState, c *messages.ToolCalled) error {
	sa, err := subAgentOf(s, c.GetSubAgentId(), "tool_called")
	if err != nil {
		return err
	}
	sa.ToolCalls = max(sa.ToolCalls, c.GetIndex())
	if st := stepOf(s, sa); st != nil {
		st.ToolCalls++
	}
	sa.PendingTools = append(sa.PendingTools, &messages.PendingTool{
		StepId: c.GetStepId(), CallId: c.GetCallId(), Tool: c.GetTool(), Args: c.GetArgs(), IdempotencyKey: c.GetIdempotencyKey(),
	})
	return nil
}

func applySubAgentToolResult(s *messages.SessionState, r *messages.ToolResult, ev *messages.Event) error {
	sa, err := subAgentOf(s, r.GetSubAgentId(), "tool_result")
	if err != nil {
		return err
	}
	i := slices.IndexFunc(sa.PendingTools, func(c *messages.PendingTool) bool { return c.GetIdempotencyKey() == r.GetIdempotencyKey() })
	if i < 0 {
		return fmt.Errorf("%w: tool_result for %q, which sub-agent %s is not waiting for", ErrBadEvent, r.GetIdempotencyKey(), sa.GetId())
	}
	sa.PendingTools = slices.Delete(sa.PendingTools, i, i+1)
	// A call is used once its result is in, unless a human rejected it (it never ran).
	if r.GetError().GetErrorType() != string(tools.ErrRejected) && !slices.Contains(sa.RunToolsUsed, r.GetTool()) {
		sa.RunToolsUsed = append(sa.RunToolsUsed, r.GetTool())
	}
	content := r.GetResult()
	if r.GetError() != nil {
		content = r.GetError().GetLlmText()
	}
	if r.GetError().GetConfig() && sa.RunConfigError == "" {
		sa.RunConfigError = fmt.Sprintf("tool %s: %s", r.GetTool(), r.GetError().GetMessage())
	}
	sa.Transcript = append(sa.Transcript, &messages.TranscriptEntry{Role: "tool", Content: content, ToolCallId: r.GetCallId(), Seq: ev.GetSeq(), Tokens: r.GetTokens()})
	return nil
}

// stepOf is the step sub-agent sa runs (s's own copy: ownStep).
func stepOf(s *messages.SessionState, sa *messages.SubagentState) *messages.StepState {
	if i := int(sa.GetStepIndex()); i < len(s.GetSteps()) && s.GetSteps()[i].GetStep().GetId() == sa.GetStepId() {
		return ownStep(s, i)
	}
	return nil
}

// applySubAgentArtifact adds an artifact a sub-agent wrote to its run's facts.
func applySubAgentArtifact(s *messages.SessionState, a *messages.ArtifactWritten) {
	if s.GetSubAgents()[a.GetSubAgentId()] == nil {
		return
	}
	sa := ownSubAgent(s, a.GetSubAgentId())
	list := &sa.RunArtifactsCreated
	if a.GetOverwrote() && !slices.Contains(sa.RunArtifactsCreated, a.GetPath()) {
		list = &sa.RunArtifactsModified
	}
	if !slices.Contains(*list, a.GetPath()) {
		*list = append(*list, a.GetPath())
	}
}

// stopSubAgents ends every sub-agent's run when the session ends.
func stopSubAgents(s *messages.SessionState) {
	for id, sa := range s.GetSubAgents() {
		if sa.GetRunning() || sa.GetPending() != nil || len(sa.GetPendingTools()) > 0 {
			sa = ownSubAgent(s, id)
			sa.Running, sa.Pending, sa.PendingTools = false, nil, nil
		}
	}
}
