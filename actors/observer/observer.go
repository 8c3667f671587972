// Package observer owns the node's view of supervision: an actor that subscribes to the
// actor system's event stream and turns every supervision event (restart, stop, escalation,
// resume) of any actor on the node — session grains, step and tool runners, sub-agents,
// summarizer workers, sandbox connections, MCP server connections — into a structured log line, a metric
// (fathom.actor.restarts, exported to Prometheus as fathom_actor_restarts_total{kind}) and a
// Restart record kept in a bounded ring for operators.
//
// Proto.Actor logs only what the root of a tree decides; a restarted step runner or
// summarizer worker is otherwise silent. Operators need every restart, classified by the kind
// of actor and tied to its session where there is one.
//
//	obs, err := observer.Spawn(system, observer.Config{Node: addr, Logger: log, Meter: meter})
//	...
//	recent, err := obs.Recent(ctx) // newest last, at most Config.Keep
package observer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// ActorName is the observer's name on the node.
const ActorName = "observer"

// Kinds of actor a Restart names (bounded label values).
const (
	KindSession    = "session"            // a session grain
	KindStepRunner = "step_runner"        // a grain's step runner (one LLM call)
	KindToolRunner = "tool_runner"        // a tool call's runner (grain or sub-agent)
	KindSubAgent   = "subagent"           // a sub-agent actor
	KindAgentCall  = "agent_llm_call"     // a sub-agent's LLM call
	KindSummarizer = "summarizer"         // a summarizer pool or worker
	KindSandbox    = "sandbox_connection" // the sandbox pool, a connection or its token manager
	KindMCP        = "mcp_server"         // an MCP server's connection (actors/mcp) or their supervisor
	KindOther      = "other"              // anything else
)

// Restart is one supervision event, as operators see it.
type Restart struct {
	// Seq numbers the node's records from 1 (a reader follows with "after Seq").
	Seq uint64 `json:"seq"`
	// Node is the address of the member the actor ran on.
	Node string `json:"node"`
	// Actor is the actor's path on that node.
	Actor string `json:"actor"`
	// Kind classifies the actor (Kind* constants).
	Kind string `json:"kind"`
	// SessionID is the session the actor belongs to ("" when none).
	SessionID string `json:"session_id,omitempty"`
	// Reason is what the actor failed with.
	Reason string `json:"reason"`
	// Directive is the supervisor's decision: restart, stop, escalate or resume.
	Directive string `json:"directive"`
	// Count is how many supervision events this actor path has had on this node.
	Count int `json:"count"`
	// At is when the observer saw the event.
	At time.Time `json:"at"`
}

// Config configures the observer.
type Config struct {
	// Node is the member's address, recorded in every Restart.
	Node string
	// Logger receives one line per supervision event (default slog.Default()).
	Logger *slog.Logger
	// Meter creates the fathom.actor.restarts counter (default: a no-op meter).
	Meter metric.Meter
	// Keep is how many recent restarts are kept (default 1000).
	Keep int
	// OnRestart, when set, is called from the observer actor with every record (e.g. to
	// publish it cluster-wide). It must not block.
	OnRestart func(Restart)
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config { return Config{Keep: 1000} }

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.Keep < 0 {
		return fmt.Errorf("observer: Keep must not be negative, got %d", c.Keep)
	}
	return nil
}

// Observer is a running observer: the actor and its event-stream subscription.
type Observer struct {
	system *actor.ActorSystem
	pid    *actor.PID
	sub    *eventstream.Subscription
	once   sync.Once
}

// Spawn starts the observer on system under ActorName and subscribes it to the event stream.
func Spawn(system *actor.ActorSystem, cfg Config) (*Observer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Keep == 0 {
		cfg.Keep = DefaultConfig().Keep
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Meter == nil {
		cfg.Meter = noop.NewMeterProvider().Meter("observer")
	}
	restarts, err := cfg.Meter.Int64Counter("fathom.actor.restarts",
		metric.WithDescription("Supervision events (restart, stop, escalate, resume) of the node's actors, by kind of actor."),
		metric.WithUnit("{event}"))
	if err != nil {
		return nil, fmt.Errorf("observer: counter: %w", err)
	}
	a := &observerActor{cfg: cfg, counter: restarts, counts: map[string]int{}}
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a }), ActorName)
	if err != nil {
		return nil, fmt.Errorf("observer: spawn: %w", err)
	}
	o := &Observer{system: system, pid: pid}
	// The callback runs on the publisher's goroutine: hand the event to the actor, never block.
	o.sub = system.EventStream.Subscribe(func(evt any) {
		if se, ok := evt.(*actor.SupervisorEvent); ok && se.Child != nil && se.Child.Id != pid.Id {
			system.Root.Send(pid, se)
		}
	})
	return o, nil
}

