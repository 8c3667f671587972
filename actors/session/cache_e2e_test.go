package session_test

import (
	"math"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/llm"
)

// TestCachedInputTokensAreRecordedAndPriced: the scripted model (like OpenAI) serves a
// repeated prompt prefix from its cache and reports cached_tokens; the session records
// them in llm_responded.usage.cached_input_tokens, sums them in the session's usage and
// prices them at the cached rate.
func TestCachedInputTokensAreRecordedAndPriced(t *testing.T) {
	prices := llm.PriceTable{"gpt-4o-mini": {InputPerMTok: 1, CachedInputPerMTok: 0.1, OutputPerMTok: 2}}
	h := startHarness(t, harnessOpts{cfg: func(c *session.Config) { c.Prices = prices }})
	if _, err := h.start("cache-1", "c1", "a goal that runs the demo"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "cache-1", 30*time.Second)
	mustComplete(t, evs)
	var cached, cachedCalls uint64
	for _, ev := range evs {
		r := ev.GetLlmResponded()
		if r == nil {
			continue
		}
		u := r.GetUsage()
		if u.GetCachedInputTokens() > 0 {
			cachedCalls++
			cached += u.GetCachedInputTokens()
		}
		if u.GetCachedInputTokens() > u.GetInputTokens() {
			t.Fatalf("call %s: %d cached of %d input tokens", r.GetCallId(), u.GetCachedInputTokens(), u.GetInputTokens())
		}
		want := prices.CostOf("gpt-4o-mini", core.UsageOf(u))
		if math.Abs(r.GetCostUsd()-want) > 1e-12 {
			t.Fatalf("call %s costs %g, want %g (cached tokens at the cached rate)", r.GetCallId(), r.GetCostUsd(), want)
		}
	}
	if cachedCalls == 0 {
		t.Fatal("no call of the session reported cached input tokens: the repeated system prompt was not served from the cache")
	}
	total := evs[len(evs)-1].GetSessionCompleted().GetUsage().GetCachedInputTokens()
	if total != cached {
		t.Fatalf("session_completed.usage.cached_input_tokens = %d, the calls' sum is %d", total, cached)
	}
}
