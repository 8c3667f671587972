package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	fathomapi "github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/actors/agent"
	"github.com/fathom-agents/fathom/actors/sandbox"
	"github.com/fathom-agents/fathom/actors/session"
	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/gateway/a2a"
	"github.com/fathom-agents/fathom/internal/backends"
	"github.com/fathom-agents/fathom/internal/config"
	"github.com/fathom-agents/fathom/internal/sandboxd"
	"github.com/fathom-agents/fathom/internal/telemetry"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/resilient"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/prompts"
	"github.com/fathom-agents/fathom/tools/builtin"
)

// storeFlags select the journal: by name (--journal), else the embedded file in
// --data-dir, or PostgreSQL when a DSN is given.
type storeFlags struct {
	// journal is --journal: a backend of backends.Journals, "" for the default.
	journal  string
	dataDir  string
	postgres string
}

func (f *storeFlags) register(fs *flag.FlagSet, defaultDataDir string) {
	fs.StringVar(&f.journal, "journal", os.Getenv("FATHOM_JOURNAL"), "event journal: "+backends.Journals.Help()+" (default: postgres when --postgres is set, else bolt; env FATHOM_JOURNAL, config key journal)")
	fs.StringVar(&f.dataDir, "data-dir", envOr("FATHOM_DATA_DIR", defaultDataDir), "directory of the embedded journal (env FATHOM_DATA_DIR)")
	fs.StringVar(&f.postgres, "postgres", os.Getenv("FATHOM_POSTGRES_DSN"), "PostgreSQL DSN; when set, the journal is PostgreSQL instead of the data dir (env FATHOM_POSTGRES_DSN)")
}

// journalConfig is the journal the flags select (backends.JournalName defaults it).
func (f *storeFlags) journalConfig() backends.JournalConfig {
	return backends.JournalConfig{Name: f.journal, DataDir: f.dataDir, DSN: f.postgres}
}

// checkJournal refuses a journal name no backend is registered for, listing the valid
// ones.
func (f *storeFlags) checkJournal() error {
	if f.journal != "" && !backends.Journals.Has(f.journal) {
		return usageError("bad --journal %q: want %s", f.journal, journalNames())
	}
	return nil
}

// where says where the selected journal keeps the events, for people.
func (f *storeFlags) where() string {
	jc := f.journalConfig()
	return backends.Journals.Where(backends.JournalName(jc), jc)
}

// ephemeral reports whether the selected journal keeps nothing past the process.
func (f *storeFlags) ephemeral() bool {
	b, err := backends.Journals.Lookup(backends.JournalName(f.journalConfig()))
	return err == nil && b.Ephemeral
}

// journalNames lists the journal backends: "bolt, memory or postgres".
func journalNames() string { return orList(backends.Journals.Names()) }

// orList lists names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// logFlags configure log/slog.
type logFlags struct {
	level  string
	format string
}

func (f *logFlags) register(fs *flag.FlagSet, defaultLevel string) {
	fs.StringVar(&f.level, "log-level", envOr("FATHOM_LOG_LEVEL", defaultLevel), "log level: debug, info, warn, error (env FATHOM_LOG_LEVEL)")
	fs.StringVar(&f.format, "log-format", envOr("FATHOM_LOG_FORMAT", "text"), "log format: text or json (env FATHOM_LOG_FORMAT)")
}

