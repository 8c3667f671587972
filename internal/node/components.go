package node

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/observer"
	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/summarizer"
	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/cluster/topics"
	"github.com/fathom-agents/fathom/internal/backends"
	"github.com/fathom-agents/fathom/internal/metrics"
	"github.com/fathom-agents/fathom/internal/telemetry"
	"github.com/fathom-agents/fathom/live/feed"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/prompts"
	"github.com/fathom-agents/fathom/tools"
	"github.com/fathom-agents/fathom/tools/builtin"
)

// component is one part of the node: what starts it, what stops it, and why it sits
// where it does. Start runs the table top to bottom; Stop runs the stops of the
// components that started bottom to top, so a part stops only after everything that
// uses it.
type component struct {
	name string
	// why is the reason for the component's place in the order and, for the parts that
	// supervise actors, their supervision.
	why   string
	start func(ctx context.Context) error
	// stop releases what start acquired; nil when there is nothing to release (actors
	// spawned on the member's actor system stop with it).
	stop func(ctx context.Context) error
}

// boot is what the components hand on to those after them while the node starts.
type boot struct {
	prompt      *prompts.Set
	provider    llm.Provider
	tools       *tools.Executor
	system      *actor.ActorSystem
	session     session.Config
	tok         *memory.Tokenizer
	embedder    memory.Embedder
	reembed     bool
	artifactsAt string
}

