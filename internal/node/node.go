// Package node assembles one Fathom node: telemetry, the journal (embedded file or
// PostgreSQL), the live event feed, the LLM provider (a real OpenAI-compatible endpoint
// or the built-in demo model), the sandbox pool for code_execute (a configured sandbox
// or a local one), the session grain kind and the cluster member. Both
// `fathom run` and `fathom node` start exactly this.
package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/fathom-agents/fathom/webhooks"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"go.opentelemetry.io/otel/metric"

	mcpactor "github.com/fathom-agents/fathom/actors/mcp"
	"github.com/fathom-agents/fathom/actors/observer"
	"github.com/fathom-agents/fathom/actors/sandbox"
	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/auth"
	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/cluster/topics"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/backends"
	"github.com/fathom-agents/fathom/internal/errcode"
	"github.com/fathom-agents/fathom/internal/metrics"
	"github.com/fathom-agents/fathom/internal/quota"
	"github.com/fathom-agents/fathom/internal/sandboxd"
	"github.com/fathom-agents/fathom/internal/telemetry"
	"github.com/fathom-agents/fathom/live/feed"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/llm/resilient"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages/fsp"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/tools"
	mcptool "github.com/fathom-agents/fathom/tools/mcp"
)

// summarizerName is the name of the node's summarizer pool.
const summarizerName = "summarizers"

// JournalFile is the embedded journal's file name inside the data directory.
const JournalFile = backends.JournalFile

// DefaultFeedPoll is the feed's journal polling interval on a multi-member cluster: how
// late, at most, a gateway client sees live events of a session hosted on another member.
const DefaultFeedPoll = 500 * time.Millisecond

func (c Config) feedPoll() time.Duration {
	switch {
	case c.FeedPoll < 0:
		return 0
	case c.FeedPoll > 0:
		return c.FeedPoll
	case c.Cluster.Provider == "local":
		return 0
	}
	return DefaultFeedPoll
}