func (f *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(f.level)); err != nil {
		return nil, usageError("bad --log-level %q: %v", f.level, err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(f.format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError("bad --log-format %q: want text or json", f.format)
}

// defaultConsulCheckTTL is --consul-check-ttl's default (the Consul provider's own).
const defaultConsulCheckTTL = 2 * time.Second

// defaultPauseGrace is --pause-grace's default (the Consul provider's own default).
const defaultPauseGrace = 60 * time.Second

// nodeFlags are the flags of every command that starts a node.
type nodeFlags struct {
	store         storeFlags
	logs          logFlags
	model         string
	maxIterations uint
	maxSteps      uint
	maxReplans    uint
	// subAgents bound sub-agents: how many run at once, LLM calls per run.
	maxParallelSubAgents, subAgentIterations uint
	idleTimeout                              time.Duration
	llmTimeout                               time.Duration
	toolTimeout                              time.Duration
	stepAttempts                             uint
	stepRetry                                time.Duration
	prices                                   string
	searxngURL                               string
	llmAttempts                              int
	llmRPM                                   int
	llmTPM                                   int
	breakerFails                             uint
	breakerOpen                              time.Duration
	fallbacks                                string
	noStream                                 bool
	llmAPI                                   string
	otelExporter                             string
	metricsListen                            string
	otelEndpoint                             string
	provider                                 string
	consul                                   string
	clusterHost                              string
	clusterPort                              int
	clusterName                              string
	sandbox                                  sandboxFlags
	artifacts                                artifactFlags
	promptsDir                               string
	memory                                   memoryFlags
	// leaseTTL is --lease-ttl: how long a running session's lease lasts (0: leases off).
	leaseTTL envDuration
	// pauseGrace is --pause-grace: how long a paused Consul member stays in the topology.
	pauseGrace envDuration
	// consulCheckTTL is --consul-check-ttl: the TTL of a member's Consul health check.
	consulCheckTTL envDuration
	reasoning      reasoningFlags
	retention      retentionFlags
	webhooks       webhookFlags
	toolResult     toolResultFlags
	drain          drainFlags
	tenancy        tenancyFlags
	pprof          pprofFlags
	quota          quotaFlags
	// Session budgets (every LLM call of a session and its sub-agents) and the
	// endpoint override.
	maxLLMCalls         optionalUint
	maxCostUSD          float64
	maxTokens           uint64
	allowEndpointChange bool
	// configFile is the YAML configuration file (internal/config): agents, MCP servers.
	configFile string
	// file is configFile as read by config (nil without one).
	file *config.File
	// replay is the node flags given on the command line, as replayFlags renders them:
	// what a later command on the same session must repeat.
	replay string
	// commandIDGiven: the command line named the command id (a retry, perhaps of a
	// command already applied).
	commandIDGiven bool
}

// replayFlags renders the flags set on fs's command line, except skip and secrets
// (tokens, keys), as " --name value" each, shell-quoted: the node flags a later
// `fathom session input` needs to serve the session as this command did (its --config
// agents, tools and MCP servers, its journal, its model API).
func replayFlags(fs *flag.FlagSet, skip ...string) string {
	var b strings.Builder
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(skip, f.Name) || strings.Contains(f.Name, "token") || strings.Contains(f.Name, "key") {
			return
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			if f.Value.String() == "true" {
				fmt.Fprintf(&b, " --%s", f.Name)
			} else {
				fmt.Fprintf(&b, " --%s=false", f.Name)
			}
			return
		}
		fmt.Fprintf(&b, " --%s %s", f.Name, shellQuote(f.Value.String()))
	})
	return b.String()
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// sandboxFlags configure the sandbox client (actors/sandbox), by the seed's environment
// variables or flags.
type sandboxFlags struct {
	url, token, refreshURL string
	poolSize, overflow     int
}

func (f *sandboxFlags) register(fs *flag.FlagSet) {
	d := sandbox.DefaultConfig()
	fs.StringVar(&f.url, "sandbox-url", os.Getenv(sandbox.EnvURL), "WebSocket URL of the FSP v1 sandbox that runs code_execute, e.g. ws://127.0.0.1:7070/ws (env "+sandbox.EnvURL+")")
	fs.StringVar(&f.token, "sandbox-token", os.Getenv(sandbox.EnvAPIKey), "bearer token for the sandbox (env "+sandbox.EnvAPIKey+")")
	fs.StringVar(&f.refreshURL, "sandbox-refresh-url", os.Getenv(sandbox.EnvRefreshURL), "optional endpoint that exchanges the sandbox token for a fresh one (env "+sandbox.EnvRefreshURL+")")
	fs.IntVar(&f.poolSize, "sandbox-pool-size", int(envUint(sandbox.EnvPoolSize, uint64(d.PoolSize))), "sandbox connections kept open (env "+sandbox.EnvPoolSize+")")
	fs.IntVar(&f.overflow, "sandbox-pool-overflow", int(envUint(sandbox.EnvPoolOverflow, uint64(d.PoolOverflow))), "extra sandbox connections opened while all are busy (env "+sandbox.EnvPoolOverflow+")")
}

// config returns the client configuration; with no URL it is returned unvalidated (no
// sandbox, or a local one).
func (f *sandboxFlags) config(log *slog.Logger) (sandbox.Config, error) {
	c := sandbox.DefaultConfig()
	c.URL, c.APIKey, c.RefreshURL = f.url, f.token, f.refreshURL
	c.PoolSize, c.PoolOverflow = f.poolSize, f.overflow
	c.Logger = log.With("component", "sandbox")
	if c.URL == "" {
		return c, nil
	}
	if err := c.Validate(); err != nil {
		return sandbox.Config{}, usageError("%v", err)
	}
	return c, nil
}

func (f *nodeFlags) register(fs *flag.FlagSet, defaultDataDir, defaultLevel string) {
	f.store.register(fs, defaultDataDir)
	f.logs.register(fs, defaultLevel)
	d := session.DefaultConfig()
	fs.StringVar(&f.model, "model", os.Getenv("FATHOM_MODEL"), "default model of new sessions (env FATHOM_MODEL; default "+d.Model+")")
	fs.UintVar(&f.maxIterations, "max-iterations", uint(envUint("FATHOM_MAX_ITERATIONS", uint64(d.MaxIterations))), "max LLM calls of the orchestrator in one turn: planning, the steps it runs itself, re-plans and the closing summary; sub-agents' calls are bounded by --subagent-max-iterations (each run) and every call of the session by --max-llm-calls (env FATHOM_MAX_ITERATIONS)")
	fs.UintVar(&f.maxSteps, "max-steps", uint(envUint("FATHOM_MAX_STEPS", uint64(d.MaxSteps))), "max plan steps per session (env FATHOM_MAX_STEPS)")
	fs.UintVar(&f.maxParallelSubAgents, "max-parallel-subagents", uint(envUint("FATHOM_MAX_PARALLEL_SUBAGENTS", session.DefaultMaxParallelSubAgents)),
		"max sub-agents of one session running at once: independent plan steps (env FATHOM_MAX_PARALLEL_SUBAGENTS)")
	fs.UintVar(&f.subAgentIterations, "subagent-max-iterations", uint(envUint("FATHOM_SUBAGENT_MAX_ITERATIONS", agent.DefaultMaxIterations)),
		"max LLM calls of one sub-agent run (env FATHOM_SUBAGENT_MAX_ITERATIONS)")
	fs.UintVar(&f.maxReplans, "max-replans", uint(envUint("FATHOM_MAX_REPLANS", uint64(d.MaxReplans))),
		"max re-plans of one session after a sub-agent's step fails for good; 0 = fail the session instead (env FATHOM_MAX_REPLANS)")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", d.IdleTimeout, "passivate a session grain idle this long")
	fs.DurationVar(&f.llmTimeout, "llm-timeout", d.LLMTimeout, "timeout of one LLM call, the provider's retries included")
	fs.DurationVar(&f.toolTimeout, "tool-timeout", d.ToolTimeout, "timeout of one tool call")
	fs.UintVar(&f.stepAttempts, "step-attempts", uint(d.StepAttempts), "runs of a plan or step whose model call fails retryably before the session fails")
	fs.DurationVar(&f.stepRetry, "step-retry-delay", d.StepRetryDelay, "wait before a retryably failed plan or step runs again")
	fs.StringVar(&f.prices, "prices", os.Getenv("FATHOM_PRICES"), "path of a JSON price `FILE` {model: {input_per_mtok, output_per_mtok, cached_input_per_mtok, cache_write_per_mtok}} laid over the built-in table; cache reads are priced at cached_input_per_mtok, a model without a price warns once (env FATHOM_PRICES)")
	fs.IntVar(&f.llmAttempts, "llm-max-attempts", int(envUint("FATHOM_LLM_MAX_ATTEMPTS", 4)), "tries of one LLM call on 429/5xx/timeouts, first included (env FATHOM_LLM_MAX_ATTEMPTS)")
	fs.IntVar(&f.llmRPM, "llm-rpm", int(envUint("FATHOM_LLM_RPM", 0)), "LLM requests per minute, 0 = unlimited (env FATHOM_LLM_RPM)")
	fs.IntVar(&f.llmTPM, "llm-tpm", int(envUint("FATHOM_LLM_TPM", 0)), "LLM tokens per minute (estimated), 0 = unlimited (env FATHOM_LLM_TPM)")
	fs.UintVar(&f.breakerFails, "llm-breaker-failures", uint(envUint("FATHOM_LLM_BREAKER_FAILURES", 5)), "consecutive retryable LLM failures that open the circuit breaker (env FATHOM_LLM_BREAKER_FAILURES)")
	fs.DurationVar(&f.breakerOpen, "llm-breaker-open", 30*time.Second, "how long an open LLM circuit breaker waits before a probe call")
	fs.StringVar(&f.fallbacks, "llm-fallback-models", os.Getenv("FATHOM_LLM_FALLBACK_MODELS"), "comma-separated models tried in order when the session's model keeps failing (env FATHOM_LLM_FALLBACK_MODELS)")
	fs.StringVar(&f.llmAPI, "llm-api", envOr("FATHOM_LLM_API", fathomapi.APIOpenAI), "model API: "+backends.LLMAPIs.Help()+" (env FATHOM_LLM_API)")
	fs.BoolVar(&f.noStream, "no-stream", false, "ask for whole answers instead of streamed ones (no live text)")
	fs.StringVar(&f.otelExporter, "otel-exporter", envOr("FATHOM_OTEL_EXPORTER", "none"), "OpenTelemetry exporter: none, stdout or otlp (env FATHOM_OTEL_EXPORTER)")
	fs.StringVar(&f.otelEndpoint, "otel-endpoint", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "OTLP/HTTP endpoint (env OTEL_EXPORTER_OTLP_ENDPOINT)")
	fs.StringVar(&f.metricsListen, "metrics-listen", os.Getenv("FATHOM_METRICS_LISTEN"), "serve GET /metrics (Prometheus text format) on this address, e.g. 127.0.0.1:9464, besides the gateway's own /metrics (env FATHOM_METRICS_LISTEN)")
	c := fcluster.DefaultConfig()
	fs.StringVar(&f.provider, "provider", envOr("FATHOM_CLUSTER_PROVIDER", ""), "cluster provider: local or consul (default consul when --consul is set, else local; env FATHOM_CLUSTER_PROVIDER)")
	fs.StringVar(&f.consul, "consul", os.Getenv("CONSUL_HTTP_ADDR"), "Consul agent HTTP address host:port (env CONSUL_HTTP_ADDR)")
	fs.StringVar(&f.clusterHost, "cluster-host", envOr("FATHOM_CLUSTER_HOST", c.Host), "host the cluster member binds (env FATHOM_CLUSTER_HOST)")
	fs.IntVar(&f.clusterPort, "cluster-port", int(envUint("FATHOM_CLUSTER_PORT", uint64(c.Port))), "port the cluster member binds, 0 = any free (env FATHOM_CLUSTER_PORT)")
	fs.StringVar(&f.clusterName, "cluster-name", envOr("FATHOM_CLUSTER_NAME", c.Name), "cluster name; nodes with the same name form one cluster (env FATHOM_CLUSTER_NAME)")
	fs.StringVar(&f.searxngURL, "searxng-url", os.Getenv("FATHOM_SEARXNG_URL"), "SearXNG instance that answers web_search, e.g. http://127.0.0.1:8888 (env FATHOM_SEARXNG_URL; its bearer token: env FATHOM_SEARXNG_TOKEN)")
	f.sandbox.register(fs)
	f.artifacts.register(fs)
	fs.StringVar(&f.promptsDir, "prompts-dir", os.Getenv("FATHOM_PROMPTS_DIR"), "directory of prompt templates (*.md.tmpl, _shared/*.md.tmpl) that replace the built-in ones file by file; checked at start (env FATHOM_PROMPTS_DIR)")
	f.memory.register(fs)
	f.leaseTTL.register(fs, "lease-ttl", "FATHOM_LEASE_TTL", session.DefaultLeaseTTL, "how long a running session's lease lasts unless its node renews it; a node activates sessions whose lease lapsed (their node died) every lease-ttl/2; 0 turns leases and reactivation off")
	f.consulCheckTTL.register(fs, "consul-check-ttl", "FATHOM_CONSUL_CHECK_TTL", defaultConsulCheckTTL, "with Consul: the TTL of this member's health check, renewed every third of it; a member killed without leaving is dropped by the others, and its sessions taken over, about this long after its last renewal (1s is the shortest that rides out ordinary scheduling hiccups; see docs/operations.md)")
	f.pauseGrace.register(fs, "pause-grace", "FATHOM_PAUSE_GRACE", defaultPauseGrace, "with Consul: how long a member whose health check lapsed while its port still answers (paused, not dead) stays in the cluster before its sessions move elsewhere; shorter moves sessions of a frozen node sooner, longer rides out longer pauses")
	f.reasoning.register(fs)
	f.retention.register(fs)
	f.webhooks.register(fs)
	f.toolResult.register(fs)
	f.drain.register(fs)
	f.tenancy.register(fs)
	f.pprof.register(fs)
	f.quota.register(fs)
	f.maxLLMCalls.register(fs, "max-llm-calls", "FATHOM_MAX_LLM_CALLS",
		fmt.Sprintf("session budget: LLM calls of a session and all its sub-agents (retries and re-plans included); 0 = unlimited; default: the larger of %d and --max-iterations + --max-steps × the deepest agent's iterations (--subagent-max-iterations, or an agent's max_iterations in --config) (env FATHOM_MAX_LLM_CALLS)", session.DefaultMaxLLMCalls))
	fs.Float64Var(&f.maxCostUSD, "max-cost-usd", envFloat("FATHOM_MAX_COST_USD", d.MaxCostUSD),
		"session budget: model cost in USD (the --prices table) of a session and its sub-agents; 0 = unlimited (env FATHOM_MAX_COST_USD)")
	fs.Uint64Var(&f.maxTokens, "max-tokens", envUint64("FATHOM_MAX_TOKENS", d.MaxTokens),
		"session budget: tokens (input + output, as the provider reports them) of a session and its sub-agents; 0 = unlimited (env FATHOM_MAX_TOKENS)")
	fs.StringVar(&f.configFile, "config", os.Getenv(config.EnvFile),
		"YAML configuration `FILE`: agents (agents of the node's own a plan step may name as its type), mcp_servers (MCP servers whose tools the node offers as {server}__{tool}), approval (tools whose calls wait for a human's decision), tenant_defaults and tenants (per-tenant weights and limits), and for fathom node the identity keys and api_keys (docs/security.md); see docs/config.md (env "+config.EnvFile+")")
	fs.BoolVar(&f.allowEndpointChange, "allow-endpoint-change", os.Getenv("FATHOM_ALLOW_ENDPOINT_CHANGE") == "true",
		"continue sessions started on another model endpoint (provider or base URL) here; by default they are refused (env FATHOM_ALLOW_ENDPOINT_CHANGE=true)")
}

// a2aAgents are the config file's a2a_agents as agents of the node's own; one without a
// description gets its agent card's (fetched now: an unreachable agent fails the start).
func a2aAgents(entries []config.A2AAgent) ([]fathomapi.Agent, error) {
	out := make([]fathomapi.Agent, 0, len(entries))
	for i, e := range entries {
		c := &a2a.Client{URL: e.URL, Token: e.Token}
		desc := e.Description
		if desc == "" {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			card, err := c.Card(ctx)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("a2a_agents[%d] (%s): %w", i, e.Name, err)
			}
			if desc = card.Description; strings.TrimSpace(desc) == "" {
				desc = card.Name
			}
		}
		out = append(out, fathomapi.A2AAgent(e.Name, desc, c))
	}
	return out, nil
}