// components is the node as data: its parts in start order (docs/ARCHITECTURE.md, "The
// node as a table").
func (n *Node) components(b *boot) []component {
	cfg := n.cfg
	return []component{
		{name: "prompts", why: "a broken template override fails the start before anything runs",
			start: func(context.Context) error { return n.loadPrompts(b) }},
		{name: "telemetry", why: "every later part records on its meter and tracer providers; stopped last so their final spans and metrics are flushed",
			start: func(ctx context.Context) (err error) {
				if err := cfg.Memory.Validate(cfg.PostgresDSN); err != nil {
					return err
				}
				if n.tel, err = telemetry.Setup(ctx, telemetryConfig(cfg)); err != nil {
					return fmt.Errorf("telemetry: %w", err)
				}
				return nil
			},
			stop: func(ctx context.Context) error { return n.tel.Shutdown(ctx) }},
		{name: "metrics listener", why: "GET /metrics without the gateway (Config.MetricsListen); served from the start so a failing start can be watched",
			start: func(context.Context) error {
				if cfg.MetricsListen == "" {
					if cfg.Pprof {
						return errors.New("pprof is served on the metrics listener: set MetricsListen (--metrics-listen) too")
					}
					return nil
				}
				return n.serveMetrics(cfg.MetricsListen)
			},
			stop: func(ctx context.Context) error {
				if n.metricsSrv == nil {
					return nil
				}
				return n.metricsSrv.Shutdown(ctx)
			}},
		{name: "journal", why: "the source of truth (backends.Journals): every later part appends to it or reads it, so it closes after all of them",
			start: func(ctx context.Context) (err error) { n.journal, err = n.openJournal(ctx); return err },
			stop:  func(context.Context) error { return n.journal.Close() }},
		{name: "artifacts", why: "the session workspace (backends.ArtifactStores) the artifact tools are built on",
			start: func(context.Context) error { return n.openArtifacts(b) },
			stop: func(context.Context) error {
				if n.artifacts == nil {
					return nil
				}
				return n.artifacts.Close()
			}},
		{name: "model", why: "the model API's client (backends.LLMAPIs) behind the resilience layer, or the built-in demo model's server",
			start: func(ctx context.Context) (err error) { b.provider, err = n.startLLM(ctx); return err },
			stop: func(ctx context.Context) error {
				if n.demo == nil {
					return nil
				}
				return n.demo.stop(ctx)
			}},
		{name: "live feed", why: "the live read side (live/feed): sessions publish to it, the gateway and Follow read it",
			start: func(context.Context) error {
				n.feed = feed.New(n.journal, feed.Options{Poll: cfg.feedPoll()})
				return n.observeJournal()
			},
			stop: func(context.Context) error { n.feed.Close(); return nil }},
		{name: "tools", why: "the registry sessions offer to the model: built-in tools on the artifact store, or Config.Tools, plus Config.ExtraTools",
			start: func(context.Context) error { return n.buildTools(b) }},
		{name: "actor system", why: "the actors of every part below; Proto.Actor's own metrics only when exported (they cost microseconds per message)",
			start: func(context.Context) error { n.newSystem(b); return nil }},
		{name: "sandbox", why: "code_execute's sandbox: a local sandbox server when no URL is configured, and the pool's routing (the pool starts after the member)",
			start: func(context.Context) (err error) { b.tools, err = n.newSandbox(b.tools); return err },
			stop: func(ctx context.Context) error {
				if n.local == nil {
					return nil
				}
				return n.local.stop(ctx)
			}},
		{name: "mcp servers", why: "one supervised connection actor per server (actors/mcp: restart with backoff, visible to operators); their tools are registered before the session kind checks the agents' and approval's tools",
			start: func(ctx context.Context) error { return n.startMCP(ctx, b.system, b.tools.Registry) },
			stop: func(ctx context.Context) error {
				if n.mcp == nil {
					return nil
				}
				return n.mcp.Stop(ctx)
			}},
		{name: "memory", why: "the embedder (backends.Embedders) and the vector store (backends.VectorStores), with the background embed worker",
			start: func(ctx context.Context) error { return n.startMemory(ctx, b) },
			stop: func(ctx context.Context) error {
				var err error
				if n.embed != nil {
					err = n.embed.Close(ctx)
				}
				if n.vectors != nil {
					err = errors.Join(err, n.vectors.Close())
				}
				if n.longTerm != nil {
					err = errors.Join(err, n.longTerm.close())
				}
				return err
			}},
		{name: "webhooks", why: "signs and posts the sessions' webhook notifications on a bounded pool; stopped after the session grains, whose journals keep what is still due",
			start: func(context.Context) error { return n.startWebhooks(b) },
			stop: func(context.Context) error {
				if n.webhooks != nil {
					n.webhooks.Close()
				}
				return nil
			}},
		{name: "session kind", why: "the session grains: a panic restarts the grain, which reloads its state from the journal; its sub-agents and runners are its children",
			start: func(context.Context) error { return n.registerSessions(b) }},
		{name: "cluster member", why: "joins the cluster (local or Consul): grains are placed from here on",
			start: func(ctx context.Context) (err error) {
				if n.member, err = fcluster.New(n.clusterConfig(cfg.Cluster), b.system, session.Kind(), topics.Kind(n.liveTopics, cfg.Logger.With("component", "topics"))); err != nil {
					return err
				}
				n.gateMember.Store(n.member)
				return n.member.Start(ctx)
			},
			stop: func(ctx context.Context) error { n.leave(); return n.member.Stop(ctx) }},
		{name: "session-data dropper", why: "removes a deleted session's artifacts and vectors on this member (its vectors after its embedding jobs queued for the session) when a delete on any member asks; spawned after the member (remote start sets the address), stopped before the embedding worker and the stores close",
			start: func(context.Context) error { return n.startDropper(b.system) },
			stop:  func(context.Context) error { n.stopDropper(); return nil }},
		{name: "observer", why: "logs, counts and keeps every supervision event, published on the cluster's pub-sub; spawned after the member (remote start sets the address)",
			start: func(context.Context) (err error) {
				obsCfg := n.startTopics()
				obsCfg.Node, obsCfg.Logger = n.member.Address(), cfg.Logger.With("component", "observer")
				obsCfg.Meter = n.tel.MeterProvider.Meter("github.com/fathom-agents/fathom/actors/observer")
				n.observer, err = observer.Spawn(b.system, obsCfg)
				return err
			},
			stop: func(context.Context) error {
				if n.observer != nil {
					n.observer.Stop()
				}
				n.stopTopics()
				return nil
			}},
		{name: "summarizers", why: "a pool regenerating sessions' rolling summaries; a failed summary is asked again later, so a restarted worker loses nothing",
			start: func(context.Context) error {
				sumCfg := b.session.Summary
				if sumCfg == (memory.SummaryConfig{}) {
					sumCfg = memory.DefaultSummaryConfig()
				}
				_, err := summarizer.Spawn(b.system.Root, summarizerName, summarizer.Config{
					Provider: n.summaryLLM, Summary: sumCfg, Tokenizer: b.tok, Prompts: b.prompt, Logger: cfg.Logger.With("component", "summarizer"),
				})
				return err
			}},
		{name: "sandbox pool", why: "connections to the sandbox (actors/sandbox, its own supervision table); spawned after the member, stopped after the hand-over so sessions' last calls finish",
			start: func(context.Context) error {
				if n.sandbox == nil {
					return nil
				}
				return n.sandbox.Start(b.system)
			},
			stop: func(ctx context.Context) error {
				if n.sandbox == nil {
					return nil
				}
				return n.sandbox.Stop(ctx)
			}},
		{name: "hand-over", why: "stopped first among the session parts: the member drains (its sessions' running calls finish, drain.go), leaves the topology and its sessions stop at a boundary, releasing their leases, while the sandbox, the MCP servers and the journal still serve their last appends",
			start: func(context.Context) error { return nil },
			stop: func(ctx context.Context) error {
				if n.cfg.Cluster.Provider == fcluster.ProviderLocal {
					// No other member subscribes to a local member's topics: publish what is
					// queued while topics can still be placed, instead of each publish after
					// the hand-over failing only at its timeout (5 s).
					n.stopTopics()
				}
				return n.drainForStop(ctx) // drain.go: running calls finish first
			}},
		{name: "reactivator", why: "continues sessions whose lease lapsed; stopped before the hand-over, which it would otherwise undo",
			start: func(context.Context) error { return n.startReactivator(b.system, b.session.LeaseTTL) },
			stop:  func(context.Context) error { n.stopReactivator(); return nil }},
		{name: "janitor", why: "deletes terminal sessions past Config.Retention; stopped with its sweep in flight finished, before the journal closes",
			start: func(context.Context) error { return n.startJanitor(b.system, cfg.Retention) },
			stop:  func(context.Context) error { n.stopJanitor(); return nil }},
		{name: "gauges", why: "scrape-time gauges (circuit breakers, journal); unregistered first so no scrape reads a stopping part",
			start: func(context.Context) error { return n.registerGauges() },
			stop: func(context.Context) error {
				if n.gauges == nil {
					return nil
				}
				return n.gauges.Unregister()
			}},
	}
}