// Config is everything a node runs with.
type Config struct {
	// DataDir holds the embedded journal (DataDir/journal.db). Used when PostgresDSN is empty.
	DataDir string
	// PostgresDSN selects the PostgreSQL journal; migrations are applied at start.
	PostgresDSN string
	// JournalBackend names the journal backend (backends.Journals: "bolt", "postgres",
	// "memory"); "" is the default, backends.JournalName: postgres with PostgresDSN,
	// else bolt in DataDir.
	JournalBackend string
	// Journal, when set, is used instead of opening one by JournalBackend (tests,
	// embedding). It must be a persistence.SessionStore: Start fails naming the
	// capabilities it lacks. The node closes it on Stop.
	Journal persistence.Journal
	// Cluster configures the cluster member (provider, addresses).
	Cluster fcluster.Config
	// FeedPoll is how often live subscriptions to a session hosted on another member
	// read the journal (feed.Options.Poll). 0 means DefaultFeedPoll with a multi-member
	// provider (consul) and no polling with the local one; negative turns it off.
	FeedPoll time.Duration
	// Session configures the session grains.
	Session session.Config
	// SessionObservers are commit observers of the node's sessions (session.Observer),
	// told of every durable append after the node's own (the live feed, the metrics and
	// topics, the embed worker). Committed must not block.
	SessionObservers []session.Observer
	// LLM selects the model endpoint.
	LLM LLMConfig
	// Memory selects the vector store and the embedder; the zero value is the embedded
	// default (in-process store, hash embedder).
	Memory MemoryConfig
	// Tools runs the model's tool calls; nil means the built-in tools (tools/builtin),
	// web_search backed by FATHOM_SEARXNG_URL when set, the artifact tools backed by the
	// node's artifact store.
	Tools *tools.Executor
	// ExtraTools are registered beside the built-in (or Tools') tools: an embedding
	// program's own tools. A name already taken fails Start.
	ExtraTools []tools.Tool
	// SearXNGURL, when set, is the SearXNG instance web_search queries, in place of
	// FATHOM_SEARXNG_URL (its token stays FATHOM_SEARXNG_TOKEN).
	SearXNGURL string
	// Artifacts selects the artifact store (the session workspace).
	Artifacts ArtifactConfig
	// Sandbox selects the code sandbox external tools (code_execute) run in.
	Sandbox SandboxConfig
	// Telemetry selects the OpenTelemetry exporters.
	Telemetry telemetry.Config
	// MetricsListen, when set, is an address (host:port, :0 for any free port) on which the
	// node serves GET /metrics in the Prometheus text format, without the gateway.
	MetricsListen string
	// Pprof serves net/http/pprof's profiles under /debug/pprof/ on MetricsListen, for
	// operators (off by default: a profile shows the process's internals).
	Pprof bool
	// Retention, when positive, is how long terminal sessions are kept after their last
	// event: the node's janitor (actors/janitor) deletes older ones (delete.go).
	Retention time.Duration
	// Logger receives the node's structured logs. Nil means slog.Default().
	Logger *slog.Logger
	// PromptsDir, when set, holds prompt templates that replace the embedded ones file
	// by file (prompts.Load); a broken template fails Start.
	PromptsDir string
	// MCPServers are MCP servers (stdio or streamable HTTP) whose tools the node offers
	// as "{server}__{tool}", each kept connected by a supervised actor (actors/mcp). They
	// are connected at start, before sessions run: one that cannot be fails the start.
	// Their tools join the registry of Tools (the built-in one when Tools is nil).
	MCPServers []mcptool.ServerConfig
	// Quotas are the tenants' limits the node enforces (max_running_sessions,
	// max_tokens_per_day, max_cost_usd_per_day, tool_calls_per_minute: the session
	// grains; max_artifact_bytes: the artifact store's writes; internal/quota, from the
	// config file's tenant_defaults and tenants). The node fills in the index
	// (the journal's, when it keeps one), the crossings counter and the logger. With no
	// such limit set nothing is enforced.
	Quotas quota.Config
	// Webhooks configures the sessions' webhook notifications (package webhooks): with a
	// Secret the node signs and sends them to the webhook_url a session names (or
	// Session.WebhookURL); zero fields take webhooks.DefaultConfig's.
	Webhooks webhooks.Config
}

// LLMConfig selects the model endpoint. With neither APIKey nor BaseURL the node starts
// the built-in demo model (llm/mock) on a loopback port and talks to it over HTTP with
// the same client a real endpoint gets.
type LLMConfig struct {
	// API is the wire protocol: "openai" (chat completions, the default; any compatible
	// server) or "anthropic" (Messages API). Env FATHOM_LLM_API.
	API string
	// BaseURL of the API (env OPENAI_BASE_URL, or ANTHROPIC_BASE_URL for anthropic).
	BaseURL string
	// APIKey for it (env OPENAI_API_KEY, or ANTHROPIC_API_KEY for anthropic).
	APIKey string
	// Model overrides the sessions' default model (env FATHOM_MODEL).
	Model string
	// AttemptTimeout bounds one HTTP attempt; zero means the client's default (2m).
	AttemptTimeout time.Duration
	// Resilience configures retries, rate limits and the circuit breaker around the
	// provider (llm/resilient); zero values take its defaults.
	Resilience resilient.Config
	// FallbackModels are tried in order, on the same endpoint, when a call to the
	// session's model fails retryably after its retries.
	FallbackModels []string
	// NoStream asks for whole answers instead of streamed ones (no live deltas).
	NoStream bool
	// Provider, when set, is used as is instead of an HTTP client (embedding Fathom with
	// an in-process model, benchmarks); no resilience layer is added.
	Provider llm.Provider
	// DemoRules, with the built-in demo model (UsesDemo), are tried before the demo's
	// own script (llm/mock rules): a program scripts turns for its own tools and agents,
	// so it runs them end to end without an API key. Ignored with any other endpoint.
	DemoRules []mock.Rule
	// Limiters, when set, hands out the endpoint's rate limiter (keyed by base URL and
	// API key), so nodes of one process calling the same endpoint share its budget. Nil
	// means the node's own. Either way the sessions' client, the summarizer's and every
	// fallback model's share one limiter per endpoint.
	Limiters *resilient.Limiters
}

