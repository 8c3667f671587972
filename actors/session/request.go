package session

import (
	"context"
	"fmt"
	"strings"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// buildContextRequest is buildRequest with a step call's history fitted into the
// context budget by memory.BuildContext: the system prompt (executor template and goal),
// the rolling summary, semantic hits for the step description (from
// d.Vectors; a failed search means no hits) and the most recent messages. It reads s
// only (committed state is never mutated), so the step runner calls it off the grain's
// mailbox. The current step and the workspace listing (core.StepTaskPrompt) come last,
// after the history, so the prefix before them caches from step to step. hist is s's history (core.History; nil: built here). info describes the
// context (nil for a plan call).
func buildContextRequest(ctx context.Context, d *Deps, s *messages.SessionState, callID string, hist []memory.Message) (llm.Request, *messages.ContextInfo, error) {
	req, info, err := buildCallContext(ctx, d, s, callID, hist)
	if err == nil {
		core.SetCallOptions(&req, s, callID, d.Config.Core)
	}
	return req, info, err
}

// buildCallContext is buildContextRequest's messages and tools.
func buildCallContext(ctx context.Context, d *Deps, s *messages.SessionState, callID string, hist []memory.Message) (req llm.Request, info *messages.ContextInfo, err error) {
	if sa := core.SubAgentByCall(s, callID); sa != nil {
		return buildSubAgentRequest(ctx, d, s, sa)
	}
	if s.GetPending().GetPurpose() == core.PurposeMessage {
		return buildFollowUpRequest(ctx, d, s)
	}
	if s.GetPending().GetPurpose() != core.PurposeStep {
		req, err = core.BuildRequest(s, d.Prompts, d.toolSpecs())
		if err == nil && s.GetPending().GetPurpose() == core.PurposePlan {
			req = withLongTerm(ctx, d, s, req)
		}
		return req, nil, err
	}
	st, err := core.CurrentStepState(s)
	if err != nil {
		return llm.Request{}, nil, err
	}
	model := s.GetConfig().GetModel()
	tmpl, rest, err := core.StepSystemPromptPartsGoal(s, d.Prompts, contextGoal(ctx, d, s))
	if err != nil {
		return llm.Request{}, nil, err
	}
	sys := tmpl + rest
	task, err := core.StepTaskPrompt(s)
	if err != nil {
		return llm.Request{}, nil, err
	}
	if hist == nil {
		hist = core.History(s)
	}
	in := memory.Input{
		// The step's opening message states its task: it stays in the context.
		Task:         st.GetStartedSeq(),
		Origin:       "session " + s.GetSessionId(),
		SystemPrompt: sys,
		// The step's own text goes after the history: the system prompt and the history
		// stay a cacheable prefix from step to step.
		TaskPrompt: task,
		// The template's count is cached (tokenizing it was a third of a step's CPU);
		// counting the two parts apart can only add a token at the seam: an upper bound,
		// which is what a budget needs.
		SystemTokens: d.templateTokens(model, tmpl) + d.Config.CountTextContext(ctx, model, rest) +
			int(d.Config.CountMessageContext(ctx, model, llm.Message{Role: "system", Content: task})),
		Messages: hist,
		// Searched only when the history does not fit whole (memory.Input.Search).
		Search: func() []memory.Hit { return searchHits(ctx, d, s, st.GetStep().GetDescription()) },
		Now:    d.Now(),
	}
	in.LongTerm, in.LongTermOverhead = longTerm(ctx, d, s, "")
	if sum := s.GetSummary(); sum.GetContent() != "" {
		in.Summary = &memory.Summary{Content: sum.GetContent(), Tokens: int(sum.GetTokens()), Through: sum.GetCoveredThroughSeq()}
	}
	cc := d.Config.ContextConfig()
	// Elision tokenises for this call only: it stops when the call is cancelled.
	cc.Counter = memory.WithContext(ctx, d.Config.CounterFor(model))
	c, err := memory.BuildContext(cc, in)
	if err != nil {
		return llm.Request{}, nil, fmt.Errorf("session %s: build context: %w", s.GetSessionId(), err)
	}
	info = core.ContextInfo(c, len(hist), in.Task)
	return llm.Request{Model: s.GetConfig().GetModel(), Messages: c.Messages(), Tools: d.toolSpecs()}, info, nil
}

// searchHits ranks session s's messages (under its tenant) for query as
// Config.Retrieval says: by the query's embedding, its text, or both fused. Any
// failure means no hits (logged): the semantic tier is an aid, never a reason to fail a
// call.
func searchHits(ctx context.Context, d *Deps, s *messages.SessionState, query string) []memory.Hit {
	sessionID := s.GetSessionId()
	if d.Embedder == nil || d.Vectors == nil || strings.TrimSpace(query) == "" {
		return nil
	}
	var vec []float32
	var err error
	if _, text := d.Vectors.(persistence.TextSearcher); !text || d.Config.Retrieval.Mode != persistence.RetrievalText {
		var vecs [][]float32
		vecs, err = d.Embedder.Embed(ctx, []string{query})
		if err == nil && len(vecs) != 1 {
			err = fmt.Errorf("embedder returned %d vectors for 1 text", len(vecs))
		}
		if err == nil {
			vec = vecs[0]
		}
	}
	var hits []persistence.VectorHit
	if err == nil {
		hits, err = persistence.HybridSearch(ctx, d.Vectors, d.Config.Retrieval, tenantOf(s), sessionID, query, vec, d.Config.TopK())
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

// contextGoal is the session's goal as a budgeted system prompt states it: whole when it
// costs at most 1/goalShare of the context budget, else elided to that (its head and
// tail, with a note: the whole goal is session_started, event seq 1), so that a long
// goal cannot crowd the step's own messages out of the context. Its counting stops when
// ctx (the call's) is done.
func contextGoal(ctx context.Context, d *Deps, s *messages.SessionState) string {
	goal := s.GetGoal()
	limit := d.Config.ContextConfig().Budget / core.GoalShare
	if len(goal) <= limit { // no token is shorter than a byte
		return goal
	}
	tok := d.Config.TokenizerFor(s.GetConfig().GetModel())
	if tok == nil {
		return goal
	}
	counter := memory.WithContext(ctx, tok)
	m := memory.Message{Seq: 1, Role: "user", Content: goal, Tokens: counter.CountMessage(llm.Message{Role: "user", Content: goal})}
	if e, ok := memory.Elide(m, limit, counter, "session "+s.GetSessionId()); ok {
		return e.Content
	}
	return goal
}

// buildFollowUpRequest builds the orchestrator's call answering a follow-up message: its
// system prompt (core.FollowUpSystemPrompt) and the whole history fitted into the context
// budget like a step's (summary, semantic hits, recent messages), the message itself
// kept as the task; a re-prompt's correction follows.
func buildFollowUpRequest(ctx context.Context, d *Deps, s *messages.SessionState) (llm.Request, *messages.ContextInfo, error) {
	sys, err := core.FollowUpSystemPrompt(s, d.Prompts)
	if err != nil {
		return llm.Request{}, nil, err
	}
	model := s.GetConfig().GetModel()
	hist := core.History(s)
	msg, seq := core.LastMessage(s)
	in := memory.Input{
		Task: seq, Origin: "session " + s.GetSessionId(), SystemPrompt: sys,
		SystemTokens: d.Config.CountTextContext(ctx, model, sys), Messages: hist,
		Search: func() []memory.Hit { return searchHits(ctx, d, s, msg) }, Now: d.Now(),
	}
	in.LongTerm, in.LongTermOverhead = longTerm(ctx, d, s, "")
	if sum := s.GetSummary(); sum.GetContent() != "" {
		in.Summary = &memory.Summary{Content: sum.GetContent(), Tokens: int(sum.GetTokens()), Through: sum.GetCoveredThroughSeq()}
	}
	cc := d.Config.ContextConfig()
	// Elision tokenises for this call only: it stops when the call is cancelled.
	cc.Counter = memory.WithContext(ctx, d.Config.CounterFor(model))
	c, err := memory.BuildContext(cc, in)
	if err != nil {
		return llm.Request{}, nil, fmt.Errorf("session %s: build context: %w", s.GetSessionId(), err)
	}
	msgs := append(c.Messages(), core.RepromptMessages(s.GetPending())...)
	return llm.Request{Model: model, Messages: msgs}, core.ContextInfo(c, len(hist), in.Task), nil
}
