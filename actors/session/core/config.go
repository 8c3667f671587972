package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/tools"
)

// Config is the node-wide configuration of session decisions: only settings a decision
// (Decide, the fold's request building, the start-time checks) reads. Per-session
// settings (model, max iterations, max steps) default to these and may be overridden at
// start. The shell's settings (timeouts, leases, snapshot cadence, pipeline depth,
// tenancy, retrieval) are session.Config's, which embeds this one.
type Config struct {
	// Model is the default LLM model of new sessions.
	Model string
	// MaxIterations is the default bound on LLM calls per session.
	MaxIterations uint32
	// MaxSteps is the default bound on the number of plan steps.
	MaxSteps uint32
	// StepAttempts bounds the runs of a plan or step whose LLM call failed retryably
	// (rate limited, provider down, breaker open); the last failure fails the session.
	StepAttempts uint32
	// StepRetryDelay is the wait before a retryably failed plan or step runs again. It
	// should outlast the provider's circuit breaker open period so the retry can probe.
	StepRetryDelay time.Duration
	// MaxToolCallsPerTurn bounds the tool calls run for one model answer; calls beyond
	// it get a validation ToolError asking the model to call again.
	MaxToolCallsPerTurn uint32
	// MaxToolResultBytes bounds the result a tool call records (--max-tool-result-bytes,
	// config key max_tool_result_bytes): a larger result, of any tool (built-in, sandbox,
	// MCP or the program's own), is stored whole as the session's artifact
	// results/{call_id}, and its tool_result event keeps only a head and a tail around a
	// note naming the artifact and the full size (resultcap.go). 0 means
	// DefaultMaxToolResultBytes (256 KiB); at most MaxToolResultBytesLimit.
	MaxToolResultBytes int
	// Prices is the price table for cost accounting (nil: costs are 0).
	Prices llm.PriceTable
	// Webhooks is set when the node signs and sends webhook notifications (it has a
	// secret, session.Deps.Webhooks): only then may a session name a webhook_url.
	Webhooks bool
	// WebhookURL is the webhook_url of sessions whose start names none ("" : none).
	WebhookURL string
	// ContextBudget is the most prompt tokens a step call may cost (memory.BuildContext).
	// Default 32,000; 0 means the default.
	ContextBudget int
	// ContextRatios split the context budget between recent messages, the summary and
	// semantic hits. Zero means memory.DefaultRatios() (50/30/20).
	ContextRatios memory.Ratios
	// Summary is when the rolling summary is regenerated (threshold of unsummarized
	// tokens). Zero means memory.DefaultSummaryConfig().
	Summary memory.SummaryConfig
	// MaxParallelSubAgents bounds the sub-agents of one session running at once
	// (independent plan steps). 0 means DefaultMaxParallelSubAgents.
	MaxParallelSubAgents int
	// SubAgentMaxIterations bounds the LLM calls of one sub-agent run. 0 means
	// DefaultMaxIterations.
	SubAgentMaxIterations uint32
	// SubAgentTools replaces, by agent type (researcher, coder, writer, reviewer), the
	// tools a sub-agent may call (ProfileFor's defaults), e.g. to give one a
	// tool the node registered. Tools the node does not have are left out.
	SubAgentTools map[string][]string
	// Agents are the node's own agents, beside the built-in researcher, coder, writer and
	// reviewer (NewAgents checks them): a plan step whose type is an agent's name runs in
	// a sub-agent of that agent (its prompt, tools, model and iteration bound), or calls
	// its Go function. The planner is told each agent's name and description. A session
	// that delegated to an agent needs it on every node that continues the session.
	Agents []AgentSpec
	// MaxReplans bounds the re-plans of one session: when a sub-agent's step fails after
	// its StepAttempts are used up, the orchestrator asks for a new plan of the remaining
	// work (plan_revised) up to this many times; after that such a failure fails the
	// session. Default 2; 0 disables re-planning.
	MaxReplans int
	// MaxLLMCalls, MaxCostUSD and MaxTokens are the session budgets of new sessions
	// (SessionConfig.max_llm_calls, max_cost_usd, max_tokens; a start request may set its
	// own): every LLM call of a session and its sub-agents counts (budget.go). 0 means
	// unlimited. Defaults: DefaultMaxLLMCalls calls, no cost or token bound.
	MaxLLMCalls uint32
	MaxCostUSD  float64
	MaxTokens   uint64
	// TenantBudget, when set, is asked with each of those budgets: why the session's
	// tenant may make no more LLM calls today (its max_tokens_per_day or
	// max_cost_usd_per_day, counting tokens and cost the decision records and has not
	// stored yet), or "" when it may. A call it forbids fails the session like a session
	// budget (session.Quotas.DailyBudget; nil: no tenant budgets).
	TenantBudget func(tenant string, tokens uint64, cost float64) string
	// Endpoint is the model endpoint this node's provider calls, recorded in the config
	// of the sessions it starts (endpoint.go). Zero means unknown: nothing is recorded
	// and recorded endpoints are not checked.
	Endpoint Endpoint
	// AllowEndpointChange lets this node continue sessions started on another endpoint
	// (--allow-endpoint-change); otherwise it refuses to.
	AllowEndpointChange bool
	// Reasoning is the default reasoning of new sessions' calls (reasoning_effort,
	// extended thinking budget; --reasoning-effort, --thinking-budget); a start request's
	// config may set its own (SessionConfig.reasoning_effort, thinking_budget).
	Reasoning Reasoning
	// AgentReasoning replaces, by agent type (researcher, coder, writer, reviewer, or
	// "orchestrator" for the orchestrator's own calls), the session's reasoning for that
	// agent's calls (--agent-reasoning). ReasoningFor reads it.
	AgentReasoning map[string]Reasoning
	// ApprovalTools are the tools whose calls wait for a human's decision before they
	// run (hitl_requested kind "approval", see hitl_approval.go). Each must be a tool
	// of the node.
	ApprovalTools []string
	// ApprovalDecisions are, by tool of ApprovalTools, the decisions a human may take on
	// its calls: some of DecisionApprove, DecisionEdit and DecisionReject (deepagents'
	// allowed_decisions). A tool not in it allows all three. A decision not allowed is
	// refused (INVALID_ARGUMENT) and the request keeps waiting; the timeout's reject is
	// taken whatever the list says (a call nobody approved never runs).
	ApprovalDecisions map[string][]string
	// checkArgs validates a tool's arguments against its schema (WithArgsCheck).
	checkArgs func(tool string, args json.RawMessage) *tools.ToolError

	// toolNames are the node's tools (Register sets it): sub-agents get those of their
	// profile that exist.
	toolNames map[string]bool

	// tok counts messages when they are recorded; Register sets it from Deps.Tokenizer.
	tok *memory.Tokenizer

	// agents is the registry of Agents, built once by WithNode (nil: built on use).
	agents *Agents
}

