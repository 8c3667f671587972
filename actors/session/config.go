package session

import (
	"context"
	"errors"
	"fmt"
	"github.com/fathom-agents/fathom/webhooks"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/extensions"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/prompts"
	"github.com/fathom-agents/fathom/tools"
)

// Core is the decision settings of session grains (core.Config): what the core's
// decisions read. Config embeds it, so its fields read as Config's own.
type Core = core.Config

// Config is the node-wide configuration of session grains: the decision settings (Core,
// embedded: cfg.Model, cfg.MaxIterations, ... as before) and the shell's own, which no
// decision reads: the timeouts of the calls and of the journal, the grain's passivation,
// leases, snapshot cadence, pipeline depth, tenancy and semantic retrieval. Validate
// checks both.
type Config struct {
	Core

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
	// ToolTimeout bounds one tool call.
	ToolTimeout time.Duration
	// MaxParallelTools bounds the tool calls of one session running at once.
	MaxParallelTools int
	// PipelineDepth bounds the appends a grain has in flight or queued while it decides
	// ahead of the journal (pipelined commits, see pipeline.go); 0 commits every decision
	// before the next one.
	PipelineDepth int
	// LeaseTTL is how long a session's lease in the session index lasts unless the
	// activation that owns the session renews it (every LeaseTTL/3 while the session is
	// not terminal, and with every append). A session whose lease lapsed is activated again
	// by a node's reactivator. Default 10 s; 0 turns leases (and the node's reactivator)
	// off.
	LeaseTTL time.Duration
	// DrainTimeout is how long a draining member (fathom node drain, a graceful stop),
	// and a session grain whose identity moved to a member that joined (move.go), let the
	// running LLM and tool calls finish before the sessions are handed over anyway (a
	// call cut then runs again on the member that continues the session). Default
	// DefaultDrainTimeout; 0 hands over at once.
	DrainTimeout time.Duration
	// Tenancy is the node's tenancy policy: who of a session's tenant may read and act
	// on it (auth.Policy.Allowed). Grain requests carry their caller; the grain checks
	// it, and the gateway lists sessions by it.
	Tenancy auth.Policy
	// SemanticTopK is how many semantic hits a step call asks the vector store for.
	// Default 20; 0 means the default.
	SemanticTopK int
	// Retrieval is how the semantic hits are ranked (config key memory.retrieval, flag
	// --memory-retrieval): hybrid (the default: the vector and the text ranking fused by
	// reciprocal rank fusion, with its weights), vector or text. A vector store that is
	// not a persistence.TextSearcher ranks by vector.
	Retrieval persistence.Retrieval
}

// Endpoint is a model endpoint recorded in a session's config (core.Endpoint).
type Endpoint = core.Endpoint

// DefaultLeaseTTL is DefaultConfig's LeaseTTL.
const DefaultLeaseTTL = 10 * time.Second

// DefaultDrainTimeout is DefaultConfig's DrainTimeout.
const DefaultDrainTimeout = 30 * time.Second

// Defaults of Config's decision settings (see core).
const (
	DefaultMaxReplans           = core.DefaultMaxReplans
	DefaultContextBudget        = core.DefaultContextBudget
	DefaultMaxParallelSubAgents = core.DefaultMaxParallelSubAgents
	DefaultMaxLLMCalls          = core.DefaultMaxLLMCalls
)

// DefaultConfig returns core.DefaultConfig() with the shell's defaults: a snapshot every
// 20 events (about five steps' worth), passivation after 10 minutes idle (5 s once
// finished), LLM calls bounded to 5 minutes, journal operations to 10 s, tool calls to
// 2 minutes and 8 at once, 8 appends in flight or queued while the grain decides ahead,
// leases of DefaultLeaseTTL and drains of DefaultDrainTimeout.
func DefaultConfig() Config {
	return Config{
		Core:                core.DefaultConfig(),
		SnapshotEvery:       20,
		IdleTimeout:         10 * time.Minute,
		FinishedIdleTimeout: 5 * time.Second,
		LLMTimeout:          5 * time.Minute,
		JournalTimeout:      10 * time.Second,
		RetryBackoffMax:     10 * time.Second,
		ToolTimeout:         2 * time.Minute,
		MaxParallelTools:    8,
		PipelineDepth:       8,
		LeaseTTL:            DefaultLeaseTTL,
		DrainTimeout:        DefaultDrainTimeout,
	}
}