// loadPrompts loads the prompt templates with Config.PromptsDir's overrides.
func (n *Node) loadPrompts(b *boot) (err error) {
	if err := n.cfg.Session.Validate(); err != nil {
		return err
	}
	if b.prompt, err = prompts.Load(n.cfg.PromptsDir); err != nil {
		return err
	}
	if o := b.prompt.Overrides(); len(o) > 0 {
		n.log.Info("prompt templates overridden", "dir", n.cfg.PromptsDir, "templates", o)
	}
	return nil
}

// openArtifacts opens the artifact store (Config.Artifacts.Store when given), its
// writes admitted by the tenants' max_artifact_bytes (quota.Enforcer.Artifacts).
func (n *Node) openArtifacts(b *boot) (err error) {
	cfg := n.cfg
	b.artifactsAt = "none"
	defer func() {
		if err != nil || n.artifacts == nil {
			return
		}
		q, qerr := n.quotas()
		if qerr != nil {
			err = errors.Join(qerr, n.artifacts.Close())
			n.artifacts = nil
			return
		}
		if q != nil {
			n.artifacts = q.Artifacts(n.artifacts)
		}
	}()
	if n.artifacts = cfg.Artifacts.Store; n.artifacts != nil {
		b.artifactsAt = fmt.Sprintf("%T", n.artifacts)
		return nil
	}
	var name string
	if n.artifacts, name, b.artifactsAt, err = backends.OpenArtifacts(cfg.DataDir, cfg.Artifacts); err != nil || n.artifacts == nil {
		return err
	}
	if s, _ := backends.ArtifactStores.Lookup(name); s.Local && cfg.Cluster.Provider != "" && cfg.Cluster.Provider != fcluster.ProviderLocal {
		n.log.Warn("artifacts are stored in this node's data dir; sessions that move to another node will not find them: configure S3 (--s3-endpoint) in a cluster", "dir", b.artifactsAt)
	}
	return nil
}

// buildTools makes the tool executor: Config.Tools, or the built-in tools, plus
// Config.ExtraTools.
func (n *Node) buildTools(b *boot) error {
	cfg := n.cfg
	b.tools = cfg.Tools
	if b.tools == nil {
		search, err := builtin.SearchFromEnv(func(k string) string {
			if k == "FATHOM_SEARXNG_URL" && cfg.SearXNGURL != "" {
				return cfg.SearXNGURL
			}
			return os.Getenv(k)
		})
		if err != nil {
			return err
		}
		reg, err := builtin.Registry(builtin.Options{Search: search, Artifacts: n.artifacts})
		if err != nil {
			return err
		}
		b.tools = &tools.Executor{Registry: reg}
	}
	for _, t := range cfg.ExtraTools {
		if err := b.tools.Registry.Register(t); err != nil {
			return fmt.Errorf("node: tool %q: %w", t.Name(), err)
		}
	}
	return nil
}