// SandboxConfig selects the sandbox external tools run in. With Client.URL set the node
// starts a pool of connections to it (actors/sandbox) and routes the executor's external
// tools through it, unless the executor already has an ExternalRunner. With neither a
// URL nor Local, external tools fail with "no sandbox is configured".
type SandboxConfig struct {
	// Client configures the sandbox client: URL, token, refresh URL, pool sizes
	// (sandbox.ConfigFromEnv reads SANDBOX_URL, SANDBOX_API_KEY, ...).
	Client sandbox.Config
	// Local starts a sandbox server (internal/sandboxd, as `fathom sandbox`) in-process on
	// a loopback port with a random token when Client.URL is empty, and connects to it.
	// When it cannot start (no bubblewrap, say), the external tools (code_execute) are not
	// offered at all and a warning at start says why.
	Local bool
	// LocalIsolation is the local sandbox's isolation ("" means sandboxd.IsolationAuto:
	// bubblewrap, required). Env FATHOM_SANDBOX_ISOLATION, as for `fathom sandbox`.
	LocalIsolation sandboxd.Isolation
}

// ArtifactConfig selects the artifact store (backends.ArtifactConfig).
type ArtifactConfig = backends.ArtifactConfig

// ArtifactsDir is the local artifact store's directory inside the data directory.
const ArtifactsDir = backends.ArtifactsDir

// Endpoint is the model endpoint this configuration calls, as sessions record it: the
// API ("openai" or "anthropic") and its base URL (the client's default when none is
// set), or "demo" for the built-in demo model (no URL: its port changes with every
// start). An in-process Provider is an unknown endpoint (zero): its sessions record none.
func (c LLMConfig) Endpoint() session.Endpoint {
	switch {
	case c.Provider != nil:
		return session.Endpoint{}
	case c.UsesDemo():
		return session.Endpoint{Provider: "demo"}
	}
	api := c.api()
	bc, _ := backends.LLMAPIs.Prepare(api, backends.LLMConfig{BaseURL: c.BaseURL}) // the API's default URL
	return session.Endpoint{Provider: api, BaseURL: bc.BaseURL}
}

// api is the model API c selects: API, else the default (backends.LLMAPIs).
func (c LLMConfig) api() string { return backends.LLMAPIs.Choose(c.API, backends.LLMConfig{}) }

// UsesDemo reports whether this configuration runs the built-in demo model.
func (c LLMConfig) UsesDemo() bool { return c.APIKey == "" && c.BaseURL == "" && c.Provider == nil }

// The wire protocols LLMConfig.API selects.
const (
	APIOpenAI    = "openai"
	APIAnthropic = "anthropic"
)

// LLMConfigFromEnv reads FATHOM_LLM_API, FATHOM_MODEL and the variables the API's
// backend reads for its key and base URL (backends.LLMAPIs: OPENAI_API_KEY and
// OPENAI_BASE_URL, or ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL).
func LLMConfigFromEnv(getenv func(string) string) LLMConfig {
	c := LLMConfig{API: getenv("FATHOM_LLM_API"), Model: getenv("FATHOM_MODEL")}
	bc := backends.LLMAPIs.FromEnv(c.api(), backends.LLMConfig{}, getenv)
	c.BaseURL, c.APIKey = bc.BaseURL, bc.APIKey
	return c
}