// Validate reports the first invalid field: of the shell's settings, then of Core.
func (c Config) Validate() error {
	switch {
	case c.SnapshotEvery == 0:
		return errors.New("session config: snapshot interval must be positive")
	case c.IdleTimeout < time.Millisecond:
		return fmt.Errorf("session config: idle timeout %s is too short", c.IdleTimeout)
	case c.FinishedIdleTimeout < 0:
		return fmt.Errorf("session config: finished idle timeout %s is negative", c.FinishedIdleTimeout)
	case c.LLMTimeout <= 0 || c.JournalTimeout <= 0 || c.RetryBackoffMax <= 0 || c.ToolTimeout <= 0:
		return errors.New("session config: timeouts must be positive")
	case c.MaxParallelTools <= 0:
		return errors.New("session config: tool call bounds must be positive")
	case c.PipelineDepth < 0:
		return errors.New("session config: pipeline depth must not be negative")
	case c.DrainTimeout < 0:
		return fmt.Errorf("session config: drain timeout %s must not be negative", c.DrainTimeout)
	case c.LeaseTTL < 0 || (c.LeaseTTL > 0 && c.LeaseTTL < 30*time.Millisecond):
		return fmt.Errorf("session config: lease TTL %s must be 0 (no leases) or at least 30ms", c.LeaseTTL)
	case c.SemanticTopK < 0:
		return errors.New("session config: semantic top-k must not be negative")
	}
	if err := c.Retrieval.Validate(); err != nil {
		return fmt.Errorf("session config: %w", err)
	}
	return c.Core.Validate()
}

// TopK is how many semantic hits a step call asks for (SemanticTopK, default 20).
func (c Config) TopK() int {
	if c.SemanticTopK > 0 {
		return c.SemanticTopK
	}
	return 20
}

// CheckContextBudget is core.CheckContextBudget.
func CheckContextBudget(c Config, p *prompts.Set, tok *memory.Tokenizer) error {
	return core.CheckContextBudget(c.Core, p, tok)
}

// Deps are what session grains of one actor system run with. They are registered as an
// actor-system extension (see Register), so several nodes in one process each keep
// their own journal and provider.
type Deps struct {
	// Config is the grains' configuration: the decision settings (Config.Core) and the
	// shell's.
	Config Config
	// Journal stores the events and keeps the session index and the leases. Required.
	Journal persistence.SessionStore
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
	// Observers are told of every durable append, in this order (observer.go): the
	// node's live feed (PublishTo), its metrics and cluster topics, its embed worker
	// (Embedding). Register puts the grain's own observers in front of them.
	Observers []Observer
	// Logger is the grains' logger. Nil means slog.Default().
	Logger *slog.Logger
	// Tracer makes the session's spans, one trace per session (trace.go). Its provider
	// must use telemetry.IDGenerator (the node's does) for the long spans to keep their
	// derived ids. Nil means a no-op tracer.
	Tracer trace.Tracer
	// Sampled reports whether the sampler records the root span of a trace
	// (telemetry.Providers.RootSampled): the session's other spans follow that decision.
	// Nil means every session's spans are sampled.
	Sampled func(trace.TraceID) bool
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
	// LongTerm, when set, finds the user's long-term memories (persistence/ltm) for the
	// orchestrator's context and for sub-agents whose agent may read memory.
	LongTerm LongTermSearcher
	// Summarizer names the node's summarizer pool (actors/summarizer.Spawn's name,
	// resolved on the grain's actor system); "" means sessions keep no rolling summary.
	// The pool may be spawned after Register (it must be, after the cluster member
	// started): a request sent before it exists is dropped and asked again later.
	Summarizer string
	// Artifacts is the artifact store the tools write to; a fork copies the source's
	// artifacts into it under its own id. Nil means forks copy none.
	Artifacts artifact.Store
	// Quotas enforces the tenants' limits (internal/quota.Enforcer); nil enforces none.
	Quotas Quotas
	// Drain, when set, is the member's drain of its grains (drain.go): the node begins
	// it before it hands its sessions over. Nil: grains are never drained.
	Drain *Drain
	// Webhooks sends the sessions' webhook notifications (webhook.go); nil sends none
	// (Config.Webhooks must then be false).
	Webhooks *webhooks.Sender

	// specs caches the registry's tools as the model sees them (toolSpecs).
	specs atomic.Pointer[toolSpecs]

	// tmplTokens caches system-message token counts of rendered templates (by
	// tmplKey), at most maxTemplateTokens entries.
	tmplTokens sync.Map
	tmplCount  atomic.Int32

	// observers are the grain's own observers followed by Observers (Register).
	observers []Observer

	// snapshotSaves holds a token per snapshot save in flight on the node (snapshot.go;
	// made by Register, nil: no bound).
	snapshotSaves chan struct{}

	// traceIDsWarned is set once a tracer provider without telemetry.IDGenerator was
	// warned about (trace.go).
	traceIDsWarned atomic.Bool
}

