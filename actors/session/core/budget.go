package core

import (
	"fmt"
	"math"

	"github.com/fathom-agents/fathom/messages"
)

// Session budgets, as decisions. SessionConfig's max_llm_calls, max_cost_usd and
// max_tokens bound the whole session: every LLM call of the orchestrator and of its
// sub-agents (planning, steps, retries, re-plans, the closing summary). What a session
// has spent is folded from its events (SessionState.llm_calls, cost_usd, usage), so the
// count survives passivation, restarts and moves. Each place that requests a call asks
// callAllowed first: a call that would cross a budget is not requested and the session
// fails with the reason in session_failed.error (the closing summary, whose work is
// done, is written by code instead). 0 means unlimited.
//
// The same check asks the tenant's daily budgets (Config.TenantBudget: the tenants'
// max_tokens_per_day and max_cost_usd_per_day of the node's config file): a call over
// one is not requested either and the session fails naming it
// (tenant_max_tokens_per_day, tenant_max_cost_usd_per_day).

// DefaultMaxLLMCalls is DefaultConfig's MaxLLMCalls: room for a ten-step plan whose
// sub-agents each use their ten calls twice, and a bound on a session that loops.
const DefaultMaxLLMCalls = 200

// spent is what a session has used of its budgets.
type spent struct {
	calls  uint32
	cost   float64
	tokens uint64
}

// spentBy returns what the session has spent once b's events so far are applied,
// without copying the state: s's totals plus b's llm_requested and llm_responded.
func spentBy(b *EventBuilder) spent {
	if st := b.proj; st != nil && !b.projBroken {
		return spent{calls: st.GetLlmCalls(), cost: st.GetCostUsd(), tokens: usageTokens(st.GetUsage())}
	}
	s := b.s
	sp := spent{calls: s.GetLlmCalls(), cost: s.GetCostUsd(), tokens: usageTokens(s.GetUsage())}
	for _, ev := range b.Evs {
		switch p := ev.GetPayload().(type) {
		case *messages.Event_LlmRequested:
			sp.calls++
		case *messages.Event_LlmResponded:
			sp.cost += p.LlmResponded.GetCostUsd()
			sp.tokens += usageTokens(p.LlmResponded.GetUsage())
		}
	}
	return sp
}

// usageTokens is the tokens a usage record counts: its total, or input + output when
// the provider reported no (or a smaller) total.
func usageTokens(u *messages.Usage) uint64 {
	return max(u.GetTotalTokens(), u.GetInputTokens()+u.GetOutputTokens())
}

// overBudget returns why one more LLM call would cross a budget of cfg after sp, or ""
// when it fits.
func overBudget(cfg *messages.SessionConfig, sp spent) string {
	if limit := cfg.GetMaxLlmCalls(); limit > 0 && sp.calls >= limit {
		return fmt.Sprintf("session budget exceeded: %d LLM calls (max_llm_calls %d): "+raiseHint("max-llm-calls", "FATHOM_MAX_LLM_CALLS", "max_llm_calls"), sp.calls+1, limit)
	}
	if limit := cfg.GetMaxCostUsd(); limit > 0 && sp.cost >= limit {
		return fmt.Sprintf("session budget exceeded: $%.6f spent (max_cost_usd %g): "+raiseHint("max-cost-usd", "FATHOM_MAX_COST_USD", "max_cost_usd"), sp.cost, limit)
	}
	if limit := cfg.GetMaxTokens(); limit > 0 && sp.tokens >= limit {
		return fmt.Sprintf("session budget exceeded: %d tokens used (max_tokens %d): "+raiseHint("max-tokens", "FATHOM_MAX_TOKENS", "max_tokens"), sp.tokens, limit)
	}
	return ""
}

// raiseHint names where a budget is raised: the node's flag and variable, or a start
// request's config key.
func raiseHint(flag, env, key string) string {
	return fmt.Sprintf("raise it with the node's --%s (env %s) or the start request's config.%s", flag, env, key)
}

// budgetReason returns why the call b is about to request would cross a session budget,
// or "" when it fits.
func budgetReason(b *EventBuilder) string {
	if r := overBudget(b.s.GetConfig(), spentBy(b)); r != "" {
		return r
	}
	if b.tenantBudget == nil {
		return ""
	}
	tenant := b.s.GetTenant()
	var tokens uint64
	var cost float64
	for _, ev := range b.Evs { // what this decision records and the journal does not hold yet
		switch p := ev.GetPayload().(type) {
		case *messages.Event_SessionStarted:
			tenant = p.SessionStarted.GetTenant()
		case *messages.Event_LlmResponded:
			cost += p.LlmResponded.GetCostUsd()
			tokens += usageTokens(p.LlmResponded.GetUsage())
		}
	}
	return b.tenantBudget(tenant, tokens, cost)
}

// UsageTokens is the tokens an answer's usage counts in the session's and its tenant's
// budgets: its total, or input + output when the provider reported no (or a smaller)
// total.
func UsageTokens(u *messages.Usage) uint64 { return usageTokens(u) }

// callAllowed reports whether b may request one more LLM call; when a session budget
// forbids it, it appends the session's failure.
func callAllowed(b *EventBuilder) bool {
	reason := budgetReason(b)
	if reason == "" {
		return true
	}
	fail(b, reason)
	return false
}

// validBudget refuses a cost budget that is negative or not a number.
func validBudget(cfg *messages.SessionConfig) error {
	if c := cfg.GetMaxCostUsd(); c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
		return refuse(messages.ErrorReason_INVALID_ARGUMENT, "config.max_cost_usd is %g: it must be a finite number, 0 or more (0 = unlimited)", c)
	}
	return nil
}
