// Package fathom embeds a Fathom node in a Go program: the program starts a node with its
// own tools, starts sessions, follows their events from any seq, answers their human
// input, cancels them and closes the node. Everything a session does is journaled (an
// embedded journal in DataDir, or PostgreSQL), so a session survives the program's
// restart and continues where it stopped.
//
//	cfg := fathom.DefaultConfig()
//	cfg.DataDir = "/var/lib/myapp/fathom"
//	cfg.Tools = []tools.Tool{tools.MustNew("lookup_order", "Looks up an order by id.", tools.SandboxNone,
//		func(ctx context.Context, a struct{ ID string `json:"id"` }) (any, error) { return orders.Get(ctx, a.ID) })}
//	cfg.Session.SubAgentTools = map[string][]string{"researcher": {"lookup_order", "write_artifact"}}
//	cfg.Agents = []fathom.Agent{{Name: "auditor", Description: "Checks an order's payments",
//		Run: func(ctx context.Context, b fathom.Brief) (*fathom.Handoff, error) { ... }}}
//	n, err := fathom.Start(ctx, cfg)
//	...
//	id, err := n.StartSession(ctx, fathom.SessionRequest{Goal: "Why was order 42 late?"})
//	sub := n.Follow(id, 0)
//	defer sub.Close()
//	for {
//		u, err := sub.NextUpdate(ctx) // decoded events in seq order, then live ones
//		...
//	}
//
// Node has a method for every operation of the gateway (package gateway), acting for
// the principal its ctx carries (auth.WithPrincipal): StartSession (with per-session
// Config), List (filters and cursor), State, Timeline, StateAt (a step or a seq), Pause,
// Resume, SetBreakpoint, ClearBreakpoints, Fork (optionally with a modified step), Send,
// Answer, Approve, Edit, Reject, Cancel, Delete, Artifacts and ReadArtifact. Every write
// takes WithCommandID, which makes its retry safe. Errors are values for errors.Is:
// ErrNotFound (another tenant's session is answered so too), ErrInvalidArgument,
// ErrFailedPrecondition, ErrPermissionDenied, ErrResourceExhausted, ErrUnavailable,
// ErrInternal, as the gateway's error codes.
//
// With no model endpoint configured (Config.LLM zero), the node answers with the built-in
// demo model, so a program runs end to end without an API key; LLM.DemoRules script it
// for the program's own tools and agents.
//
// The fathom binary is built on this package: `fathom run` and `fathom node` build a
// Config from their flags, environment and configuration file (cluster, memory,
// artifacts, sandbox, telemetry, MCP servers, agents, approval, prices, ...) and call
// Start; `fathom node` serves Node.Gateway. There is no other way to assemble a node.
package fathom

import (
	"context"
	"errors"
	"fmt"
	"github.com/fathom-agents/fathom/webhooks"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/actors/session/replay"
	"github.com/fathom-agents/fathom/auth"
	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/gateway/a2a"
	"github.com/fathom-agents/fathom/internal/backends"
	"github.com/fathom-agents/fathom/internal/config"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/quota"
	"github.com/fathom-agents/fathom/internal/telemetry"
	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
	mcptool "github.com/fathom-agents/fathom/tools/mcp"
)

// LLM selects the model endpoint (node.LLMConfig): API ("openai", the default, or
// "anthropic"), BaseURL, APIKey, Model, and the client's attempt timeout, resilience
// (retries, rate limits, circuit breaker), fallback models and streaming. The zero value
// uses the built-in demo model, which DemoRules script for the program's own tools and
// agents (llm/mock rules, tried before the demo's own); LLMFromEnv reads the usual
// environment variables.
type LLM = node.LLMConfig

// Quotas are the tenants' limits (internal/quota.Config): Default for every tenant not
// in Named. Index, Observer and Logger are filled in by the node.
type Quotas = quota.Config

// TenantLimits are one tenant's limits (the config file's tenant entry); 0 is
// unlimited.
type TenantLimits = config.TenantLimits