// WithNode returns c bound to a node: tok counts the messages it records (nil: the
// shared tokenizer of the session's model) and tools are the names of the node's tools
// (sub-agents get those of their profile that exist). session.Register calls it.
func (c Config) WithNode(tok *memory.Tokenizer, tools []string) Config {
	c.tok = tok
	c.agents = c.Registry()
	c.toolNames = make(map[string]bool, len(tools))
	for _, name := range tools {
		c.toolNames[name] = true
	}
	return c
}

// Registry returns the agents sessions delegate to: the built-ins and Agents. Agents that
// NewAgents refuses (Validate reports them) are left out.
func (c Config) Registry() *Agents {
	if c.agents != nil {
		return c.agents
	}
	if len(c.Agents) == 0 {
		return builtinRegistry
	}
	a, err := NewAgents(c.Agents...)
	if err != nil {
		return builtinRegistry
	}
	return a
}

// DefaultMaxReplans is DefaultConfig's MaxReplans.
const DefaultMaxReplans = 2

// DefaultContextBudget is the default ContextBudget.
const DefaultContextBudget = 32000

// ContextConfig is the memory.BuildContext configuration of step calls.
func (c Config) ContextConfig() memory.ContextConfig {
	cc := memory.DefaultContextConfig()
	cc.Budget = DefaultContextBudget
	if c.ContextBudget > 0 {
		cc.Budget = c.ContextBudget
	}
	if c.ContextRatios != (memory.Ratios{}) {
		cc.Ratios = c.ContextRatios
	}
	return cc
}

// SummaryConfig is the summary trigger with defaults filled.
func (c Config) SummaryConfig() memory.SummaryConfig {
	if c.Summary == (memory.SummaryConfig{}) {
		return memory.DefaultSummaryConfig()
	}
	return c.Summary
}

func (c Config) maxParallelSubAgents() int {
	if c.MaxParallelSubAgents > 0 {
		return c.MaxParallelSubAgents
	}
	return DefaultMaxParallelSubAgents
}

func (c Config) subAgentMaxIterations() uint32 {
	if c.SubAgentMaxIterations > 0 {
		return c.SubAgentMaxIterations
	}
	return DefaultMaxIterations
}

// hasTool reports whether the node has tool name.
func (c Config) hasTool(name string) bool { return c.toolNames[name] }

// tokenizer is the tokenizer messages are counted with: Deps.Tokenizer once registered,
// else the shared o200k_base one.
func (c Config) tokenizer() *memory.Tokenizer {
	if c.tok != nil {
		return c.tok
	}
	t, _ := memory.GetTokenizer(memory.EncodingO200K)
	return t
}

// TokenizerFor is the tokenizer of a session whose model is model: the node's
// (Deps.Tokenizer) for the node's default model, the shared tokenizer of model's own
// encoding for a model memory.EncodingForModel knows, and the node's again for any
// other model. Encodings are built once per process and shared (memory.GetTokenizer).
func (c Config) TokenizerFor(model string) *memory.Tokenizer {
	if model == "" || model == c.Model {
		return c.tokenizer()
	}
	enc, ok := memory.EncodingForModel(model)
	if !ok || (c.tok != nil && c.tok.Name() == enc) {
		return c.tokenizer()
	}
	t, err := memory.GetTokenizer(enc)
	if err != nil {
		return c.tokenizer()
	}
	return t
}