// defaultMaxLLMCalls is --max-llm-calls when neither the flag nor its variable is set:
// room for the orchestrator's --max-iterations and a full plan of --max-steps steps, each
// run by the deepest agent to its last iteration, and never less than
// session.DefaultMaxLLMCalls. A deep agent (an agent of --config with a high
// max_iterations) so gets a budget that fits it.
func defaultMaxLLMCalls(c session.Config) uint32 {
	deepest := uint64(c.SubAgentMaxIterations)
	for _, a := range c.Agents {
		deepest = max(deepest, uint64(a.MaxIterations))
	}
	n := uint64(c.MaxIterations) + uint64(c.MaxSteps)*deepest
	return uint32(min(max(n, session.DefaultMaxLLMCalls), math.MaxUint32))
}

// optionalUint is a whole-number flag that remembers whether the flag or its variable
// set it (a default derived from other flags applies otherwise).
type optionalUint struct {
	n   uint64
	set bool
}

func (o *optionalUint) register(fs *flag.FlagSet, name, env, usage string) {
	if v := os.Getenv(env); v != "" {
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			o.n, o.set = n, true
		} else {
			fmt.Fprintf(os.Stderr, "fathom: ignoring %s=%q: not a number\n", env, v)
		}
	}
	fs.Var(o, name, usage)
}