// Node is a running Fathom node. Stop releases everything Start acquired.
type Node struct {
	cfg Config
	// webhooks sends the sessions' webhook notifications (nil without a secret).
	webhooks *webhooks.Sender
	log      *slog.Logger
	tel      *telemetry.Providers
	journal  persistence.SessionStore
	feed     *feed.Feed
	member   *fcluster.Node
	demo     *demoModel
	sandbox  *sandbox.Pool
	local    *localSandbox
	// mcp keeps the MCP servers connected; nil without Config.MCPServers.
	mcp *mcpactor.Servers
	// artifacts is the session workspace; nil when there is none.
	artifacts artifact.Store
	embed     *memory.EmbedWorker
	vectors   persistence.VectorStore
	// longTerm is the long-term memory (longterm.go); nil when it is off.
	longTerm *longTermMemory
	// summaryLLM is the summarizer pool's provider.
	summaryLLM llm.Provider
	// observer logs, counts and keeps every supervision event of the node's actors.
	observer *observer.Observer
	// events is the grains' observer of the metrics and the pub-sub topics; topics publishes
	// on the cluster's pub-sub (topics.go).
	events eventObservers
	topics *topics.Publisher
	// liveTopics are the topic actors running on this member (the topic kind keeps it):
	// a session's topic placed here with none running has no subscriber (topics.go).
	liveTopics *topics.Live
	// reactivator is the session reactivator's actor; nil when reactivation is off.
	// reactivatorMu guards its stop (a drain and Stop both stop it).
	reactivator   *actor.PID
	reactivatorMu sync.Mutex
	// topologySub hurries the reactivator when a member joins or leaves (reactivator.go).
	topologySub *eventstream.Subscription
	// takeovers are the breakings of departed members' leases in flight (reactivator.go),
	// waited for before the journal closes.
	takeovers sync.WaitGroup
	// gateMember is member once made, for the sessions' journal format gate
	// (lowestFormat, clusterinfo.go), which appends call from their own goroutines.
	gateMember atomic.Pointer[fcluster.Node]
	// startedAt is when the node started (advertised in its membership, clusterinfo.go).
	startedAt time.Time
	// moves are the takeovers of departed members' sessions, by address (clusterinfo.go).
	moves moveLog
	// drainer drains the member before it hands its sessions over (drain.go).
	drainer drainer
	// janitor deletes terminal sessions past Config.Retention; nil without.
	janitor *actor.PID
	// dropper serves the cluster-wide session-data drops of deletes (dropper.go).
	dropper *actor.PID
	// breakers are the LLM providers' circuit breakers by name; gauges reads them at
	// each scrape (metrics.go).
	breakers map[string]*resilient.Provider
	// llmLimiter is the endpoint's budget the sessions' calls draw from (its call slots
	// are a gauge); nil with an in-process Provider.
	llmLimiter *resilient.Limiter
	// quotaMetrics counts the tenants' quota crossings and the LLM slots' waits (made
	// once, by quotaObserver).
	quotaMetrics *metrics.Quota
	// enforcer enforces the tenants' limits (quotas); nil until made, or when no tenant
	// has one.
	enforcer *quota.Enforcer
	// startQueue orders the starts waiting for a tenant's running session to end; made
	// with enforcer (nil without it).
	startQueue *errcode.StartQueue
	gauges     metric.Registration
	// metricsSrv serves /metrics on Config.MetricsListen; nil when not configured.
	metricsSrv *http.Server
	metricsLn  net.Listener
	// started are the components that started, in start order (components.go).
	started  []component
	stopOnce sync.Once
	stopErr  error
}

// Start starts the node's components (components.go) in order. On error the ones
// started so far are stopped again, in reverse.
func Start(ctx context.Context, cfg Config) (n *Node, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// A line logged with a context that carries a span gets its trace_id and span_id.
	cfg.Logger = slog.New(telemetry.LogHandler(cfg.Logger.Handler()))
	n = &Node{cfg: cfg, log: cfg.Logger, startedAt: time.Now().UTC(), liveTopics: topics.NewLive()}
	started := n // the named result is nil by the time a failing return reaches the defer
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = started.Stop(sctx)
		}
	}()
	b := &boot{}
	for _, c := range n.components(b) {
		if err := c.start(ctx); err != nil {
			return nil, err
		}
		n.started = append(n.started, c)
	}
	mc, _ := cfg.Memory.resolve(cfg.PostgresDSN, "") // validated by the memory component
	n.log.Info("node started", "address", n.member.Address(), "provider", cfg.Cluster.Provider, "journal", n.journalName(), "artifacts", b.artifactsAt, "llm", b.provider.Name(),
		"vector_store", mc.vectorStore, "embedder", mc.embedder, "embedding_dim", mc.ec.Dimensions)
	return n, nil
}

