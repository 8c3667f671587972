package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/messages"
)

// Path is where Mount serves the MCP endpoint on the gateway.
const Path = "/mcp"

// RunAgentTool is the name of the generic tool: a session planned freely from the goal.
const RunAgentTool = "run_agent"

// Status values of a call's Result.
const (
	StatusCompleted     = "completed"
	StatusFailed        = "failed"
	StatusCancelled     = "cancelled"
	StatusAwaitingInput = "awaiting_input"
)

// EventMetaKey is the _meta key of a progress notification that carries the session's
// event, as the gateway's streams render it.
const EventMetaKey = "fathom/event"

// DefaultSessionTimeout is Config.SessionTimeout's default.
const DefaultSessionTimeout = time.Hour

// Agent is an agent of the node, served as the tool named Name.
type Agent struct {
	// Name names the agent and its tool.
	Name string
	// Description says what the agent is for (the tool's description includes it).
	Description string
	// StepType is the plan step type that delegates to the agent (the name, but for the
	// built-ins: research, code, write, review); "" means Name.
	StepType string
	// WebhookURL, when set, is the webhook_url of the sessions the tool starts: the
	// node POSTs their signed notifications there (the agent's webhook_url in the
	// config file).
	WebhookURL string
}

// Config configures the MCP server.
type Config struct {
	// Gateway is the gateway the server is mounted on and runs its operations through.
	// Required.
	Gateway *gateway.Handler
	// Agents are the node's agents: a tool each, besides run_agent. An agent named
	// run_agent is left out (the generic tool keeps the name).
	Agents []Agent
	// Version is the server's version in the MCP handshake; "" : the module's.
	Version string
	// SessionTimeout closes an MCP session (not a Fathom session) that has had no request
	// for that long; 0 means DefaultSessionTimeout.
	SessionTimeout time.Duration
	// Logger receives the server's log; nil discards it.
	Logger *slog.Logger
}

// Server is the MCP endpoint: an http.Handler to mount behind the gateway's
// authentication (Mount does).
type Server struct {
	cfg    Config
	log    *slog.Logger
	server *mcp.Server
	// tools are the agent of each tool (nil: run_agent).
	tools  map[string]*Agent
	plain  http.Handler // the streamable HTTP handler
	bearer http.Handler // plain, told the principal of a bearer credential
	// stopping is done once the gateway's Shutdown has begun: the MCP sessions are
	// closed then, and new requests refused.
	stopping context.Context
}

// Mount serves a new Server at Path on cfg.Gateway, for principals that may at least
// read (a call starts a session: a read-only credential gets the gateway's refusal as a
// tool error). Call it before the gateway serves requests.
func Mount(cfg Config) (*Server, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	cfg.Gateway.Mount(Path, gateway.ScopeRead, s)
	return s, nil
}