// The model APIs LLM.API selects.
const (
	// APIOpenAI is the chat completions API (OpenAI and every compatible server).
	APIOpenAI = node.APIOpenAI
	// APIAnthropic is Anthropic's Messages API.
	APIAnthropic = node.APIAnthropic
)

// LLMFromEnv reads FATHOM_LLM_API, FATHOM_MODEL and the API's key and base URL
// (OPENAI_API_KEY and OPENAI_BASE_URL, or ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL).
func LLMFromEnv(getenv func(string) string) LLM { return node.LLMConfigFromEnv(getenv) }

// Memory selects where message embeddings are kept and what makes them
// (node.MemoryConfig); the zero value is the in-process store and the hash embedder.
type Memory = node.MemoryConfig

// The vector stores and embedders Memory selects.
const (
	// VectorStoreMemory is the exact in-process scan, lost with the process.
	VectorStoreMemory = node.VectorStoreMemory
	// VectorStorePgvector is PostgreSQL with pgvector; it needs Config.PostgresDSN.
	VectorStorePgvector = node.VectorStorePgvector
	// EmbedderHash is the local feature-hashing embedder (no model).
	EmbedderHash = node.EmbedderHash
	// EmbedderOpenAI is an OpenAI-compatible embeddings API.
	EmbedderOpenAI = node.EmbedderOpenAI
	// EmbedderGloVe is the local GloVe word vectors' embedder (Memory.EmbeddingVectors).
	EmbedderGloVe = node.EmbedderGloVe
)

// Artifacts selects the artifact store (node.ArtifactConfig): a given Store, an S3
// bucket, or the directory DataDir/artifacts (the zero value).
type Artifacts = node.ArtifactConfig

// Sandbox selects the code sandbox that runs code_execute (node.SandboxConfig): a
// remote FSP sandbox (Client.URL) or a local one started in-process (Local). The zero
// value has none: code_execute fails with "no sandbox is configured".
type Sandbox = node.SandboxConfig

// Telemetry selects the OpenTelemetry exporters (none, stdout or otlp); the zero value
// exports nothing (metrics are still served by MetricsListen and the gateway).
type Telemetry = telemetry.Config

// MCPServer is an MCP server (stdio command or streamable HTTP URL) whose tools the node
// offers as "{server}__{tool}" (tools/mcp.ServerConfig).
type MCPServer = mcptool.ServerConfig

