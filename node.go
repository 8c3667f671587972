package fathom

import (
	"context"
	"fmt"
	"time"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/gateway/a2a"
	"github.com/fathom-agents/fathom/gateway/agui"
	"github.com/fathom-agents/fathom/gateway/mcpserver"
	"github.com/fathom-agents/fathom/internal/buildinfo"
	"github.com/fathom-agents/fathom/internal/errcode"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/live/feed"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
)

// Error is an error of Start: Op is "config" (Validate refused the configuration;
// nothing was started) or "start" (a part of the node failed to start; everything
// started before it was stopped again).
type Error struct {
	// Op is "config" or "start".
	Op string
	// Err is the cause.
	Err error
}

func (e *Error) Error() string { return "fathom: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Session returns a grain client for session id: the node's own way to reach a
// session's grain, as any service in the cluster would (sessiongrain.SessionGrainClient).
func (n *Node) Session(id string) *sessiongrain.SessionGrainClient { return n.n.Session(id) }

// FollowDeltas is Follow with the live deltas too (streamed model text, tool output
// chunks), which are never journaled; buffer bounds the deltas kept for a slow reader
// (0 means 1,024). Close the subscription when done.
func (n *Node) FollowDeltas(id string, afterSeq uint64, buffer int) *feed.Subscription {
	return n.n.Feed().SubscribeWithDeltas(id, afterSeq, buffer)
}

// Delete deletes terminal session id: its events, its index entry, its embeddings and
// its artifacts. A session that still runs is refused (ErrFailedPrecondition, wrapping
// gateway.ErrSessionNotTerminal); an unknown one is ErrNotFound. With a principal in ctx
// (auth.WithPrincipal), another tenant's session (or one the principal may not act on)
// is refused as the grain refuses it, before anything is deleted; the tombstone names
// the principal.
func (n *Node) Delete(ctx context.Context, id string) error {
	if err := messages.ValidateSessionID(id); err != nil {
		return failed("delete", err)
	}
	if err := n.access(ctx, id, true); err != nil {
		return failed("delete "+id, err)
	}
	if err := n.n.DeleteSession(ctx, id); err != nil {
		if errcode.Of(err) == errcode.Internal { // the journal, vectors or artifacts failed: repeat the delete
			err = &callError{kind: ErrUnavailable, err: err}
		}
		return failed("delete "+id, err)
	}
	return nil
}

// access asks session id's grain whether the principal ctx carries may read (act:
// act on) it, as the gateway asks for the reads that do not go through the grain: the
// program's own calls and an administrator's are not asked.
func (n *Node) access(ctx context.Context, id string, act bool) error {
	c := callerOf(ctx)
	if c == nil || auth.FromMessage(c).Admin() {
		return nil
	}
	_, err := n.n.Session(id).Access(&messages.AccessRequest{Caller: c, Act: act}, n.callTimeout(ctx))
	return err
}

// Address is the node's cluster address (host:port).
func (n *Node) Address() string { return n.n.Address() }

// MetricsAddr is the address GET /metrics is served on with Config.MetricsListen ("" without).
func (n *Node) MetricsAddr() string { return n.n.MetricsAddr() }

// UsesDemoModel reports whether the node answers with the built-in demo model (no API
// key and no base URL configured).
func (n *Node) UsesDemoModel() bool { return n.n.UsesDemoModel() }

// Ready reports whether the node can serve: it is not draining (gateway.ErrDraining),
// its member can place grains, its journal answers and its sandbox (when it has one) is
// reachable. What is not ready is a *gateway.NotReadyError naming the part (node,
// cluster, journal, sandbox).
func (n *Node) Ready(ctx context.Context) error {
	if n.n.Draining() {
		return &gateway.NotReadyError{Part: "node", Err: gateway.ErrDraining}
	}
	if err := n.n.Cluster().Ready(); err != nil {
		return &gateway.NotReadyError{Part: "cluster", Err: err}
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := n.n.Journal().LastSeq(rctx, "_readyz"); err != nil {
		return &gateway.NotReadyError{Part: "journal", Err: err}
	}
	if err := n.n.SandboxReady(rctx); err != nil {
		return &gateway.NotReadyError{Part: "sandbox", Err: err}
	}
	return nil
}

// Drain drains the node (fathom node drain, POST /v1/node/drain): its sessions start no
// call and finish the running ones for up to the drain timeout (Config.Session's
// DrainTimeout, default 30 s), then move to the other members, which continue them from
// their journals; the member leaves the placement. It returns once the node drained, or
// when ctx ends (the drain goes on). The node hosts no session afterwards: Close it.
// Close drains too, within its context's deadline.
func (n *Node) Drain(ctx context.Context) (gateway.DrainReport, error) { return n.n.Drain(ctx) }

// Gateway returns the HTTP + WebSocket gateway (package gateway) serving this node:
// cfg's own settings (tokens, origins, limits, logger) with the node's sessions, live
// feed, metrics, supervision events, session index, artifacts, deletion, cluster view
// and readiness filled in, the MCP server of the node's agents at /mcp (package
// gateway/mcpserver), the A2A server (package gateway/a2a: the agent card and the
// JSON-RPC binding at /a2a, docs/a2a.md) and the AG-UI endpoint (POST /v1/agui, package
// gateway/agui); GET /v1/openapi.json documents every route. Serve it with an http.Server;
// call its Shutdown before Close. ctx lends its values to the gateway's readiness checks;
// its end does not end the gateway (each check has its own deadline).
func (n *Node) Gateway(ctx context.Context, cfg gateway.Config) (*gateway.Handler, error) {
	nn := n.n
	cfg.Sessions, cfg.Feed = nn.GatewaySessions(), nn.Feed()
	if q := nn.StartQueue(); q != nil {
		cfg.StartQueue = q // one queue per tenant for the gateway's and the Go API's starts
	}
	cfg.Metrics, cfg.Restarts, cfg.Index, cfg.Artifacts = nn.MetricsHandler(), nn.Restarts, nn, nn
	cfg.Deleter, cfg.Cluster, cfg.Meter = nn, nn.ClusterInfo, nn.MeterProvider().Meter("github.com/fathom-agents/fathom/gateway")
	cfg.Memories = nn.GatewayMemories()
	rctx := context.WithoutCancel(ctx) // a setup deadline must not fail every later /readyz
	cfg.Ready = func() error { return n.Ready(rctx) }
	cfg.Drain = n.Drain
	cfg.Version, cfg.JournalFormat = buildinfo.String(), buildinfo.Format
	cfg.Tenancy = nn.Tenancy()
	cfg.Gantt = node.GanttJSON
	h, err := gateway.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("fathom: gateway: %w", err)
	}
	if _, err := mcpserver.Mount(mcpserver.Config{Gateway: h, Agents: mcpAgents(nn.Agents()), Logger: cfg.Logger}); err != nil {
		return nil, fmt.Errorf("fathom: gateway: mcp server: %w", err)
	}
	agents := make([]a2a.AgentInfo, 0, len(nn.Agents()))
	for _, a := range nn.Agents() {
		agents = append(agents, a2a.AgentInfo{Name: a.Name, Description: a.Description})
	}
	a2a.Mount(h, a2a.Config{Agents: agents, PushNotifications: nn.SendsWebhooks(), Logger: cfg.Logger})
	agui.Mount(h, cfg.Logger) // POST /v1/agui: the AG-UI endpoint
	return h, nil
}

// mcpAgents are agents as the MCP server serves them (a tool each).
func mcpAgents(specs []core.AgentSpec) []mcpserver.Agent {
	out := make([]mcpserver.Agent, 0, len(specs))
	for _, a := range specs {
		out = append(out, mcpserver.Agent{Name: a.Name, Description: a.Description, StepType: a.StepType(), WebhookURL: a.WebhookURL})
	}
	return out
}