// New returns the MCP server of cfg's agents over cfg.Gateway. When the gateway's
// Shutdown begins, the server closes its MCP sessions (Shutdown waits for that) and
// answers new requests 503.
func New(cfg Config) (*Server, error) {
	if cfg.Gateway == nil {
		return nil, errors.New("mcpserver: Gateway is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = moduleVersion()
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	out, err := jsonschema.For[Result](nil)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: the result's schema: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, tools: map[string]*Agent{RunAgentTool: nil}}
	s.server = mcp.NewServer(&mcp.Implementation{Name: "fathom", Title: "Fathom agents", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: "Each tool runs a Fathom agent session to its end and answers its final result; " +
			"send a progress token to follow its steps, cancel the request to cancel the session.",
		Logger: cfg.Logger,
	})
	mcp.AddTool(s.server, &mcp.Tool{
		Name:  RunAgentTool,
		Title: "Run a Fathom agent session",
		Description: "Starts a Fathom session with the goal: the planner splits it into steps for the node's agents " +
			"(researcher, coder, writer, reviewer and the configured ones), which run them. Answers the session's " +
			"final result once it ends; structured content: session_id, status, result, cost_usd.",
		Annotations:  &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
		OutputSchema: out,
	}, s.runTool(nil))
	for _, a := range cfg.Agents {
		if a.Name == RunAgentTool || a.Name == "" {
			s.log.Warn("mcp server: agent left out (its name is taken)", "agent", a.Name)
			continue
		}
		mcp.AddTool(s.server, &mcp.Tool{
			Name:         a.Name,
			Title:        "Fathom agent " + a.Name,
			Description:  fmt.Sprintf("Runs Fathom's %s agent (%s) on the goal, in a session of its own, and answers its final result; structured content: session_id, status, result, cost_usd.", a.Name, strings.TrimSpace(a.Description)),
			Annotations:  &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
			OutputSchema: out,
		}, s.runTool(&a))
		s.tools[a.Name] = &a
	}
	if err := s.addTasks(); err != nil {
		return nil, err
	}
	s.plain = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.server },
		&mcp.StreamableHTTPOptions{Logger: cfg.Logger, SessionTimeout: cfg.SessionTimeout})
	s.bearer = mcpauth.RequireBearerToken(func(ctx context.Context, _ string, r *http.Request) (*mcpauth.TokenInfo, error) {
		p, ok := auth.FromContext(r.Context())
		if !ok {
			return nil, mcpauth.ErrInvalidToken
		}
		// UserID binds an MCP session to the principal that opened it: the SDK refuses
		// its Mcp-Session-Id to anyone else.
		return &mcpauth.TokenInfo{UserID: p.Tenant + "\x00" + p.Subject, Extra: map[string]any{principalKey: p}}, nil
	}, &mcpauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(s.plain)
	// The gateway's Shutdown closes the MCP sessions (their standing event streams
	// would hold the HTTP server's Shutdown) and waits for that.
	stopping, stop := context.WithCancel(context.Background())
	s.stopping = stopping
	cfg.Gateway.OnShutdown(func() {
		stop()
		for ss := range s.server.Sessions() {
			_ = ss.Close()
		}
	})
	return s, nil
}

// principalKey is where the principal rides in the SDK's TokenInfo.
const principalKey = "fathom.principal"

// ServeHTTP serves the streamable HTTP transport. The gateway has authenticated the
// request (its principal is in the context); a bearer credential's principal is handed
// to the SDK so that each call acts for the principal of its own request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.stopping.Err() != nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the gateway is shutting down", http.StatusServiceUnavailable)
		return
	}
	if err := moveTaskParams(r); err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errBodyTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		http.Error(w, err.Error(), status)
		return
	}
	if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		s.bearer.ServeHTTP(w, r)
		return
	}
	s.plain.ServeHTTP(w, r)
}

// Input is the arguments of every tool.
type Input struct {
	// Goal is what the session should achieve.
	Goal string `json:"goal" jsonschema:"what the agent should achieve: the session's goal, in plain language"`
	// SessionID names the new session (generated when empty).
	SessionID string `json:"session_id,omitempty" jsonschema:"the id to give the new session (letters, digits, '-', '_', '.', ':'); generated when left out"`
}

// Result is a call's structured content.
type Result struct {
	// SessionID is the session the call ran.
	SessionID string `json:"session_id" jsonschema:"the Fathom session the call ran"`
	// Status is completed, failed, cancelled or awaiting_input.
	Status string `json:"status" jsonschema:"completed, failed, cancelled or awaiting_input (the session waits for a human's answer)"`
	// Result is the session's final answer (completed).
	Result string `json:"result,omitempty" jsonschema:"the session's final answer"`
	// Error says why the session failed, or was cancelled.
	Error string `json:"error,omitempty" jsonschema:"why the session failed or was cancelled"`
	// Question and RequestID are the human-input request the session waits for.
	Question  string `json:"question,omitempty" jsonschema:"the question the session waits to have answered"`
	RequestID string `json:"request_id,omitempty" jsonschema:"the request the answer names (the gateway's input operation)"`
	// CostUSD is the session's model cost so far.
	CostUSD float64 `json:"cost_usd" jsonschema:"the session's model cost in USD"`
}

// runTool is the handler of agent's tool (nil: run_agent). Its output is a *Result, or
// nil for a tool error (which has no structured content).
func (s *Server) runTool(agent *Agent) mcp.ToolHandlerFor[Input, any] {
	var a Agent
	if agent != nil {
		a = *agent
	}
	return func(ctx context.Context, req *mcp.CallToolRequest, in Input) (*mcp.CallToolResult, any, error) {
		if p, ok := principalOf(ctx, req); ok {
			ctx = auth.WithPrincipal(ctx, p)
		}
		goal := strings.TrimSpace(in.Goal)
		if goal == "" {
			return toolError("goal must not be empty: say what the agent should achieve"), nil, nil
		}
		if a.Name != "" {
			goal = agentGoal(a, goal)
		}
		res, out, err := s.run(ctx, req, gateway.Request{Op: gateway.OpStart, Goal: goal, SessionID: in.SessionID, WebhookURL: a.WebhookURL})
		if out == nil {
			return res, nil, err
		}
		return res, out, err
	}
}