// Config is what a node runs with: an embedded node in a Go program, or the fathom
// binary (fathom run, fathom node), which builds one from its flags, environment and
// configuration file.
type Config struct {
	// DataDir holds the embedded journal when PostgresDSN is empty, and the local
	// artifact store. Default ".fathom".
	DataDir string
	// PostgresDSN selects the PostgreSQL journal (migrations are applied at start).
	PostgresDSN string
	// Journal names the event journal's backend: "bolt" (the file in DataDir),
	// "postgres" (PostgresDSN) or "memory" (this process only: not durable, no disk).
	// "" is the default: postgres when PostgresDSN is set, else bolt.
	Journal string
	// LLM selects the model endpoint.
	LLM LLM
	// Quotas are the tenants' limits the node enforces: max_running_sessions,
	// max_tokens_per_day, max_cost_usd_per_day, tool_calls_per_minute, max_artifact_bytes
	// (the config file's tenant_defaults and tenants; docs/security.md). The zero value
	// enforces none.
	Quotas Quotas
	// Tools are the program's own tools, offered beside the built-in ones (a tool is any
	// tools.Tool; tools.New derives the JSON Schema from a typed argument struct). Give an
	// agent a tool with Session.SubAgentTools.
	Tools []tools.Tool
	// Agents are the program's own agents, beside the built-in researcher, coder, writer
	// and reviewer: a spec (name, description, prompt template, tools, model,
	// max_iterations) or a Go function (Run) that receives the brief of its step and
	// returns the hand-off. The planner reads each agent's name and description and
	// delegates a plan step to it by naming it as the step's type. A session that used
	// an agent needs it in the Config of every later Start on the same journal.
	Agents []Agent
	// Session configures the sessions (budgets, timeouts, leases, prices, the tools of
	// each agent type).
	Session session.Config
	// ApprovalTools are tools whose calls wait for a human's decision before they run
	// (added to Session.ApprovalTools): answer with Answer, input {"decision":"approve"},
	// {"decision":"edit","args":{...}} or {"decision":"reject","message":"..."}.
	ApprovalTools []string
	// Cluster configures the cluster member: a local single member (the zero value and
	// DefaultConfig) or a member of a Consul cluster.
	Cluster fcluster.Config
	// Memory selects the vector store and the embedder.
	Memory Memory
	// Artifacts selects the artifact store.
	Artifacts Artifacts
	// Sandbox selects the code sandbox.
	Sandbox Sandbox
	// Telemetry selects the OpenTelemetry exporters.
	Telemetry Telemetry
	// MetricsListen, when set, is an address (host:port, :0 for any free port) on which
	// the node serves GET /metrics in the Prometheus text format (Node.MetricsAddr).
	MetricsListen string
	// Pprof also serves net/http/pprof's profiles under /debug/pprof/ on MetricsListen
	// (off by default).
	Pprof bool
	// Retention, when positive, is how long terminal sessions are kept after their last
	// event before the node deletes them.
	Retention time.Duration
	// PromptsDir, when set, holds prompt templates that replace the embedded ones file by
	// file; a broken template fails Start.
	PromptsDir string
	// SearXNGURL, when set, is the SearXNG instance web_search queries (else env
	// FATHOM_SEARXNG_URL; its token is env FATHOM_SEARXNG_TOKEN).
	SearXNGURL string
	// MCPServers are MCP servers whose tools the node offers as "{server}__{tool}", each
	// kept connected by a supervised actor; one that cannot be reached fails Start.
	MCPServers []MCPServer
	// FeedPoll is how often a live subscription to a session hosted on another member
	// reads the journal: 0 means 500 ms with Consul and no polling with a local member;
	// negative turns it off.
	FeedPoll time.Duration
	// Webhooks configures the sessions' webhook notifications (Standard Webhooks; docs/
	// gateway-protocol.md): with Secret ("whsec_" and base64 bytes) the node signs and
	// POSTs them to a session's webhook URL (SessionRequest.WebhookURL, or
	// Session.WebhookURL for every session); zero fields take webhooks.DefaultConfig's.
	Webhooks Webhooks
	// Logger receives the node's structured logs (default: discarded).
	Logger *slog.Logger
}

// Webhooks configures webhook delivery (webhooks.Config): Secret, the timeout of an
// attempt, the attempts and their backoff, the attempts in flight.
type Webhooks = webhooks.Config

// Agent is an agent of the program's own (core.AgentSpec): set Name, Description and
// either Prompt (a text/template with prompts.AgentData and the shared partials, e.g.
// {{template "_shared/handoff" .}}), Tools, Model and MaxIterations, or Run.
type Agent = core.AgentSpec

// AgentFunc is a Go-function agent: it gets the brief of its step and returns the
// hand-off, recorded like a model agent's (core.AgentFunc).
type AgentFunc = core.AgentFunc

// Brief is what an AgentFunc receives: the session, the step, the task brief and the
// hand-offs of the steps it depends on (core.Brief).
type Brief = core.Brief

// Handoff is an agent's hand-off: status (completed, partial, blocked or failed),
// summary, recommendations, blockers and confidence (messages.SubagentResult).
type Handoff = messages.SubagentResult

// DefaultConfig returns the defaults: embedded journal in .fathom, demo model, a local
// cluster member, the session defaults, the in-process vector store, no sandbox.
func DefaultConfig() Config {
	return Config{DataDir: ".fathom", Session: session.DefaultConfig(), Cluster: fcluster.DefaultConfig()}
}