func (o *optionalUint) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatUint(o.n, 10)
}

func (o *optionalUint) Set(v string) error {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return errors.New("not a whole number")
	}
	o.n, o.set = n, true
	return nil
}

// envFloat reads a float64 from the environment, def when unset or not a number.
func envFloat(key string, def float64) float64 {
	if v := os.Getenv(key); v != "" {
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			return n
		}
		fmt.Fprintf(os.Stderr, "fathom: ignoring %s=%q: not a number\n", key, v)
	}
	return def
}

func (f *nodeFlags) config(log *slog.Logger, telemetryOut io.Writer) (fathomapi.Config, error) {
	scfg := session.DefaultConfig()
	if f.model != "" {
		scfg.Model = f.model
	}
	scfg.MaxIterations, scfg.MaxSteps = uint32(f.maxIterations), uint32(f.maxSteps)
	if f.maxParallelSubAgents == 0 || f.subAgentIterations == 0 {
		return fathomapi.Config{}, usageError("--max-parallel-subagents and --subagent-max-iterations must be at least 1")
	}
	scfg.MaxParallelSubAgents, scfg.SubAgentMaxIterations = int(f.maxParallelSubAgents), uint32(f.subAgentIterations)
	scfg.MaxReplans = int(min(f.maxReplans, math.MaxInt32))
	if f.maxLLMCalls.set && f.maxLLMCalls.n > math.MaxUint32 {
		return fathomapi.Config{}, usageError("--max-llm-calls %d is too large", f.maxLLMCalls.n)
	}
	scfg.MaxCostUSD, scfg.MaxTokens = f.maxCostUSD, f.maxTokens
	scfg.AllowEndpointChange = f.allowEndpointChange
	scfg.IdleTimeout, scfg.LLMTimeout = f.idleTimeout, f.llmTimeout
	scfg.ToolTimeout, scfg.StepAttempts, scfg.StepRetryDelay = f.toolTimeout, uint32(f.stepAttempts), f.stepRetry
	if strings.HasPrefix(strings.TrimSpace(f.prices), "{") {
		return fathomapi.Config{}, usageError("--prices takes the path of a JSON price FILE, not the JSON itself: save it to a file and pass its path")
	}
	if f.prices != "" {
		t, err := llm.LoadPriceTable(f.prices, scfg.Prices)
		if err != nil {
			return fathomapi.Config{}, usageError("%v", err)
		}
		scfg.Prices = t
	}
	if err := f.store.checkJournal(); err != nil {
		return fathomapi.Config{}, err
	}
	mcfg, err := f.memory.apply(&scfg, f.store.postgres)
	if err != nil {
		return fathomapi.Config{}, err
	}
	if scfg.LeaseTTL, err = f.leaseTTL.value(); err != nil {
		return fathomapi.Config{}, err
	}
	if scfg.LeaseTTL < 0 {
		return fathomapi.Config{}, usageError("--lease-ttl %s must not be negative", scfg.LeaseTTL)
	}
	if err := f.reasoning.apply(&scfg); err != nil {
		return fathomapi.Config{}, err
	}
	retention, err := f.retention.value()
	if err != nil {
		return fathomapi.Config{}, err
	}
	if err := scfg.Validate(); err != nil {
		return fathomapi.Config{}, usageError("%v", err)
	}
	// The budget must leave room beside the system prompts (the node checks it again; a
	// broken prompts dir is reported by the node).
	if p, err := prompts.Load(f.promptsDir); err == nil {
		tok, err := memory.TokenizerForModel(scfg.Model, memory.EncodingO200K)
		if err != nil {
			return fathomapi.Config{}, err
		}
		if err := session.CheckContextBudget(scfg, p, tok); err != nil {
			return fathomapi.Config{}, usageError("%v", err)
		}
	}
	ccfg := fcluster.DefaultConfig()
	ccfg.Name, ccfg.Host, ccfg.Port, ccfg.Logger = f.clusterName, f.clusterHost, f.clusterPort, log
	ccfg.Provider = f.provider
	if ccfg.Provider == "" {
		ccfg.Provider = "local"
		if f.consul != "" {
			ccfg.Provider = "consul"
		}
	}
	if f.consul != "" {
		ccfg.ConsulAddr = f.consul
	}
	if ccfg.PauseGrace, err = f.pauseGrace.value(); err != nil {
		return fathomapi.Config{}, err
	}
	if ccfg.PauseGrace <= 0 {
		return fathomapi.Config{}, usageError("--pause-grace %s must be positive", ccfg.PauseGrace)
	}
	if ccfg.ConsulCheckTTL, err = f.consulCheckTTL.value(); err != nil {
		return fathomapi.Config{}, err
	}
	if ccfg.ConsulCheckTTL < 300*time.Millisecond {
		return fathomapi.Config{}, usageError("--consul-check-ttl %s is shorter than 300ms: the member could not renew it in time", ccfg.ConsulCheckTTL)
	}
	if err := ccfg.Validate(); err != nil {
		return fathomapi.Config{}, usageError("%v", err)
	}
	if !backends.LLMAPIs.Has(f.llmAPI) {
		return fathomapi.Config{}, usageError("bad --llm-api %q: want %s", f.llmAPI, orList(backends.LLMAPIs.Names()))
	}
	llmCfg := fathomapi.LLMFromEnv(func(k string) string {
		if k == "FATHOM_LLM_API" {
			return f.llmAPI
		}
		return os.Getenv(k)
	})
	llmCfg.Model = ""
	if f.llmAttempts < 1 || f.llmRPM < 0 || f.llmTPM < 0 || f.breakerFails < 1 || f.breakerOpen <= 0 {
		return fathomapi.Config{}, usageError("--llm-max-attempts and --llm-breaker-failures must be at least 1, --llm-rpm and --llm-tpm not negative, --llm-breaker-open positive")
	}
	llmCfg.Resilience = resilient.Config{
		MaxAttempts: f.llmAttempts, RequestsPerMinute: f.llmRPM, TokensPerMinute: f.llmTPM,
		BreakerFailures: uint32(f.breakerFails), BreakerOpenFor: f.breakerOpen,
	}
	for _, m := range strings.Split(f.fallbacks, ",") {
		if m = strings.TrimSpace(m); m != "" {
			llmCfg.FallbackModels = append(llmCfg.FallbackModels, m)
		}
	}
	llmCfg.NoStream = f.noStream
	sbCfg, err := f.sandbox.config(log)
	if err != nil {
		return fathomapi.Config{}, err
	}
	artCfg, err := f.artifacts.config()
	if err != nil {
		return fathomapi.Config{}, err
	}
	if _, err := builtin.SearchFromEnv(f.searchEnv); err != nil {
		return fathomapi.Config{}, usageError("--searxng-url: %v", err)
	}
	tcfg := telemetry.Config{Exporter: f.otelExporter, OTLPEndpoint: f.otelEndpoint, ServiceName: "fathom", Writer: telemetryOut}
	if err := tcfg.Validate(); err != nil {
		return fathomapi.Config{}, usageError("%v", err)
	}
	// Without a sandbox URL, code_execute runs in a local sandbox (run and node alike).
	localIso := sandboxd.Isolation(os.Getenv("FATHOM_SANDBOX_ISOLATION"))
	if localIso != "" && localIso != sandboxd.IsolationAuto && localIso != sandboxd.IsolationBwrap && localIso != sandboxd.IsolationRlimits {
		return fathomapi.Config{}, usageError("FATHOM_SANDBOX_ISOLATION=%q: want auto, bwrap or rlimits", localIso)
	}
	var mcpServers []fathomapi.MCPServer
	if f.configFile != "" {
		file, err := config.Load(f.configFile)
		if err != nil {
			return fathomapi.Config{}, usageError("--config: %v", err)
		}
		mcpServers = file.MCP()
		scfg.Agents = append(scfg.Agents, file.AgentSpecs()...)
		remote, err := a2aAgents(file.A2AAgents)
		if err != nil {
			return fathomapi.Config{}, usageError("--config: %v", err)
		}
		scfg.Agents = append(scfg.Agents, remote...)
		scfg.ApprovalTools, scfg.ApprovalDecisions = file.Approval.Tools, file.Approval.Decisions
		f.file = file
		if f.store.journal == "" {
			f.store.journal = file.Journal // the flag and FATHOM_JOURNAL take precedence
			if f.store.journal != "" && !backends.Journals.Has(f.store.journal) {
				return fathomapi.Config{}, usageError("--config: %s: journal: %q is not a journal (want %s)", f.configFile, f.store.journal, journalNames())
			}
		}
	}
	hooks, hookURL, err := f.webhooks.config(f.file)
	if err != nil {
		return fathomapi.Config{}, err
	}
	scfg.WebhookURL = hookURL
	scfg.MaxLLMCalls = uint32(f.maxLLMCalls.n)
	if !f.maxLLMCalls.set {
		scfg.MaxLLMCalls = defaultMaxLLMCalls(scfg)
	}
	if err := f.tenancy.apply(&scfg, f.file); err != nil {
		return fathomapi.Config{}, err
	}
	if err := f.drain.apply(&scfg, f.file); err != nil {
		return fathomapi.Config{}, err
	}
	if err := f.toolResult.apply(&scfg, f.file); err != nil {
		return fathomapi.Config{}, err
	}
	if err := f.memory.applyRetrieval(&scfg, f.file); err != nil {
		return fathomapi.Config{}, err
	}
	if err := f.memory.applyLongTerm(&mcfg, f.file); err != nil {
		return fathomapi.Config{}, err
	}
	if err := f.quota.apply(&llmCfg.Resilience, f.file); err != nil {
		return fathomapi.Config{}, err
	}
	pprof, err := f.pprof.enabled(f.file, f.metricsListen)
	if err != nil {
		return fathomapi.Config{}, err
	}
	return fathomapi.Config{
		MCPServers:    mcpServers,
		Artifacts:     artCfg,
		Sandbox:       fathomapi.Sandbox{Client: sbCfg, Local: sbCfg.URL == "", LocalIsolation: localIso},
		Journal:       f.store.journal,
		DataDir:       f.store.dataDir,
		PostgresDSN:   f.store.postgres,
		Cluster:       ccfg,
		Session:       scfg,
		LLM:           llmCfg,
		Memory:        mcfg,
		Telemetry:     tcfg,
		SearXNGURL:    f.searxngURL,
		MetricsListen: f.metricsListen,
		Pprof:         pprof,
		Retention:     retention,
		Webhooks:      hooks,
		Logger:        log,
		PromptsDir:    f.promptsDir,
		Quotas:        fileQuotas(f.file),
	}, nil
}

// searchEnv is the environment web_search is configured from, with --searxng-url in
// place of FATHOM_SEARXNG_URL.
func (f *nodeFlags) searchEnv(key string) string {
	if key == "FATHOM_SEARXNG_URL" {
		return f.searxngURL
	}
	return os.Getenv(key)
}

func envUint(key string, def uint64) uint64 {
	if v := os.Getenv(key); v != "" {
		if n, err := strconv.ParseUint(v, 10, 32); err == nil {
			return n
		}
		fmt.Fprintf(os.Stderr, "fathom: ignoring %s=%q: not a number\n", key, v)
	}
	return def
}