func (n *Node) journalName() string {
	if n.cfg.Journal != nil {
		return fmt.Sprintf("%T", n.cfg.Journal)
	}
	jc := n.journalConfig()
	return backends.Journals.Where(backends.JournalName(jc), jc)
}

func (n *Node) journalConfig() backends.JournalConfig {
	return backends.JournalConfig{Name: n.cfg.JournalBackend, DataDir: n.cfg.DataDir, DSN: n.cfg.PostgresDSN, Logger: n.cfg.Logger}
}

// openJournal opens the journal by Config.JournalBackend (backends.Journals), or checks
// that Config.Journal is a whole persistence.SessionStore: a journal that lacks a
// capability fails the start with its name and what it lacks, rather than a node
// running without leases, reactivation, deletes or listing.
func (n *Node) openJournal(ctx context.Context) (persistence.SessionStore, error) {
	if j := n.cfg.Journal; j != nil {
		return persistence.CheckSessionStore(fmt.Sprintf("%T", j), j)
	}
	return backends.OpenJournal(ctx, n.journalConfig())
}

// OpenJournal opens the PostgreSQL journal when dsn is set, else the embedded one in
// dataDir (backends.OpenJournal).
func OpenJournal(ctx context.Context, dataDir, dsn string, log *slog.Logger) (persistence.SessionStore, error) {
	return backends.OpenJournal(ctx, backends.JournalConfig{DataDir: dataDir, DSN: dsn, Logger: log})
}

// startLLM builds the provider the sessions call: the endpoint's client wrapped in the
// resilience layer (retries honouring Retry-After, rate limits, circuit breaker), with
// the fallback models behind it, each with its own breaker. The sessions, the
// summarizer and the fallback models have their own breakers but one rate limiter: the
// endpoint's limit is per key, not per client.
func (n *Node) startLLM(ctx context.Context) (llm.Provider, error) {
	if n.cfg.LLM.Provider != nil {
		n.summaryLLM = n.cfg.LLM.Provider
		return n.cfg.LLM.Provider, nil
	}
	base, endpoint, err := n.startClient(ctx)
	if err != nil {
		return nil, err
	}
	rcfg := n.cfg.LLM.Resilience
	if rcfg.Logger == nil {
		rcfg.Logger = n.log.With("component", "llm")
	}
	if rcfg.Limiter == nil {
		limiters := n.cfg.LLM.Limiters
		if limiters == nil {
			limiters = &resilient.Limiters{}
		}
		lc := rcfg.LimiterConfig()
		if err := lc.Validate(); err != nil {
			return nil, err
		}
		if lc.Observer == nil && n.tel != nil {
			q, err := n.quotaObserver()
			if err != nil {
				return nil, err
			}
			lc.Observer = q
		}
		rcfg.Limiter = limiters.ForConfig(endpoint, lc)
	}
	n.llmLimiter = rcfg.Limiter
	// The summarizer gets its own retry and breaker state: its failures must never open
	// the breaker the sessions' step calls go through.
	scfg := rcfg
	scfg.Logger = n.log.With("component", "llm", "for", "summarizer")
	n.summaryLLM = n.addBreaker("summarizer", resilient.New(base, scfg))
	primary := n.addBreaker("sessions", resilient.New(base, rcfg))
	if len(n.cfg.LLM.FallbackModels) == 0 {
		return primary, nil
	}
	fallbacks := make([]llm.Provider, 0, len(n.cfg.LLM.FallbackModels))
	for _, m := range n.cfg.LLM.FallbackModels {
		fallbacks = append(fallbacks, n.addBreaker("fallback:"+m, resilient.New(resilient.WithModel(base, m), rcfg)))
	}
	return resilient.NewFallback(primary, fallbacks...), nil
}