// CountText returns text's token count for model (0 without a tokenizer).
func (c Config) CountText(model, text string) int {
	t := c.TokenizerFor(model)
	if t == nil {
		return 0
	}
	return t.Count(text)
}

// CounterFor is TokenizerFor as the context builder's message counter (nil without a
// tokenizer: the builder then bounds by bytes).
func (c Config) CounterFor(model string) memory.MessageCounter {
	if t := c.TokenizerFor(model); t != nil {
		return t
	}
	return nil
}

// CountMessage returns m's stored token count in a session whose model is model (0
// without a tokenizer).
func (c Config) CountMessage(model string, m llm.Message) uint32 {
	t := c.TokenizerFor(model)
	if t == nil {
		return 0
	}
	return uint32(t.CountMessage(m))
}

// CountMessageContext is CountMessage for a caller that can be cancelled: once ctx is
// done it stops tokenising (memory.WithContext) and returns the byte count, an upper
// bound, for a result nobody will record.
func (c Config) CountMessageContext(ctx context.Context, model string, m llm.Message) uint32 {
	t := c.TokenizerFor(model)
	if t == nil {
		return 0
	}
	return uint32(memory.WithContext(ctx, t).CountMessage(m))
}

// CountTextContext is CountText for a caller that can be cancelled (see
// CountMessageContext).
func (c Config) CountTextContext(ctx context.Context, model, text string) int {
	t := c.TokenizerFor(model)
	if t == nil {
		return 0
	}
	n, err := t.CountContext(ctx, text)
	if err != nil {
		return len(text)
	}
	return n
}

// DefaultConfig returns the defaults: 20 LLM calls, 10 steps, 3 attempts of a step
// whose model is unavailable, 45 s apart (longer than the breaker's 30 s open period,
// so a retry finds it half-open), 16 tool calls per turn, 2 re-plans after a
// sub-agent's step fails for good, and a session budget of 200 LLM calls (no cost or
// token bound).
func DefaultConfig() Config {
	return Config{
		Model:               "gpt-4o-mini",
		MaxIterations:       20,
		MaxSteps:            10,
		StepAttempts:        3,
		StepRetryDelay:      45 * time.Second,
		MaxToolCallsPerTurn: 16,
		MaxReplans:          DefaultMaxReplans,
		MaxLLMCalls:         DefaultMaxLLMCalls,
		Prices:              llm.DefaultPrices(),
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Model == "":
		return errors.New("session config: model is empty")
	case c.MaxIterations == 0:
		return errors.New("session config: max iterations must be positive")
	case c.MaxSteps == 0:
		return errors.New("session config: max steps must be positive")
	case c.StepRetryDelay <= 0:
		return errors.New("session config: timeouts must be positive")
	case c.StepAttempts == 0:
		return errors.New("session config: step attempts must be at least 1")
	case c.MaxToolCallsPerTurn == 0:
		return errors.New("session config: tool call bounds must be positive")
	case c.MaxToolResultBytes != 0 && (c.MaxToolResultBytes < MinMaxToolResultBytes || c.MaxToolResultBytes > MaxToolResultBytesLimit):
		return fmt.Errorf("session config: max tool result bytes %d must be 0 (the default, %d) or %d to %d", c.MaxToolResultBytes, DefaultMaxToolResultBytes, MinMaxToolResultBytes, MaxToolResultBytesLimit)
	case c.MaxParallelSubAgents < 0:
		return errors.New("session config: max parallel sub-agents must not be negative")
	case c.MaxReplans < 0:
		return errors.New("session config: max re-plans must not be negative")
	case c.ContextBudget < 0:
		return errors.New("session config: context budget must not be negative")
	case c.MaxCostUSD < 0 || math.IsNaN(c.MaxCostUSD) || math.IsInf(c.MaxCostUSD, 0):
		return fmt.Errorf("session config: max cost %g must be a finite number, 0 or more (0 = unlimited)", c.MaxCostUSD)
	}
	if _, err := NewAgents(c.Agents...); err != nil {
		return fmt.Errorf("session config: %w", err)
	}
	if err := c.Reasoning.Validate(); err != nil {
		return fmt.Errorf("session config: %w", err)
	}
	for agent, r := range c.AgentReasoning {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("session config: agent %s: %w", agent, err)
		}
		if _, ok := c.Registry().ByName(agent); !ok && agent != OrchestratorAgent {
			var names []string
			for _, a := range c.Registry().All() {
				names = append(names, a.Name)
			}
			return fmt.Errorf("session config: reasoning for unknown agent %q (want %s or an agent's name: %s)", agent, OrchestratorAgent, strings.Join(names, ", "))
		}
	}
	if err := c.ContextConfig().Validate(); err != nil {
		return fmt.Errorf("session config: %w", err)
	}
	if err := c.SummaryConfig().Validate(); err != nil {
		return fmt.Errorf("session config: %w", err)
	}
	return nil
}