// tmplKey names a cached template count: the model and the rendered template.
type tmplKey struct{ model, text string }

// maxTemplateTokens bounds Deps.tmplTokens: templates render per step type and model.
const maxTemplateTokens = 256

// templateTokens returns the token count of a system message holding the rendered
// template text, counted once per model.
func (d *Deps) templateTokens(model, text string) int {
	key := tmplKey{model, text} // not a concatenation: a lookup copies no template
	if n, ok := d.tmplTokens.Load(key); ok {
		return n.(int)
	}
	n := int(d.Config.CountMessage(model, llm.Message{Role: "system", Content: text}))
	if d.tmplCount.Load() < maxTemplateTokens {
		if _, loaded := d.tmplTokens.LoadOrStore(key, n); !loaded {
			d.tmplCount.Add(1)
		}
	}
	return n
}

// Quotas are the tenants' limits as the session grains enforce them
// (internal/quota.Enforcer). Its methods are safe for concurrent use.
type Quotas interface {
	// AdmitStart decides a start (or fork) of a session of tenant: "" admits it;
	// otherwise the refusal's message (max_running_sessions) and how long the caller
	// should wait before it retries.
	AdmitStart(ctx context.Context, tenant string) (refusal string, retryAfter time.Duration)
	// StartQueue is how long a start of tenant refused by AdmitStart may wait for a
	// session of the tenant to end (its start_queue_timeout; 0: refused at once).
	StartQueue(tenant string) time.Duration
	// DailyBudget returns why tenant may make no more LLM calls today, counting tokens
	// and cost not stored yet, or "" when it may (core.Config.TenantBudget).
	DailyBudget(tenant string, tokens uint64, cost float64) string
	// Used adds the tokens and cost of an answer just stored to tenant's usage.
	Used(tenant string, tokens uint64, cost float64)
	// Ended tells of a session of tenant that has just ended (its terminal event is
	// stored): it no longer counts against max_running_sessions.
	Ended(tenant string)
	// WaitToolCall delays a tool call of tenant while the tenant is over its rate; it
	// fails only when ctx ends first.
	WaitToolCall(ctx context.Context, tenant string) error
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
	d.observers = []Observer{lifecycleLog{}}
	d.snapshotSaves = make(chan struct{}, maxSnapshotSaves)
	if d.Quotas != nil {
		d.observers = append(d.observers, quotaUsage{d.Quotas})
	}
	for _, o := range d.Observers {
		if o == nil {
			return errors.New("session deps: an observer is nil")
		}
	}
	d.observers = append(d.observers, d.Observers...)
	if d.Quotas != nil && d.Config.TenantBudget == nil {
		d.Config.TenantBudget = d.Quotas.DailyBudget
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
	specs := d.toolSpecs()
	names := make([]string, 0, len(specs))
	for _, sp := range specs {
		names = append(names, sp.Name)
	}
	d.Config.Core = d.Config.Core.WithNode(d.Tokenizer, names).WithArgsCheck(d.Tools.Registry.Validate)
	if err := d.Config.CheckApprovalTools(); err != nil {
		return err
	}
	if err := d.Config.Registry().CheckTools(d.Config.HasTool); err != nil {
		return fmt.Errorf("session deps: %w", err)
	}
	withAgents, err := d.Config.Registry().PromptSet(d.Prompts)
	if err != nil {
		return fmt.Errorf("session deps: %w", err)
	}
	d.Prompts = withAgents
	if err := core.CheckContextBudget(d.Config.Core, d.Prompts, d.Tokenizer); err != nil {
		return err
	}
	system.Extensions.Register(d)
	return nil
}

// toolSpecs is the tool list of one registry version.
type toolSpecs struct {
	version uint64
	list    []llm.ToolSpec
}

// toolSpecs returns the registry's tools as the model sees them, rebuilt when the
// registry changed since (an MCP server's notifications/tools/list_changed adds or
// removes tools at run time), so every model call is offered the tools there are now.
func (d *Deps) toolSpecs() []llm.ToolSpec {
	v := d.Tools.Registry.Version()
	if c := d.specs.Load(); c != nil && c.version == v {
		return c.list
	}
	c := &toolSpecs{version: v, list: core.ToolSpecs(d.Tools)}
	d.specs.Store(c)
	return c.list
}

func depsOf(system *actor.ActorSystem) (*Deps, bool) {
	d, ok := system.Extensions.Get(depsExtensionID).(*Deps)
	return d, ok
}