// startClient makes the endpoint's HTTP client and returns it with the endpoint's
// identity (the rate limit's key).
func (n *Node) startClient(ctx context.Context) (llm.Provider, resilient.Endpoint, error) {
	c := n.cfg.LLM
	api := c.api()
	bc := backends.LLMConfig{BaseURL: c.BaseURL, APIKey: c.APIKey, Model: c.Model, AttemptTimeout: c.AttemptTimeout}
	if c.UsesDemo() {
		if _, err := backends.LLMAPIs.Lookup(api); err != nil {
			return nil, resilient.Endpoint{}, fmt.Errorf("llm client: %w", err)
		}
		d, err := startDemo(n.log, c.DemoRules)
		if err != nil {
			return nil, resilient.Endpoint{}, err
		}
		n.demo = d
		bc.Demo = d.baseURL // serves every API, each under its own path
		at, _ := backends.LLMAPIs.Prepare(api, bc)
		n.log.Info("no API key or base URL: using the built-in demo model", "api", c.API, "base_url", at.BaseURL)
	}
	cl, err := backends.LLMAPIs.Open(ctx, api, bc)
	if err != nil {
		return nil, resilient.Endpoint{}, fmt.Errorf("llm client: %w", err)
	}
	return cl.Provider, cl.Endpoint, nil
}

// newSandbox starts the local sandbox server (if asked), makes the sandbox pool (started
// once the cluster member is) and returns the executor to use: a copy of exec routing
// external tools through the pool, or exec itself when there is no sandbox or exec
// already has an ExternalRunner.
func (n *Node) newSandbox(exec *tools.Executor) (*tools.Executor, error) {
	c := n.cfg.Sandbox.Client
	if c.URL == "" && n.cfg.Sandbox.Local {
		l, err := startLocalSandbox(n.log.With("component", "sandboxd"), n.cfg.Sandbox.LocalIsolation)
		if err != nil {
			// The rest of the node works without it; the model is not offered tools that
			// cannot run.
			return withoutExternal(exec, n.log, err)
		}
		n.local = l
		if c.PoolSize == 0 { // a zero Config: take the defaults
			c = sandbox.DefaultConfig()
		}
		c.URL, c.APIKey, c.RefreshURL = l.url, l.token, ""
		n.log.Info("no sandbox URL: started a local sandbox", "url", l.url)
	}
	if c.URL == "" || exec.External != nil {
		return exec, nil
	}
	if c.Logger == nil {
		c.Logger = n.log
	}
	if c.TenantWeight == nil { // the config file's tenant weights share the connections too
		q := n.cfg.Quotas
		c.TenantWeight = func(tenant string) int {
			if l, ok := q.Named[tenant]; ok {
				return l.Weight
			}
			return q.Default.Weight
		}
	}
	p, err := sandbox.New(c)
	if err != nil {
		return nil, err
	}
	n.sandbox = p
	routed := *exec
	routed.External = &sandbox.Runner{Pool: p, Output: n.publishOutput}
	return &routed, nil
}

// withoutExternal returns a copy of exec whose registry lacks the external tools
// (code_execute), and logs that they are not offered and why (cause).
func withoutExternal(exec *tools.Executor, log *slog.Logger, cause error) (*tools.Executor, error) {
	var kept []tools.Tool
	var dropped []string
	for _, t := range exec.Registry.Tools() {
		if t.SandboxMode() == tools.SandboxExternal {
			dropped = append(dropped, t.Name())
			continue
		}
		kept = append(kept, t)
	}
	if len(dropped) == 0 {
		return exec, nil
	}
	reg, err := tools.NewRegistry(kept...)
	if err != nil {
		return nil, fmt.Errorf("tool registry without the sandbox tools: %w", err)
	}
	log.Warn("no local sandbox: tools not offered (set SANDBOX_URL to a running `fathom sandbox`, install bubblewrap, or set FATHOM_SANDBOX_ISOLATION=rlimits)",
		"tools", dropped, "error", cause)
	out := *exec
	out.Registry = reg
	return &out, nil
}

