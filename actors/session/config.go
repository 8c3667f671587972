package session

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/extensions"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/fathom-agents/fathom/actors/subagent"
	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/prompts"
	"github.com/fathom-agents/fathom/tools"
)

// Config is the node-wide configuration of session grains. Per-session settings
// (model, max iterations, max steps) default to these and may be overridden at start.
type Config struct {
	// Model is the default LLM model of new sessions.
	Model string
	// MaxIterations is the default bound on LLM calls per session.
	MaxIterations uint32
	// MaxSteps is the default bound on the number of plan steps.
	MaxSteps uint32
	// SnapshotEvery saves a snapshot after this many events since the last one.
	SnapshotEvery uint64
	// IdleTimeout passivates a grain that received nothing for this long while no step
	// is in flight. Reactivation restores identical state from the journal.
	IdleTimeout time.Duration
	// FinishedIdleTimeout passivates a finished grain (completed, failed or cancelled)
	// that received nothing for this long, when shorter than IdleTimeout: a finished
	// session costs no memory once its last readers are done. Default 5 s; 0 means
	// IdleTimeout.
	FinishedIdleTimeout time.Duration
	// LLMTimeout bounds one LLM call, the provider's own retries included.
	LLMTimeout time.Duration
	// JournalTimeout bounds one journal operation made by the grain.
	JournalTimeout time.Duration
	// RetryBackoffMax caps the backoff between attempts to recover after a failed write.
	RetryBackoffMax time.Duration
	// StepAttempts bounds the runs of a plan or step whose LLM call failed retryably
	// (rate limited, provider down, breaker open); the last failure fails the session.
	StepAttempts uint32
	// StepRetryDelay is the wait before a retryably failed plan or step runs again. It
	// should outlast the provider's circuit breaker open period so the retry can probe.
	StepRetryDelay time.Duration
	// ToolTimeout bounds one tool call.
	ToolTimeout time.Duration
	// MaxToolCallsPerTurn bounds the tool calls run for one model answer; calls beyond
	// it get a validation ToolError asking the model to call again.
	MaxToolCallsPerTurn uint32
	// MaxParallelTools bounds the tool calls of one session running at once.
	MaxParallelTools int
	// PipelineDepth bounds the appends a grain has in flight or queued while it decides
	// ahead of the journal (pipelined commits, see pipeline.go); 0 commits every decision
	// before the next one.
	PipelineDepth int
	// Prices is the price table for cost accounting (nil: costs are 0).
	Prices llm.PriceTable
	// ContextBudget is the most prompt tokens a step call may cost (memory.BuildContext).
	// Default 32,000; 0 means the default.
	ContextBudget int
	// ContextRatios split the context budget between recent messages, the summary and
	// semantic hits. Zero means memory.DefaultRatios() (50/30/20).
	ContextRatios memory.Ratios
	// SemanticTopK is how many semantic hits a step call asks the vector store for.
	// Default 20; 0 means the default.
	SemanticTopK int
	// Summary is when the rolling summary is regenerated (threshold of unsummarized
	// tokens). Zero means memory.DefaultSummaryConfig().
	Summary memory.SummaryConfig
	// MaxParallelSubAgents bounds the sub-agents of one session running at once
	// (independent plan steps). 0 means DefaultMaxParallelSubAgents.
	MaxParallelSubAgents int
	// SubAgentMaxIterations bounds the LLM calls of one sub-agent run. 0 means
	// subagent.DefaultMaxIterations.
	SubAgentMaxIterations uint32
	// SubAgentTools replaces, by agent type (researcher, coder, writer, reviewer), the
	// tools a sub-agent may call (subagent.ProfileFor's defaults), e.g. to give one a
	// tool the node registered. Tools the node does not have are left out.
	SubAgentTools map[string][]string
	// MaxReplans bounds the re-plans of one session: when a sub-agent's step fails after
	// its StepAttempts are used up, the orchestrator asks for a new plan of the remaining
	// work (plan_revised) up to this many times; after that such a failure fails the
	// session. Default 2; 0 disables re-planning.
	MaxReplans int
	// LeaseTTL is how long a session's lease in the session index lasts unless the
	// activation that owns the session renews it (every LeaseTTL/3 while the session is
	// not terminal, and with every append). A session whose lease lapsed is activated again
	// by a node's reactivator. Default 10 s; 0 turns leases (and the node's reactivator)
	// off.
	LeaseTTL time.Duration
	// MaxLLMCalls, MaxCostUSD and MaxTokens are the session budgets of new sessions
	// (SessionConfig.max_llm_calls, max_cost_usd, max_tokens; a start request may set its
	// own): every LLM call of a session and its sub-agents counts (budget.go). 0 means
	// unlimited. Defaults: DefaultMaxLLMCalls calls, no cost or token bound.
	MaxLLMCalls uint32
	MaxCostUSD  float64
	MaxTokens   uint64
	// Endpoint is the model endpoint this node's provider calls, recorded in the config
	// of the sessions it starts (endpoint.go). Zero means unknown: nothing is recorded
	// and recorded endpoints are not checked.
	Endpoint Endpoint
	// AllowEndpointChange lets this node continue sessions started on another endpoint
	// (--allow-endpoint-change); otherwise it refuses to.
	AllowEndpointChange bool

	// toolNames are the node's tools (Register sets it): sub-agents get those of their
	// profile that exist.
	toolNames map[string]bool

	// tok counts messages when they are recorded; Register sets it from Deps.Tokenizer.
	tok *memory.Tokenizer
}

