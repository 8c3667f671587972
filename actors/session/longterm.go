package session

import (
	"context"
	"slices"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence/ltm"
	"github.com/fathom-agents/fathom/tools/builtin"
)

// LongTermSearcher finds a user's long-term memories (builtin.MemoryTools): the
// newest for an empty query.
type LongTermSearcher interface {
	Search(ctx context.Context, ns ltm.Namespace, query string, k int) ([]ltm.Hit, error)
}

// LongTermK is how many of the user's memories a context is offered (best first; those
// that fit the semantic slice are included).
const LongTermK = 8

// longTerm returns the memories of session s's user most relevant to its goal, for the
// context of an agent of agentType ("" : the orchestrator), with the memory message's
// overhead. The query is the goal, the same for every call of the session, so the
// memory message stays part of the prefix the provider caches. A session without a
// user, a node without long-term memory or a failed search (logged) means none: memory
// is an aid, never a reason to fail a call.
func longTerm(ctx context.Context, d *Deps, s *messages.SessionState, agentType string) ([]memory.LongTerm, int) {
	if d.LongTerm == nil || s.GetUserId() == "" {
		return nil, 0
	}
	ns := ltm.Namespace{Tenant: tenantOf(s), User: s.GetUserId(), Agent: agentType}
	hits, err := d.LongTerm.Search(ctx, ns, s.GetGoal(), LongTermK)
	if err != nil {
		d.Logger.Warn("long-term memory search failed; no memories in the context", "session_id", s.GetSessionId(), "error", err)
		return nil, 0
	}
	model := s.GetConfig().GetModel()
	out := make([]memory.LongTerm, len(hits))
	for i, h := range hits {
		// The line and the newline joining it to the next.
		out[i] = memory.LongTerm{ID: h.ID, Text: h.Text, Score: h.Score, Tokens: d.Config.CountText(model, memory.LongTermLine(h.Text)) + 1}
	}
	return out, int(d.Config.CountMessage(model, llm.Message{Role: "system", Content: memory.LongTermPrefix}))
}

// subAgentReadsMemory reports whether a sub-agent may read the user's memories: its
// agent's memory setting (read or readwrite) gave it recall.
func subAgentReadsMemory(sa *messages.SubagentState) bool {
	return slices.Contains(sa.GetTools(), builtin.RecallTool)
}

// withLongTerm puts the user's memories into a plan call's request, built from the
// state alone (core.BuildRequest), after its system prompt: as many as fit the
// context's semantic share.
func withLongTerm(ctx context.Context, d *Deps, s *messages.SessionState, req llm.Request) llm.Request {
	mems, overhead := longTerm(ctx, d, s, "")
	if len(mems) == 0 || len(req.Messages) == 0 {
		return req
	}
	cc := d.Config.ContextConfig()
	chosen, _ := memory.FitLongTerm(mems, overhead, int(float64(cc.Budget)*cc.Ratios.Semantic))
	if len(chosen) == 0 {
		return req
	}
	msgs := make([]llm.Message, 0, len(req.Messages)+1)
	msgs = append(msgs, req.Messages[0], memory.LongTermMessage(chosen))
	req.Messages = append(msgs, req.Messages[1:]...)
	return req
}