// publishOutput streams a sandboxed tool's stdout and stderr to the session's live
// subscribers as feed deltas (never journaled: the tool_result records the whole output).
// The feed places them after the call's tool_called, published before the tool started.
func (n *Node) publishOutput(call tools.Call, c sandbox.Chunk) {
	if call.SessionID == "" {
		return
	}
	kind := feed.KindStdout
	if c.Stream == fsp.TypeStderr {
		kind = feed.KindStderr
	}
	n.feed.PublishDelta(call.SessionID, feed.Delta{Kind: kind, CallID: call.ID, StepID: call.StepID, Text: c.Data})
}

// Artifacts is the node's artifact store, nil when it has none.
func (n *Node) Artifacts() artifact.Store { return n.artifacts }

// Sandbox is the node's sandbox pool, nil when no sandbox is configured.
func (n *Node) Sandbox() *sandbox.Pool { return n.sandbox }

// UsesDemoModel reports whether the node answers with the built-in demo model.
func (n *Node) UsesDemoModel() bool { return n.demo != nil }

// Address is the node's cluster address (host:port).
func (n *Node) Address() string { return n.member.Address() }

// Journal is the node's event journal.
func (n *Node) Journal() persistence.SessionStore { return n.journal }

// Vectors is the node's vector store: the embeddings of the sessions' messages.
func (n *Node) Vectors() persistence.VectorStore { return n.vectors }

// Feed is the node's live event feed.
func (n *Node) Feed() *feed.Feed { return n.feed }

// Cluster is the node's cluster member.
func (n *Node) Cluster() *fcluster.Node { return n.member }

// Session returns a grain client for session id, as any service would use.
func (n *Node) Session(id string) *sessiongrain.SessionGrainClient {
	return sessiongrain.GetSessionGrainClient(n.member.Cluster(), id)
}

// GatewaySessions gives the gateway (gateway.Config.Sessions) the node's session grains:
// the grain clients of Session.
func (n *Node) GatewaySessions() gateway.Sessions { return gatewaySessions{n} }

// gatewaySessions implements gateway.Sessions over Node.Session.
type gatewaySessions struct{ n *Node }

func (s gatewaySessions) Session(id string) gateway.SessionGrain { return s.n.Session(id) }

// ReadArtifact implements gateway.ArtifactReader over the node's artifact store.
func (n *Node) ReadArtifact(ctx context.Context, tenant, path string) ([]byte, string, string, error) {
	if n.artifacts == nil {
		return nil, "", "", fmt.Errorf("%w: this node has no artifact store", gateway.ErrArtifactNotFound)
	}
	content, info, err := n.artifacts.Read(ctx, tenant, path)
	switch {
	case errors.Is(err, artifact.ErrNotFound):
		return nil, "", "", fmt.Errorf("%w: %v", gateway.ErrArtifactNotFound, err)
	case errors.Is(err, artifact.ErrInvalidPath):
		return nil, "", "", fmt.Errorf("%w: %v", gateway.ErrInvalidArtifactPath, err)
	case err != nil:
		return nil, "", "", err
	}
	return content, info.ContentType, info.SHA256, nil
}

// MetricsHandler serves the node's metrics in the Prometheus text format.
func (n *Node) MetricsHandler() http.Handler { return n.tel.MetricsHandler() }

// MetricsAddr is the address /metrics is served on with Config.MetricsListen ("" without).
func (n *Node) MetricsAddr() string {
	if n.metricsLn == nil {
		return ""
	}
	return n.metricsLn.Addr().String()
}

