package mock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"testing"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/anthropic"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/llm/openai"
	"github.com/fathom-agents/fathom/prompts"
)

// sessionSteps is the number of steps of the benchmarked session.
const sessionSteps = 20

// sessionGoal is the demo's kind of goal.
const sessionGoal = "Research how actor runtimes recover from crashes and write a short report with sources"

// cacheScript answers a step's first call with a web_search call and the call after the
// result with the step's answer, as the demo's steps do.
const cacheScript = `{"rules":[
  {"system_match":"FATHOM-PHASE: plan","response":"{\"steps\":[{\"id\":\"step-1\",\"type\":\"custom\",\"description\":\"look into it\"}]}"},
  {"tool_match":"result","response":"Step done: {{.Step}}. The sources agree that supervisors restart failed actors from their last persisted state, and that journals make the restart deterministic."},
  {"match":"Step: ","tool_calls":[{"name":"web_search","arguments":"{\"query\":{{json .Step}}}"}]}
],"default":"ok"}`

// runSession makes the calls of a sessionSteps-step session of the orchestrator (the
// plan call, then per step a call that searches and a call that answers, every step
// seeing the steps before it, laid out as the step runner builds a step call) through
// p, and returns its cost with prices and its usage.
func runSession(ctx context.Context, p llm.Provider, prices llm.PriceTable, model string, cache bool) (float64, llm.Usage, error) {
	set, err := prompts.Default()
	if err != nil {
		return 0, llm.Usage{}, err
	}
	var total llm.Usage
	var cost float64
	call := func(req llm.Request) (llm.Response, error) {
		req.Model, req.PromptCache, req.MaxTokens = model, cache, 1024
		resp, err := p.Chat(ctx, req)
		if err != nil {
			return resp, err
		}
		cost += prices.CostOf(model, resp.Usage)
		total.InputTokens += resp.Usage.InputTokens
		total.OutputTokens += resp.Usage.OutputTokens
		total.CachedInputTokens += resp.Usage.CachedInputTokens
		total.CacheWriteInputTokens += resp.Usage.CacheWriteInputTokens
		return resp, nil
	}
	orch, err := set.Render(prompts.Orchestrator, prompts.AgentData{AgentType: prompts.Orchestrator, Phase: prompts.PhasePlan, Goal: sessionGoal, MaxSteps: sessionSteps})
	if err != nil {
		return 0, total, err
	}
	if _, err := call(llm.Request{Messages: []llm.Message{{Role: "system", Content: orch}, {Role: "user", Content: "Goal: " + sessionGoal + "\n"}}}); err != nil {
		return 0, total, err
	}
	tmpl, err := set.Render(prompts.Executor, prompts.ExecutorData{StepType: "custom"})
	if err != nil {
		return 0, total, err
	}
	tools := []llm.ToolSpec{{Name: "web_search", Description: "Searches the web.", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)}}
	// The step call's layout (core.BuildRequest, memory.Context.Messages): the system
	// prompt (executor template and goal, the same for every step), the history, then
	// the step's task prompt (core.StepTaskPrompt) as a system message after it.
	sys := llm.Message{Role: "system", Content: tmpl + "\n\nGoal: " + sessionGoal + "\n"}
	var hist []llm.Message
	for i := 1; i <= sessionSteps; i++ {
		desc := fmt.Sprintf("look into part %d of the question", i)
		task := llm.Message{Role: "system", Content: fmt.Sprintf("Current step: %s\n", desc)}
		hist = append(hist, llm.Message{Role: "user", Content: fmt.Sprintf("Goal: %s\nStep: %s\n", sessionGoal, desc)})
		for turn := 0; turn < 4; turn++ {
			msgs := append(append([]llm.Message{sys}, hist...), task)
			resp, err := call(llm.Request{Messages: msgs, Tools: tools})
			if err != nil {
				return 0, total, err
			}
			hist = append(hist, llm.Message{Role: "assistant", Content: resp.Content, ToolCalls: resp.ToolCalls})
			if len(resp.ToolCalls) == 0 {
				break
			}
			for _, c := range resp.ToolCalls {
				hist = append(hist, llm.Message{Role: "tool", ToolCallID: c.ID, Content: "search result: supervisors restart actors; journals replay events; " + desc})
			}
		}
	}
	return cost, total, nil
}

// BenchmarkSessionCost is the model cost of a 20-step session (41 calls, the history
// growing step by step) on the mock's prompt-cache accounting, with prompt caching
// (cached) and without (uncached), priced with the built-in table: Anthropic
// (claude-sonnet-4-5 rates, cache reads at 0.1×, writes at 1.25×) with and without
// cache_control breakpoints (Request.PromptCache), and OpenAI (gpt-4.1-mini rates,
// cached input at 0.25×) against a mock that caches prefixes as OpenAI does and one
// that caches nothing. It reports usd/session and the share of input tokens read
// from the cache; the row's ratio is cached ÷ uncached. A fresh mock serves each
// session, so every session starts with a cold cache.
func BenchmarkSessionCost(b *testing.B) {
	script, err := mock.ParseScript([]byte(cacheScript))
	if err != nil {
		b.Fatal(err)
	}
	prices := llm.DefaultPrices()
	for _, api := range []string{"anthropic", "openai"} {
		for _, cached := range []bool{true, false} {
			name := api + "/uncached"
			if cached {
				name = api + "/cached"
			}
			b.Run(name, func(b *testing.B) {
				var cost float64
				var usage llm.Usage
				for b.Loop() {
					cfg := mock.Config{Script: script}
					if api == "openai" && !cached {
						cfg.CacheMinTokens = math.MaxInt // nothing is long enough to cache
					}
					srv := httptest.NewServer(mock.New(cfg).Handler())
					var p llm.Provider
					var model string
					if api == "anthropic" {
						p, err = anthropic.New(anthropic.Config{BaseURL: srv.URL})
						model = "claude-sonnet-4-5"
					} else {
						p, err = openai.New(openai.Config{BaseURL: srv.URL + "/v1"})
						model = "gpt-4.1-mini"
					}
					if err != nil {
						srv.Close()
						b.Fatal(err)
					}
					cost, usage, err = runSession(context.Background(), p, prices, model, cached)
					srv.Close()
					if err != nil {
						b.Fatal(err)
					}
				}
				if cached && usage.CachedInputTokens == 0 {
					b.Fatalf("no cached input tokens with caching on: %+v", usage)
				}
				if !cached && usage.CachedInputTokens != 0 {
					b.Fatalf("cached input tokens with caching off: %+v", usage)
				}
				b.ReportMetric(cost, "usd/session")
				b.ReportMetric(100*float64(usage.CachedInputTokens)/float64(max(usage.InputTokens, 1)), "cached-input-%")
				b.ReportMetric(float64(usage.InputTokens), "input-tokens/session")
			})
		}
	}
}