// Validate reports configuration errors without starting anything, as an *Error with
// Op "config".
func (c Config) Validate() error {
	if err := c.validate(); err != nil {
		return &Error{Op: "config", Err: err}
	}
	return nil
}

func (c Config) validate() error {
	jc := backends.JournalConfig{Name: c.Journal, DataDir: c.DataDir, DSN: c.PostgresDSN}
	journal, err := backends.Journals.Lookup(backends.JournalName(jc))
	if err != nil {
		return err
	}
	if journal.Ephemeral && c.cluster().Provider == fcluster.ProviderConsul {
		return fmt.Errorf("the %s journal is this process's own: a Consul cluster's members need one shared journal (postgres)", journal.Name)
	}
	if _, err := backends.Journals.Prepare(journal.Name, jc); errors.Is(err, backends.ErrNoJournal) {
		return errors.New("DataDir or PostgresDSN is required (or Journal \"memory\")")
	} else if err != nil {
		return err
	}
	if c.LLM.API != "" && !backends.LLMAPIs.Has(c.LLM.API) {
		return fmt.Errorf("unknown LLM API %q (want %s)", c.LLM.API, strings.Join(backends.LLMAPIs.Names(), " or "))
	}
	if c.Artifacts.Name != "" && c.Artifacts.Store == nil {
		if _, err := backends.ArtifactStores.Lookup(c.Artifacts.Name); err != nil {
			return err
		}
	}
	if err := (mock.Script{Rules: c.LLM.DemoRules}).Validate(); err != nil {
		return fmt.Errorf("LLM.DemoRules: %w", err)
	}
	if err := c.cluster().Validate(); err != nil {
		return err
	}
	if err := c.Memory.Validate(c.PostgresDSN); err != nil {
		return err
	}
	if err := c.Telemetry.Validate(); err != nil {
		return err
	}
	if c.Retention < 0 {
		return fmt.Errorf("retention %s is negative", c.Retention)
	}
	seen := map[string]bool{}
	for i, t := range c.Tools {
		switch {
		case t == nil:
			return fmt.Errorf("the tool Tools[%d] is nil", i)
		case !tools.ValidName(t.Name()):
			return fmt.Errorf("tool name %q is not valid", t.Name())
		case seen[t.Name()]:
			return fmt.Errorf("tool %q is given twice", t.Name())
		}
		seen[t.Name()] = true
	}
	if err := c.Session.Validate(); err != nil {
		return err
	}
	if _, err := core.NewAgents(c.sessionConfig().Agents...); err != nil {
		return err
	}
	return nil
}

// cluster is Cluster, or the default local member when it is the zero value.
func (c Config) cluster() fcluster.Config {
	if c.Cluster.Provider == "" && c.Cluster.Name == "" && c.Cluster.Host == "" {
		cc := fcluster.DefaultConfig()
		cc.Logger = c.Cluster.Logger
		return cc
	}
	return c.Cluster
}

// sessionConfig is Session with Agents added to its own.
func (c Config) sessionConfig() session.Config {
	s := c.Session
	s.Agents = append(slices.Clone(s.Agents), c.Agents...)
	return s
}

// Node is a running embedded node. Its methods are safe for concurrent use.
type Node struct {
	n       *node.Node
	timeout time.Duration
}

// Start validates cfg and starts a node: journal, model, cluster member (in-process,
// local), session grains, the program's tools. Close stops it.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ccfg := cfg.cluster()
	if ccfg.Logger == nil {
		ccfg.Logger = log
	}
	cfg.Session.ApprovalTools = append(slices.Clone(cfg.Session.ApprovalTools), cfg.ApprovalTools...)
	n, err := node.Start(ctx, node.Config{
		JournalBackend: cfg.Journal, DataDir: cfg.DataDir, PostgresDSN: cfg.PostgresDSN, Cluster: ccfg, Session: cfg.sessionConfig(), Logger: log,
		LLM: cfg.LLM, ExtraTools: cfg.Tools, Memory: cfg.Memory, Artifacts: cfg.Artifacts, Sandbox: cfg.Sandbox,
		Telemetry: cfg.Telemetry, MetricsListen: cfg.MetricsListen, Pprof: cfg.Pprof, Retention: cfg.Retention, PromptsDir: cfg.PromptsDir,
		SearXNGURL: cfg.SearXNGURL, MCPServers: cfg.MCPServers, FeedPoll: cfg.FeedPoll, Quotas: cfg.Quotas,
		Webhooks: cfg.Webhooks,
	})
	if err != nil {
		return nil, &Error{Op: "start", Err: err}
	}
	return &Node{n: n, timeout: 30 * time.Second}, nil
}