// newSystem makes the actor system and the sessions' configuration.
func (n *Node) newSystem(b *boot) {
	cfg := n.cfg
	b.session = cfg.Session
	if cfg.LLM.Model != "" {
		b.session.Model = cfg.LLM.Model
	}
	if b.session.Endpoint == (session.Endpoint{}) {
		b.session.Endpoint = cfg.LLM.Endpoint()
	}
	if n.demo != nil {
		// The demo model answers under the requested model's name; it costs nothing.
		b.session.Prices = nil
	}
	var sysOpts []actor.ConfigOption
	if n.tel.PushesMetrics() {
		sysOpts = append(sysOpts, actor.WithMetricProviders(n.tel.MeterProvider))
	}
	b.system = fcluster.NewActorSystem(cfg.Logger, sysOpts...)
}

// startMemory makes the tokenizer, the embedder, the vector store and the embed worker.
func (n *Node) startMemory(ctx context.Context, b *boot) (err error) {
	if b.tok, err = memory.TokenizerForModel(b.session.Model, memory.EncodingO200K); err != nil {
		return err
	}
	demo := ""
	if n.demo != nil {
		demo = n.demo.baseURL
	}
	mem, err := startMemory(ctx, n.cfg.Memory, n.cfg.PostgresDSN, demo)
	if err != nil {
		return err
	}
	b.embedder, b.reembed, n.vectors = mem.embedder, mem.reembed, mem.vectors
	if other := otherDimensions(ctx, n.vectors); other != "" {
		n.log.Warn("the vector store holds embeddings of other dimensions: sessions embedded with them get no semantic hits until they are embedded again",
			"dimensions", n.vectors.Dimensions(), "other_dimensions", other)
	}
	n.embed, err = memory.NewEmbedWorker(memory.EmbedWorkerConfig{
		Embedder: b.embedder, Store: n.vectors, Logger: n.cfg.Logger.With("component", "embed"),
	})
	if err != nil {
		return err
	}
	return n.startLongTerm(ctx, b)
}

// registerSessions registers the session grain kind's dependencies on the actor system.
func (n *Node) registerSessions(b *boot) error {
	recorder, err := metrics.New(n.tel.MeterProvider.Meter("github.com/fathom-agents/fathom/internal/metrics"), n.metricLabels(b))
	if err != nil {
		return err
	}
	n.events.metrics = recorder
	deps := &session.Deps{
		// What follows a commit: the live feed first (subscribers see an event as soon
		// as it is durable), then the metrics and the cluster topics, then the embed
		// worker (re-embedding an in-process store, which does not outlive the process).
		Observers: append([]session.Observer{session.PublishTo(n.feed), &n.events, session.Embedding(n.embed, b.reembed, b.session.ContextConfig())},
			n.cfg.SessionObservers...),
		Tokenizer:  b.tok,
		Embedder:   b.embedder,
		Vectors:    n.vectors,
		Summarizer: summarizerName,
		Artifacts:  n.artifacts,
		Prompts:    b.prompt,
		Config:     b.session,
		Journal:    persistence.FormatGate(n.journal, n.lowestFormat),
		LLM:        b.provider,
		Tools:      b.tools,
		Logger:     n.cfg.Logger.With("component", "session"),
		Tracer:     n.tel.TracerProvider.Tracer("github.com/fathom-agents/fathom/actors/session"),
		Sampled:    n.tel.RootSampled,
		Webhooks:   n.webhooks,
	}
	n.drainer.sessions, n.drainer.timeout = session.NewDrain(), b.session.DrainTimeout
	deps.Drain = n.drainer.sessions
	if !n.cfg.LLM.NoStream {
		deps.Deltas = n.feed
	}
	if n.longTerm != nil {
		deps.LongTerm = n.longTerm
	}
	if q, err := n.quotas(); err != nil {
		return err
	} else if q != nil {
		deps.Quotas = q
	}
	return session.Register(b.system, deps)
}