// agentGoal asks the planner to hand goal to agent a.
func agentGoal(a Agent, goal string) string {
	typ := a.StepType
	if typ == "" {
		typ = a.Name
	}
	return fmt.Sprintf("%s\n\n(Have the %s agent do this: plan it as a single step of type %q.)", goal, a.Name, typ)
}

func principalOf(ctx context.Context, req *mcp.CallToolRequest) (auth.Principal, bool) {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		if p, ok := req.Extra.TokenInfo.Extra[principalKey].(auth.Principal); ok {
			return p, true
		}
	}
	return auth.FromContext(ctx)
}

// run starts a session (start: its goal, id and webhook URL), follows it to its end (or
// a human-input request) and answers its result.
func (s *Server) run(ctx context.Context, req *mcp.CallToolRequest, start gateway.Request) (*mcp.CallToolResult, *Result, error) {
	g := s.cfg.Gateway
	body, err := g.Do(ctx, start)
	if err != nil {
		code, msg := gateway.ErrorCode(err)
		return toolError(fmt.Sprintf("cannot start the session: %s (%s)", msg, code)), nil, nil
	}
	var started struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(body, &started); err != nil || started.SessionID == "" {
		return nil, nil, fmt.Errorf("read the start's answer %s: %w", body, err)
	}
	id := started.SessionID
	sctx, done, err := g.Stream(ctx)
	if err != nil {
		_, msg := gateway.ErrorCode(err)
		return toolError(fmt.Sprintf("session %s started, but %s: follow it over the gateway", id, msg)), nil, nil
	}
	defer done()
	sub, err := g.Follow(sctx, id, 0, false)
	if err != nil {
		code, msg := gateway.ErrorCode(err)
		return toolError(fmt.Sprintf("session %s started, but cannot follow it: %s (%s)", id, msg, code)), nil, nil
	}
	defer sub.Close()
	progress := progressOf(req)
	var out *Result
	for out == nil {
		u, err := sub.NextUpdate(sctx)
		switch {
		case err != nil && ctx.Err() != nil:
			s.cancel(ctx, id)
			return nil, nil, fmt.Errorf("the call was cancelled: session %s is cancelled: %w", id, ctx.Err())
		case err != nil && sctx.Err() != nil:
			return toolError(fmt.Sprintf("the gateway is shutting down: session %s goes on; follow it over the gateway", id)), nil, nil
		case err != nil:
			return nil, nil, fmt.Errorf("follow session %s: %w", id, err)
		case u.IsDelta || u.Event == nil:
			continue
		}
		ev := u.Event
		if msg := describe(ev); msg != "" && progress != nil {
			progress.notify(ctx, req, g, id, u, msg, s.log)
		}
		out = terminal(id, ev)
	}
	out.CostUSD = s.cost(ctx, id, out.CostUSD)
	return render(out), out, nil
}

// cancel cancels session id for the principal in ctx (done: the call was cancelled).
func (s *Server) cancel(ctx context.Context, id string) {
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer stop()
	_, err := s.cfg.Gateway.Do(cctx, gateway.Request{Op: gateway.OpCancel, SessionID: id, By: "mcp",
		Reason: "the MCP client cancelled the tool call"})
	if err != nil {
		s.log.Warn("mcp server: cancel the session of a cancelled call", "session_id", id, "error", err)
	}
}

// cost is session id's cost as its state says (fallback when it cannot be read).
func (s *Server) cost(ctx context.Context, id string, fallback float64) float64 {
	body, err := s.cfg.Gateway.Do(ctx, gateway.Request{Op: gateway.OpState, SessionID: id})
	if err != nil {
		return fallback
	}
	var st struct {
		State struct {
			CostUSD float64 `json:"cost_usd"`
		} `json:"state"`
	}
	if json.Unmarshal(body, &st) != nil || st.State.CostUSD == 0 {
		return fallback
	}
	return st.State.CostUSD
}