// SessionRequest starts a session.
type SessionRequest struct {
	// ID names the session; empty picks a new one. Starting an existing ID again is a
	// no-op that answers the same ID (the start is idempotent). An ID must follow
	// messages.ValidateSessionID (one path segment of NFC UTF-8, no white space, control,
	// format or bidi characters).
	ID string
	// Goal is what the session should achieve. Required.
	Goal string
	// UserID is recorded with the session.
	UserID string
	// Config overrides the node's session defaults for this session (model, budgets,
	// max iterations and steps, reasoning), as the gateway's start takes config; nil
	// keeps them all.
	Config *SessionConfig
	// WebhookURL, when set, receives the session's signed notifications (completed,
	// failed, cancelled, awaiting human): an http(s) URL; the node needs
	// Config.Webhooks.Secret. Empty: Session.WebhookURL, if any.
	WebhookURL string
}

// SessionConfig are a session's overrides of the node's defaults (gateway.SessionConfig):
// Model, MaxIterations, MaxSteps, the budgets MaxLLMCalls, MaxCostUSD and MaxTokens,
// ReasoningEffort and ThinkingBudget; a zero field keeps the default.
type SessionConfig = gateway.SessionConfig

// StartSession starts a session and returns its id once its start is durable; the
// session then runs on its own. Like every call of Node that names a session, it acts
// for the principal ctx carries (auth.WithPrincipal), if any: the session belongs to
// that principal's tenant and owner, and another tenant's session is answered as a
// missing one (NOT_FOUND). Without one, the call is the program's own: trusted, and its
// sessions are the default tenant's. An ID that breaks messages.ValidateSessionID is refused
// with an error wrapping messages.ErrInvalidSessionID (and ErrInvalidArgument). The
// start's command id is WithCommandID's, else ID + "/start": a retry of a start with the
// same ID is safe.
func (n *Node) StartSession(ctx context.Context, req SessionRequest, opts ...CallOption) (string, error) {
	if req.Goal == "" {
		return "", invalid("start session", "the goal is empty")
	}
	id := req.ID
	if id == "" {
		id = fmt.Sprintf("s-%d", time.Now().UnixNano())
	}
	if err := messages.ValidateSessionID(id); err != nil {
		return "", failed("start session", err)
	}
	cmd := callOpts(opts).commandID
	if cmd == "" {
		cmd = id + "/start"
	}
	sreq := &messages.StartRequest{CommandId: cmd, Goal: req.Goal, UserId: req.UserID, Caller: callerOf(ctx), Config: req.Config.Message()}
	if req.WebhookURL != "" {
		if sreq.Config == nil {
			sreq.Config = &messages.SessionConfig{}
		}
		sreq.Config.WebhookUrl = req.WebhookURL
	}
	// A start over the tenant's max_running_sessions waits in its start queue, when the
	// tenant has one (start_queue_timeout), for a session of the tenant to end: first
	// come, first served with the gateway's starts; it leaves the queue when ctx ends.
	tenant := auth.DefaultTenant
	if t := sreq.GetCaller().GetTenant(); t != "" {
		tenant = t
	}
	err := n.n.StartQueue().Wait(ctx, tenant, func() error {
		_, err := n.n.Session(id).Start(sreq, n.callTimeout(ctx))
		return err
	})
	if err != nil {
		return "", failed("start session "+id, err)
	}
	return id, nil
}