// serveMetrics serves GET /metrics on addr until Stop.
func (n *Node) serveMetrics(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener (--metrics-listen %s): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", n.tel.MetricsHandler())
	if n.cfg.Pprof {
		mountPprof(mux)
	}
	n.metricsLn = ln
	n.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() {
		if err := n.metricsSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("metrics listener stopped", "address", ln.Addr().String(), "error", err)
		}
	}()
	n.log.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics", "pprof", n.cfg.Pprof)
	return nil
}

// Restarts returns the node's recent supervision events (oldest first, at most 1,000).
func (n *Node) Restarts(ctx context.Context) ([]observer.Restart, error) {
	return n.observer.Recent(ctx)
}

// Stop stops the components that started, in reverse order (components.go): the
// reactivator and the janitor, then the hand-over (the member leaves the topology and
// its grains stop at a boundary, releasing their leases, so the other members continue
// them at once), then the sandbox pool, the observer, the member, ... and last the
// journal and telemetry. It is idempotent.
func (n *Node) Stop(ctx context.Context) error {
	n.stopOnce.Do(func() {
		var errs []error
		for i := len(n.started) - 1; i >= 0; i-- {
			c := n.started[i]
			if c.stop == nil {
				continue
			}
			if err := c.stop(ctx); err != nil {
				errs = append(errs, fmt.Errorf("stop %s: %w", c.name, err))
			}
		}
		n.stopErr = errors.Join(errs...)
	})
	return n.stopErr
}

// demoModel is the built-in demo model served on a loopback port.
type demoModel struct {
	baseURL string
	srv     *http.Server
	done    chan error
}

func startDemo(log *slog.Logger, rules []mock.Rule) (*demoModel, error) {
	script := mock.DemoScript()
	script.Rules = append(slices.Clone(rules), script.Rules...)
	m := mock.New(mock.Config{Script: script, Logger: log.With("component", "demo-model")})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start demo model: %w", err)
	}
	d := &demoModel{baseURL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second}, done: make(chan error, 1)}
	go func() { d.done <- d.srv.Serve(ln) }()
	return d, nil
}

// stop closes the demo model's server and its connections at once: it stops after the
// sessions and summarizers that call it, and a graceful shutdown would wait (up to 5 s)
// for a connection the client dialled but never used.
func (d *demoModel) stop(ctx context.Context) error {
	if err := d.srv.Close(); err != nil {
		return fmt.Errorf("stop demo model: %w", err)
	}
	select {
	case err := <-d.done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("demo model: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// localSandbox is a sandbox server (internal/sandboxd) served on a loopback port for a
// node that has no sandbox URL.
type localSandbox struct {
	url, token string
	srv        *sandboxd.Server
	http       *http.Server
	done       chan error
}

func startLocalSandbox(log *slog.Logger, isolation sandboxd.Isolation) (*localSandbox, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("local sandbox token: %w", err)
	}
	cfg := sandboxd.DefaultConfig()
	cfg.Token = hex.EncodeToString(b)
	if isolation != "" {
		cfg.Isolation = isolation
	}
	srv, err := sandboxd.New(cfg, log)
	if err != nil {
		return nil, fmt.Errorf("start local sandbox: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = srv.Close(context.Background())
		return nil, fmt.Errorf("start local sandbox: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(fsp.Path, srv)
	l := &localSandbox{url: "ws://" + ln.Addr().String() + fsp.Path, token: cfg.Token, srv: srv,
		http: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, done: make(chan error, 1)}
	go func() { l.done <- l.http.Serve(ln) }()
	return l, nil
}

// stop closes the sandbox (its connections and executions), then the listener.
func (l *localSandbox) stop(ctx context.Context) error {
	errs := []error{l.srv.Close(ctx), l.http.Shutdown(ctx)}
	if err := <-l.done; !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Tenancy is the tenancy policy the node's session grains enforce (its gateway must
// list sessions by the same one).
func (n *Node) Tenancy() auth.Policy { return n.cfg.Session.Tenancy }

// Agents are the agents the node's sessions delegate to: the built-ins, then the
// configuration's own, in order.
func (n *Node) Agents() []core.AgentSpec { return n.cfg.Session.Registry().All() }