// DefaultLeaseTTL is DefaultConfig's LeaseTTL.
const DefaultLeaseTTL = 10 * time.Second

// DefaultMaxReplans is DefaultConfig's MaxReplans.
const DefaultMaxReplans = 2

// DefaultContextBudget is the default ContextBudget.
const DefaultContextBudget = 32000

// contextConfig is the memory.BuildContext configuration of step calls.
func (c Config) contextConfig() memory.ContextConfig {
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

// summaryConfig is the summary trigger with defaults filled.
func (c Config) summaryConfig() memory.SummaryConfig {
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
	return subagent.DefaultMaxIterations
}

// hasTool reports whether the node has tool name.
func (c Config) hasTool(name string) bool { return c.toolNames[name] }

func (c Config) topK() int {
	if c.SemanticTopK > 0 {
		return c.SemanticTopK
	}
	return 20
}

// tokenizer is the tokenizer messages are counted with: Deps.Tokenizer once registered,
// else the shared o200k_base one.
func (c Config) tokenizer() *memory.Tokenizer {
	if c.tok != nil {
		return c.tok
	}
	t, _ := memory.GetTokenizer(memory.EncodingO200K)
	return t
}

// tokenizerFor is the tokenizer of a session whose model is model: the node's
// (Deps.Tokenizer) for the node's default model, the shared tokenizer of model's own
// encoding for a model memory.EncodingForModel knows, and the node's again for any
// other model. Encodings are built once per process and shared (memory.GetTokenizer).
func (c Config) tokenizerFor(model string) *memory.Tokenizer {
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

// countMessage returns m's stored token count in a session whose model is model (0
// without a tokenizer).
// countText returns text's token count for model (0 without a tokenizer).
func (c Config) countText(model, text string) int {
	t := c.tokenizerFor(model)
	if t == nil {
		return 0
	}
	return t.Count(text)
}

// counterFor is tokenizerFor as the context builder's message counter (nil without a
// tokenizer: the builder then bounds by bytes).
func (c Config) counterFor(model string) memory.MessageCounter {
	if t := c.tokenizerFor(model); t != nil {
		return t
	}
	return nil
}

func (c Config) countMessage(model string, m llm.Message) uint32 {
	t := c.tokenizerFor(model)
	if t == nil {
		return 0
	}
	return uint32(t.CountMessage(m))
}

// DefaultConfig returns the defaults: 20 LLM calls, 10 steps, a snapshot every 20 events
// (about five steps' worth), passivation after 10 minutes idle, 3 attempts of a step
// whose model is unavailable, 45 s apart (longer than the breaker's 30 s open period,
// so a retry finds it half-open), tool calls bounded to 2 minutes, 16 per turn and 8 at
// once, 8 appends in flight or queued while the grain decides ahead, 2 re-plans after a
// sub-agent's step fails for good, and a session budget of 200 LLM calls (no cost or
// token bound).
func DefaultConfig() Config {
	return Config{
		Model:               "gpt-4o-mini",
		MaxIterations:       20,
		MaxSteps:            10,
		SnapshotEvery:       20,
		IdleTimeout:         10 * time.Minute,
		FinishedIdleTimeout: 5 * time.Second,
		LLMTimeout:          5 * time.Minute,
		JournalTimeout:      10 * time.Second,
		RetryBackoffMax:     10 * time.Second,
		StepAttempts:        3,
		StepRetryDelay:      45 * time.Second,
		ToolTimeout:         2 * time.Minute,
		MaxToolCallsPerTurn: 16,
		MaxParallelTools:    8,
		PipelineDepth:       8,
		MaxReplans:          DefaultMaxReplans,
		LeaseTTL:            DefaultLeaseTTL,
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
	case c.SnapshotEvery == 0:
		return errors.New("session config: snapshot interval must be positive")
	case c.IdleTimeout < time.Millisecond:
		return fmt.Errorf("session config: idle timeout %s is too short", c.IdleTimeout)
	case c.FinishedIdleTimeout < 0:
		return fmt.Errorf("session config: finished idle timeout %s is negative", c.FinishedIdleTimeout)
	case c.LLMTimeout <= 0 || c.JournalTimeout <= 0 || c.RetryBackoffMax <= 0 || c.ToolTimeout <= 0 || c.StepRetryDelay <= 0:
		return errors.New("session config: timeouts must be positive")
	case c.StepAttempts == 0:
		return errors.New("session config: step attempts must be at least 1")
	case c.MaxToolCallsPerTurn == 0 || c.MaxParallelTools <= 0:
		return errors.New("session config: tool call bounds must be positive")
	case c.MaxParallelSubAgents < 0:
		return errors.New("session config: max parallel sub-agents must not be negative")
	case c.PipelineDepth < 0:
		return errors.New("session config: pipeline depth must not be negative")
	case c.MaxReplans < 0:
		return errors.New("session config: max re-plans must not be negative")
	case c.LeaseTTL < 0 || (c.LeaseTTL > 0 && c.LeaseTTL < 30*time.Millisecond):
		return fmt.Errorf("session config: lease TTL %s must be 0 (no leases) or at least 30ms", c.LeaseTTL)
	case c.ContextBudget < 0 || c.SemanticTopK < 0:
		return errors.New("session config: context budget and semantic top-k must not be negative")
	case c.MaxCostUSD < 0 || math.IsNaN(c.MaxCostUSD) || math.IsInf(c.MaxCostUSD, 0):
		return fmt.Errorf("session config: max cost %g must be a finite number, 0 or more (0 = unlimited)", c.MaxCostUSD)
	}
	if err := c.contextConfig().Validate(); err != nil {
		return fmt.Errorf("session config: %w", err)
	}
	if err := c.summaryConfig().Validate(); err != nil {
		return fmt.Errorf("session config: %w", err)
	}
	return nil
}

// Publisher receives events right after they are durably stored, for live subscribers
// (live/feed.Feed). Publish must not block, and must not modify the events.
type Publisher interface {
	Publish(stream string, evs []*messages.Event)
}

// Deps are what session grains of one actor system run with. They are registered as an
// actor-system extension (see Register), so several nodes in one process each keep
// their own journal and provider.
type Deps struct {
	// Config is the grains' configuration.
	Config Config
	// Journal stores the events. Required.
	Journal persistence.Journal
	// LLM answers the planner and step calls. Required. The grain makes each call once:
	// retries, rate limits and the circuit breaker belong to the provider (llm/resilient).
	LLM llm.Provider
	// Tools runs the tool calls the model makes; nil means the model gets no tools.
	Tools *tools.Executor
	// Deltas receives the text deltas of streamed answers, for live subscribers. Nil
	// means answers are not streamed. PublishDelta must not block.
	Deltas DeltaPublisher
	// Prompts renders the system prompts. Nil means prompts.Default().
	Prompts *prompts.Set
	// Publisher is told of every stored event. Optional.
	Publisher Publisher
	// Metrics is told of every stored event, decoded (internal/metrics.Recorder). Optional;
	// Event must not block.
	Metrics EventObserver
	// Logger is the grains' logger. Nil means slog.Default().
	Logger *slog.Logger
	// Tracer makes the session and step spans. Nil means a no-op tracer.
	Tracer trace.Tracer
	// Now is the clock; nil means time.Now. Tests may set it.
	Now func() time.Time
	// Tokenizer counts every recorded message once (built once per node) in sessions of
	// the node's default model (Config.Model) and of models whose encoding is unknown; a
	// session of another known model counts with that model's encoding. Nil means the
	// tokenizer of Config.Model, falling back to o200k_base.
	Tokenizer *memory.Tokenizer
	// Embedder embeds the current step's description for semantic retrieval; Vectors
	// is searched with it. Either nil means no semantic tier.
	Embedder memory.Embedder
	Vectors  persistence.VectorStore
	// Embed, when set, is fed every committed message that has text (stream = session
	// id, seq = the event's seq). It must write into Vectors.
	Embed *memory.EmbedWorker
	// Reembed re-embeds a session's whole history when it is activated: for a vector
	// store that does not outlive the process (vectormem). Upserts replace by seq, so
	// it is idempotent.
	Reembed bool
	// Summarizer names the node's summarizer pool (actors/summarizer.Spawn's name,
	// resolved on the grain's actor system); "" means sessions keep no rolling summary.
	// The pool may be spawned after Register (it must be, after the cluster member
	// started): a request sent before it exists is dropped and asked again later.
	Summarizer string
	// Artifacts is the artifact store the tools write to; a fork copies the source's
	// artifacts into it under its own id. Nil means forks copy none.
	Artifacts artifact.Store

	specs []llm.ToolSpec // the tools as the model sees them, built once by Register

	// tmplTokens caches system-message token counts of rendered templates (by model and
	// text), at most maxTemplateTokens entries.
	tmplTokens sync.Map
	tmplCount  atomic.Int32
}

// maxTemplateTokens bounds Deps.tmplTokens: templates render per step type and model.
const maxTemplateTokens = 256

// templateTokens returns the token count of a system message holding the rendered
// template text, counted once per model.
func (d *Deps) templateTokens(model, text string) int {
	key := model + "\x00" + text
	if n, ok := d.tmplTokens.Load(key); ok {
		return n.(int)
	}
	n := int(d.Config.countMessage(model, llm.Message{Role: "system", Content: text}))
	if d.tmplCount.Load() < maxTemplateTokens {
		if _, loaded := d.tmplTokens.LoadOrStore(key, n); !loaded {
			d.tmplCount.Add(1)
		}
	}
	return n
}

// EventObserver is told of each event once it is stored (never of replayed ones).
type EventObserver interface {
	Event(ev *messages.Event)
}

// DeltaPublisher receives streamed text as the model produces it. Deltas are not
// journaled (the whole answer is, in llm_responded).
type DeltaPublisher interface {
	PublishDelta(stream string, d live.Delta)
}

var depsExtensionID = extensions.NextExtensionID()

// ExtensionID implements extensions.Extension.
func (d *Deps) ExtensionID() extensions.ExtensionID { return depsExtensionID }

// Register validates deps, fills defaults and installs them in system, where grains
// activated on it find them.
func Register(system *actor.ActorSystem, d *Deps) error {
	if d.Journal == nil {
		return errors.New("session deps: journal is required")
	}
	if d.LLM == nil {
		return errors.New("session deps: llm provider is required")
	}
	if err := d.Config.Validate(); err != nil {
		return err
	}
	if d.Prompts == nil {
		p, err := prompts.Default()
		if err != nil {
			return err
		}
		d.Prompts = p
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Tracer == nil {
		d.Tracer = noop.NewTracerProvider().Tracer("fathom/session")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Tools == nil {
		reg, err := tools.NewRegistry()
		if err != nil {
			return err
		}
		d.Tools = &tools.Executor{Registry: reg}
	}
	if d.Tools.Timeout == 0 {
		e := *d.Tools
		e.Timeout = d.Config.ToolTimeout
		d.Tools = &e
	}
	if d.Tokenizer == nil {
		t, err := memory.TokenizerForModel(d.Config.Model, memory.EncodingO200K)
		if err != nil {
			return err
		}
		d.Tokenizer = t
	}
	d.Config.tok = d.Tokenizer
	if err := CheckContextBudget(d.Config, d.Prompts, d.Tokenizer); err != nil {
		return err
	}
	d.specs = toolSpecs(d.Tools)
	d.Config.toolNames = make(map[string]bool, len(d.specs))
	for _, sp := range d.specs {
		d.Config.toolNames[sp.Name] = true
	}
	system.Extensions.Register(d)
	return nil
}

func depsOf(system *actor.ActorSystem) (*Deps, bool) {
	d, ok := system.Extensions.Get(depsExtensionID).(*Deps)
	return d, ok
}