// Follow subscribes to session id's events with seq > afterSeq: what is stored first,
// then each new one, in seq order with no gap or repeat. Close the subscription when done.
func (n *Node) Follow(id string, afterSeq uint64) live.Subscription {
	return n.n.Feed().Follow(id, afterSeq, 0)
}

// State returns session id's current state.
func (n *Node) State(ctx context.Context, id string) (*messages.SessionState, error) {
	if err := messages.ValidateSessionID(id); err != nil {
		return nil, failed("state", err)
	}
	res, err := n.n.Session(id).GetState(&messages.GetStateRequest{Caller: callerOf(ctx)}, n.callTimeout(ctx))
	if err != nil {
		return nil, failed("state of "+id, err)
	}
	return res.GetState(), nil
}

// CallOption is an option of one write call (StartSession, Send, Answer, Approve, Edit,
// Reject, Pause, Resume, SetBreakpoint, ClearBreakpoints, Fork, Cancel).
type CallOption func(*callOptions)

type callOptions struct {
	commandID string
	requestID string
	onBusy    string
}

func callOpts(opts []CallOption) callOptions {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithRequestID names the human-input request an answer (Answer, Approve, Edit, Reject)
// decides, as the gateway's request_id does: needed only when its step has several open
// (an ask_human call's or an approval's request id is in the state's Awaiting).
func WithRequestID(id string) CallOption {
	return func(o *callOptions) { o.requestID = id }
}

// WithOnBusy says what Send does while the session's turn is running (double
// texting): "reject" (the default) refuses the message; "queue" records it
// (message_queued) to run as the next turn once the current one completes;
// "interrupt" records it and ends the current turn at its next step boundary, then
// runs it.
func WithOnBusy(v string) CallOption {
	return func(o *callOptions) { o.onBusy = v }
}

// WithCommandID names the call's command, as the gateway's command_id does: a call
// retried with the same id (after a timeout, or by a restarted program) is recorded
// once; the retry succeeds as a duplicate and records nothing. The session remembers
// its recent command ids. Without it each call gets a new id, and a retry may be
// recorded twice (or refused: a second cancel of a cancelled session fails).
func WithCommandID(id string) CallOption {
	return func(o *callOptions) { o.commandID = id }
}

// commandID returns the call's command id: WithCommandID's, else a new one made of the
// session id, the operation and the time.
func commandID(id, op string, opts []CallOption) string {
	if o := callOpts(opts); o.commandID != "" {
		return o.commandID
	}
	return fmt.Sprintf("%s/%s/%d", id, op, time.Now().UnixNano())
}

// Answer answers session id's open human-input request of step stepID with input (JSON
// text; a bare string is taken as a JSON string), or decides on a call that waits for
// approval (Config.ApprovalTools). An answer that does not satisfy the request's schema
// (or an edit whose args do not satisfy the tool's) is refused and the request keeps
// waiting (ErrInvalidArgument). WithCommandID makes a retry safe; WithRequestID names
// the request when the step has several open. Approve, Edit and Reject decide an
// approval without writing its JSON.
func (n *Node) Answer(ctx context.Context, id, stepID, input string, opts ...CallOption) error {
	if err := messages.ValidateSessionID(id); err != nil {
		return failed("answer "+stepID, err)
	}
	_, err := n.n.Session(id).ProvideInput(&messages.ProvideInputRequest{CommandId: commandID(id, "answer/"+stepID, opts), Caller: callerOf(ctx),
		StepId: stepID, RequestId: callOpts(opts).requestID, Input: input}, n.callTimeout(ctx))
	if err != nil {
		return failed("answer "+stepID+" of "+id, err)
	}
	return nil
}

// Send adds a follow-up message to session id, which must have completed: the message
// (message_received) opens the session's next turn, in which the orchestrator answers it
// from the whole history, directly or by planning new steps, ending in
// session_completed again. It returns the session's last event before the message:
// Follow(id, afterSeq) delivers the turn from its message_received on (after a queued
// message's message_queued and the rest of the running turn). A running session
// (unless WithOnBusy queues the message), a failed or cancelled session, an unknown id and an empty or oversize message are
// refused. WithCommandID makes a retry safe: a retry of a recorded message records
// nothing and returns the same afterSeq.
func (n *Node) Send(ctx context.Context, id, content string, opts ...CallOption) (afterSeq uint64, err error) {
	st, err := n.State(ctx, id)
	if err != nil {
		return 0, failed("send to "+id, err)
	}
	cmd := commandID(id, "send", opts)
	resp, err := n.n.Session(id).Send(&messages.SendRequest{CommandId: cmd, Content: content, Caller: callerOf(ctx), OnBusy: callOpts(opts).onBusy}, n.callTimeout(ctx))
	if err != nil {
		return 0, failed("send to "+id, err)
	}
	if resp.GetDuplicate() {
		return n.messageBefore(ctx, id, cmd)
	}
	return st.GetSeq(), nil
}

// messageBefore returns the seq before session id's message_received of command cmd.
func (n *Node) messageBefore(ctx context.Context, id, cmd string) (uint64, error) {
	errFound := errors.New("found")
	var seq uint64
	err := replay.Events(ctx, n.n.Journal(), id, 0, func(ev *messages.Event) error {
		if ev.GetMessageReceived() != nil && ev.GetCommandId() == cmd {
			seq = ev.GetSeq() - 1
			return errFound
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFound) {
		return 0, failed("send to "+id+": find the message of command "+cmd, &callError{kind: ErrUnavailable, err: err})
	}
	if err == nil {
		return 0, fmt.Errorf("fathom: send to %s: command %s was recorded, but not as a message", id, cmd)
	}
	return seq, nil
}

// Cancel stops session id for good, recording reason. WithCommandID makes a retry safe:
// a retry of a recorded cancel succeeds and records nothing.
func (n *Node) Cancel(ctx context.Context, id, reason string, opts ...CallOption) error {
	if err := messages.ValidateSessionID(id); err != nil {
		return failed("cancel", err)
	}
	_, err := n.n.Session(id).Cancel(&messages.CancelRequest{CommandId: commandID(id, "cancel", opts),
		Reason: reason, By: "embedding program", Caller: callerOf(ctx)}, n.callTimeout(ctx))
	if err != nil {
		return failed("cancel "+id, err)
	}
	return nil
}

// Close stops the node: sessions stop at a step boundary and continue at the next Start
// on the same journal.
func (n *Node) Close(ctx context.Context) error { return n.n.Stop(ctx) }

// callerOf is the principal ctx carries (auth.WithPrincipal) as grain requests carry
// it, nil for none: the embedding program itself, which the grains trust.
func callerOf(ctx context.Context) *messages.Principal {
	if p, ok := auth.FromContext(ctx); ok {
		return auth.ToMessage(p)
	}
	return nil
}

// callTimeout bounds a grain call by ctx's deadline, else 30 s.
func (n *Node) callTimeout(ctx context.Context) cluster.GrainCallOption {
	d := n.timeout
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
	}
	return cluster.WithTimeout(max(d, time.Millisecond))
}

// A2AAgent is a remote A2A agent as an agent of the node's own (config a2a_agents): a
// plan step of type name is sent to it as a new task (the step's task brief as the
// message's text, a blocking SendMessage) and its result artifact's text is the step's
// hand-off; a task that does not complete fails the step. The run is journaled as the
// step's sub-agent run, like any Go-function agent's.
func A2AAgent(name, description string, c *a2a.Client) Agent {
	return Agent{Name: name, Description: description, Run: func(ctx context.Context, b Brief) (*Handoff, error) {
		return c.Handoff(ctx, fmt.Sprintf("%s-%s-%d", b.SessionID, b.Step.GetId(), b.Attempt), b.Task)
	}}
}