// PID is the observer actor's address.
func (o *Observer) PID() *actor.PID { return o.pid }

// Recent returns the kept restarts, oldest first.
func (o *Observer) Recent(ctx context.Context) ([]Restart, error) {
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if timeout <= 0 {
		return nil, context.DeadlineExceeded
	}
	res, err := o.system.Root.RequestFuture(o.pid, &recentRequest{}, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("observer: recent restarts: %w", err)
	}
	rs, ok := res.([]Restart)
	if !ok {
		return nil, errors.New("observer: unexpected answer")
	}
	return rs, nil
}

// Stop unsubscribes and stops the actor. It is idempotent.
func (o *Observer) Stop() {
	o.once.Do(func() {
		o.system.EventStream.Unsubscribe(o.sub)
		_ = o.system.Root.StopFuture(o.pid).Wait()
	})
}

// recentRequest asks the actor for its ring.
type recentRequest struct{}

type observerActor struct {
	cfg     Config
	counter metric.Int64Counter
	ring    []Restart // bounded by cfg.Keep, oldest first
	counts  map[string]int
	seq     uint64
}

// Receive implements actor.Actor.
func (a *observerActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.SupervisorEvent:
		a.onSupervisorEvent(msg)
	case *recentRequest:
		ctx.Respond(append([]Restart(nil), a.ring...))
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	default:
		a.cfg.Logger.Debug("observer: unexpected message", "type", fmt.Sprintf("%T", msg))
	}
}

// maxCounted bounds the per-path counts: past it, the map starts over (counts are a hint).
const maxCounted = 10000

func (a *observerActor) onSupervisorEvent(se *actor.SupervisorEvent) {
	path := se.Child.Id
	if len(a.counts) >= maxCounted {
		clear(a.counts)
	}
	a.counts[path]++
	kind, session := Classify(path)
	a.seq++
	r := Restart{
		Seq:       a.seq,
		Node:      a.cfg.Node,
		Actor:     path,
		Kind:      kind,
		SessionID: session,
		Reason:    fmt.Sprint(se.Reason),
		Directive: directive(se.Directive),
		Count:     a.counts[path],
		At:        time.Now().UTC(),
	}
	a.cfg.Logger.Warn("actor supervision event", "node", r.Node, "actor", r.Actor, "kind", r.Kind,
		"session_id", r.SessionID, "reason", r.Reason, "directive", r.Directive, "restart_count", r.Count)
	a.counter.Add(context.Background(), 1, metric.WithAttributes(attribute.String("kind", kind)))
	if len(a.ring) >= a.cfg.Keep {
		copy(a.ring, a.ring[1:])
		a.ring = a.ring[:len(a.ring)-1]
	}
	a.ring = append(a.ring, r)
	if a.cfg.OnRestart != nil {
		a.cfg.OnRestart(r)
	}
}

func directive(d actor.Directive) string {
	switch d {
	case actor.ResumeDirective:
		return "resume"
	case actor.RestartDirective:
		return "restart"
	case actor.StopDirective:
		return "stop"
	case actor.EscalateDirective:
		return "escalate"
	}
	return d.String()
}

// grainRoot is the prefix under which Proto.Actor's identity lookup spawns grains.
const grainRoot = "partition-activator/"

// Classify names the kind of actor a PID id belongs to and its session, from the path the
// node gives its actors: grains are partition-activator/<session id>$n, their children
// step-runner$n, tool-runner$n and subagent-<id>$n (whose children are llm$n and tool$n);
// summarizers/… and sandbox/… are the node's pools; mcp/… its MCP server connections.
func Classify(path string) (kind, sessionID string) {
	parts := strings.Split(path, "/")
	name := func(i int) string {
		s := parts[i]
		if j := strings.LastIndexByte(s, '$'); j >= 0 {
			s = s[:j]
		}
		return s
	}
	switch {
	case strings.HasPrefix(path, grainRoot) && len(parts) >= 2:
		sessionID = name(1)
		if len(parts) == 2 {
			return KindSession, sessionID
		}
		last := name(len(parts) - 1)
		switch {
		case last == "step-runner":
			return KindStepRunner, sessionID
		case last == "tool-runner" || last == "tool":
			return KindToolRunner, sessionID
		case last == "llm":
			return KindAgentCall, sessionID
		case strings.HasPrefix(last, "subagent-"):
			return KindSubAgent, sessionID
		}
		return KindOther, sessionID
	case parts[0] == "summarizers":
		return KindSummarizer, ""
	case parts[0] == "sandbox":
		return KindSandbox, ""
	case parts[0] == "mcp":
		return KindMCP, ""
	}
	return KindOther, ""
}
