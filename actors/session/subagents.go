package session

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/prompts"
)

// buildSubAgentRequest assembles a sub-agent's call from its own context only: its
// agent type's system prompt and its transcript (task briefs, turns, tool results),
// fitted into the context budget (recent tier; sub-agents keep no summary). Tools are
// the sub-agent's.
func buildSubAgentRequest(ctx context.Context, d *Deps, s *messages.SessionState, sa *messages.SubagentState) (llm.Request, *messages.ContextInfo, error) {
	step := &messages.PlanStep{}
	if i := int(sa.GetStepIndex()); i < len(s.GetSteps()) {
		step = s.GetSteps()[i].GetStep()
	}
	agent, ok := d.Config.Registry().ByName(sa.GetAgentType())
	if !ok {
		return llm.Request{}, nil, &core.ConfigError{What: "agent " + sa.GetAgentType(), Err: errors.New("no such agent on this node")}
	}
	sys, err := d.Prompts.Render(agent.Template(), prompts.AgentData{
		AgentType: sa.GetAgentType(), Goal: contextGoal(ctx, d, s), Tools: sa.GetTools(), Workspace: s.GetSessionId() + "/",
		Step:          prompts.Step{ID: step.GetId(), Type: step.GetType(), Description: step.GetDescription()},
		MaxIterations: sa.GetMaxIterations(),
	})
	if err != nil {
		return llm.Request{}, nil, err
	}
	hist := make([]memory.Message, 0, len(sa.GetTranscript()))
	var task uint64 // the latest task brief: it stays in the context
	for _, m := range sa.GetTranscript() {
		if m.GetRole() == "user" {
			task = m.GetSeq()
		}
		msg := memory.Message{Seq: m.GetSeq(), Role: m.GetRole(), Content: m.GetContent(), ToolCallID: m.GetToolCallId(), Tokens: int(m.GetTokens())}
		for _, c := range m.GetToolCalls() {
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.GetId(), Name: c.GetName(), Arguments: c.GetArguments()})
		}
		msg.Thinking = core.ThinkingOf(m.GetThinking())
		hist = append(hist, msg)
	}
	in := memory.Input{
		SystemPrompt: sys,
		SystemTokens: int(d.Config.CountMessageContext(ctx, s.GetConfig().GetModel(), llm.Message{Role: "system", Content: sys})),
		Messages:     hist,
		Task:         task,
		Origin:       "session " + s.GetSessionId(),
		Now:          d.Now(),
	}
	if subAgentReadsMemory(sa) {
		in.LongTerm, in.LongTermOverhead = longTerm(ctx, d, s, sa.GetAgentType())
	}
	cc := d.Config.ContextConfig()
	cc.Counter = memory.WithContext(ctx, d.Config.CounterFor(s.GetConfig().GetModel())) // stops when the call is cancelled
	c, err := memory.BuildContext(cc, in)
	if err != nil {
		return llm.Request{}, nil, fmt.Errorf("session %s: sub-agent %s: build context: %w", s.GetSessionId(), sa.GetId(), err)
	}
	info := core.ContextInfo(c, len(hist), task)
	specs := make([]llm.ToolSpec, 0, len(sa.GetTools()))
	for _, sp := range d.toolSpecs() {
		if slices.Contains(sa.GetTools(), sp.Name) {
			specs = append(specs, sp)
		}
	}
	return llm.Request{Model: d.Config.SubAgentModel(s, sa.GetAgentType()), Messages: c.Messages(), Tools: specs}, info, nil
}