// terminal is the call's result when ev ends it: the session's end, or a request for a
// human's input; nil otherwise.
func terminal(id string, ev *messages.Event) *Result {
	switch p := ev.GetPayload().(type) {
	case *messages.Event_SessionCompleted:
		return &Result{SessionID: id, Status: StatusCompleted, Result: p.SessionCompleted.GetResult(), CostUSD: p.SessionCompleted.GetCostUsd()}
	case *messages.Event_SessionFailed:
		return &Result{SessionID: id, Status: StatusFailed, Error: p.SessionFailed.GetError()}
	case *messages.Event_SessionCancelled:
		return &Result{SessionID: id, Status: StatusCancelled, Error: strings.TrimSpace("cancelled by " + p.SessionCancelled.GetBy() + ": " + p.SessionCancelled.GetReason())}
	case *messages.Event_HitlRequested:
		return &Result{SessionID: id, Status: StatusAwaitingInput, Question: p.HitlRequested.GetQuestion(), RequestID: p.HitlRequested.GetRequestId()}
	}
	return nil
}

// render is out as the call's text content; a session that did not complete is a tool
// error.
func render(out *Result) *mcp.CallToolResult {
	var text string
	switch out.Status {
	case StatusCompleted:
		text = out.Result
		if strings.TrimSpace(text) == "" {
			text = fmt.Sprintf("session %s completed with an empty result", out.SessionID)
		}
	case StatusAwaitingInput:
		text = fmt.Sprintf("session %s waits for a human's answer to: %s\nAnswer it with the gateway's input operation (POST /v1/sessions/%s/input, request_id %q).",
			out.SessionID, out.Question, out.SessionID, out.RequestID)
	default:
		text = fmt.Sprintf("session %s %s: %s", out.SessionID, out.Status, out.Error)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}},
		IsError: out.Status == StatusFailed || out.Status == StatusCancelled}
}

func toolError(msg string) *mcp.CallToolResult {
	r := &mcp.CallToolResult{}
	r.SetError(errors.New(msg))
	return r
}

// progress sends a call's progress notifications.
type progress struct {
	token any
	n     float64
}

func progressOf(req *mcp.CallToolRequest) *progress {
	if req.Params == nil {
		return nil
	}
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return nil
	}
	return &progress{token: tok}
}

func (p *progress) notify(ctx context.Context, req *mcp.CallToolRequest, g *gateway.Handler, id string, u live.Update, msg string, log *slog.Logger) {
	p.n++
	params := &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: p.n, Message: msg}
	if b, err := g.EventJSON(id, u); err == nil {
		params.Meta = mcp.Meta{EventMetaKey: json.RawMessage(b)}
	}
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := req.Session.NotifyProgress(nctx, params); err != nil {
		log.Debug("mcp server: progress notification not sent", "session_id", id, "error", err)
	}
}

// describe is the progress message of ev; "" for the events no progress is reported for
// (model calls, tool calls, deltas).
func describe(ev *messages.Event) string {
	switch p := ev.GetPayload().(type) {
	case *messages.Event_SessionStarted:
		return "session started"
	case *messages.Event_PlanCreated:
		return fmt.Sprintf("planned %d step(s)", len(p.PlanCreated.GetSteps()))
	case *messages.Event_PlanRevised:
		return "re-planned the remaining work"
	case *messages.Event_StepStarted:
		s := p.StepStarted
		return fmt.Sprintf("step %d started (%s): %s", s.GetStepIndex()+1, s.GetStepType(), truncate(s.GetDescription(), 200))
	case *messages.Event_StepCompleted:
		return fmt.Sprintf("step %d completed", p.StepCompleted.GetStepIndex()+1)
	case *messages.Event_StepFailed:
		return fmt.Sprintf("step %d failed: %s", p.StepFailed.GetStepIndex()+1, truncate(p.StepFailed.GetError(), 200))
	case *messages.Event_InterruptTriggered:
		return "paused at a breakpoint (" + p.InterruptTriggered.GetReason() + ")"
	case *messages.Event_HitlRequested:
		return "waiting for a human: " + truncate(p.HitlRequested.GetQuestion(), 200)
	case *messages.Event_SessionCompleted:
		return "session completed"
	case *messages.Event_SessionFailed:
		return "session failed: " + truncate(p.SessionFailed.GetError(), 200)
	case *messages.Event_SessionCancelled:
		return "session cancelled"
	}
	return ""
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func ptr[T any](v T) *T { return &v }

// moduleVersion is the version of the binary's main module ("dev" when unknown).
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
