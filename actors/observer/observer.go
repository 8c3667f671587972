// Package observer owns the node's view of supervision: an actor that subscribes to the
// actor system's event stream and turns every supervision event (restart, stop, escalation,
// resume) of any actor on the node — session grains, agent actors, step and tool runners,
// summarizer workers, sandbox connections, MCP server connections — into a structured log line, a metric
// (fathom.actor.restarts, exported to Prometheus as fathom_actor_restarts_total{kind}) and a
// Restart record kept for operators.
//
// In a cluster every member's observer publishes its records (Config.OnRestart, on the
// pub-sub topic fathom.restarts) and subscribes to everyone's (Config.Subscribe, again
// after every topology change, since a topic's subscriptions live on the member hosting
// it), so the records kept by any member are those of the whole cluster: the last
// Config.Keep of each member, numbered in the order this member saw them.
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
	"math"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/messages"
)

// ActorName is the observer's name on the node.
const ActorName = "observer"

// Kinds of actor a Restart names (bounded label values).
const (
	KindSession    = "session"            // a session grain
	KindAgent      = "agent"              // an agent actor (the orchestrator or a sub-agent)
	KindStepRunner = "step_runner"        // an agent's step runner (one LLM call)
	KindToolRunner = "tool_runner"        // an agent's tool runner (one tool call)
	KindSummarizer = "summarizer"         // a summarizer pool or worker
	KindSandbox    = "sandbox_connection" // the sandbox pool, a connection or its token manager
	KindMCP        = "mcp_server"         // an MCP server's connection (actors/mcp) or their supervisor
	KindOther      = "other"              // anything else
	// KindMember is a cluster member that left the topology (stopped or died): each
	// survivor keeps one record of it, Node naming the member, Directive "left".
	KindMember = "member"
)

// Kinds are the values of fathom_actor_restarts_total's kind label.
var Kinds = []string{KindSession, KindAgent, KindStepRunner, KindToolRunner, KindSummarizer, KindSandbox, KindMCP, KindMember, KindOther}

// Restart is one supervision event, as operators see it. It is live.Restart, the one
// record type the observer keeps and the gateway serves.
type Restart = live.Restart

// Config configures the observer.
type Config struct {
	// Node is the member's address, recorded in every Restart.
	Node string
	// Logger receives one line per supervision event (default slog.Default()).
	Logger *slog.Logger
	// Meter creates the fathom.actor.restarts counter (default: a no-op meter).
	Meter metric.Meter
	// Keep is how many recent restarts are kept per member (default 1000).
	Keep int
	// OnRestart, when set, is called from the observer actor with every record of this
	// node (to publish it cluster-wide). It must not block.
	OnRestart func(Restart)
	// Subscribe, when set, subscribes the observer's PID to the other members' records,
	// which then arrive as *messages.RestartRecord. It is called from a goroutine of the
	// observer when it starts and after every cluster topology change, and may block
	// (bounded by its own timeout).
	Subscribe func(pid *actor.PID) error
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
	// Every kind's series starts at zero: the first restart is an increase a query sees.
	for _, k := range Kinds {
		restarts.Add(context.Background(), 0, metric.WithAttributes(attribute.String("kind", k)))
	}
	a := &observerActor{cfg: cfg, counter: restarts, counts: map[string]int{}, perNode: map[string]int{}}
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a }), ActorName)
	if err != nil {
		return nil, fmt.Errorf("observer: spawn: %w", err)
	}
	o := &Observer{system: system, pid: pid}
	// The callback runs on the publisher's goroutine: hand the event to the actor, never block.
	o.sub = system.EventStream.Subscribe(func(evt any) {
		switch e := evt.(type) {
		case *actor.SupervisorEvent:
			if e.Child != nil && e.Child.Id != pid.Id {
				system.Root.Send(pid, e)
			}
		case *cluster.ClusterTopology:
			if len(e.Left) > 0 {
				left := make([]string, 0, len(e.Left))
				for _, m := range e.Left {
					left = append(left, m.Address())
				}
				system.Root.Send(pid, membersLeft{addrs: left})
			}
			system.Root.Send(pid, resubscribe{})
		}
	})
	system.Root.Send(pid, resubscribe{})
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

// membersLeft tells the actor of members that left the topology (stopped or died).
type membersLeft struct{ addrs []string }

// resubscribe asks the actor to subscribe to the other members' records (again).
type resubscribe struct{}

// subscribed reports the end of a Config.Subscribe call.
type subscribed struct{ err error }

type observerActor struct {
	cfg     Config
	counter metric.Int64Counter
	ring    []Restart      // every member's records, oldest first; cfg.Keep per member
	perNode map[string]int // records of each member in ring
	counts  map[string]int
	seq     uint64 // this node's records (NodeSeq)
	viewSeq uint64 // every kept record (Seq)
	// subscribing: a Subscribe call is running; again: another was asked for meanwhile.
	subscribing, again bool
}

// Receive implements actor.Actor.
func (a *observerActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.SupervisorEvent:
		a.onSupervisorEvent(msg)
	case *messages.RestartRecord:
		if msg.GetNode() != a.cfg.Node { // our own are kept when they happen
			a.keep(fromRecord(msg))
		}
	case membersLeft:
		a.onMembersLeft(msg)
	case resubscribe:
		a.subscribe(ctx)
	case subscribed:
		a.subscribing = false
		if msg.err != nil {
			a.cfg.Logger.Warn("observer: subscribing to other members' restarts failed", "error", msg.err)
		}
		if a.again {
			a.again = false
			a.subscribe(ctx)
		}
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
		NodeSeq:   a.seq,
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
	r = a.keep(r)
	if a.cfg.OnRestart != nil {
		a.cfg.OnRestart(r)
	}
}

// onMembersLeft keeps a record of kind member for each member that left the topology,
// in this member's view only (every survivor keeps its own), and logs it once at INFO:
// a member that stopped or died is news, not an error of this one.
func (a *observerActor) onMembersLeft(msg membersLeft) {
	for _, addr := range msg.addrs {
		if addr == a.cfg.Node {
			continue
		}
		a.cfg.Logger.Info("cluster member left", "member", addr, "seen_by", a.cfg.Node)
		a.counter.Add(context.Background(), 1, metric.WithAttributes(attribute.String("kind", KindMember)))
		a.keep(Restart{Node: addr, Actor: "member", Kind: KindMember, Reason: "left the cluster topology (stopped, or unreachable)",
			Directive: "left", Count: 1, At: time.Now().UTC()})
	}
}

// keep numbers r in this member's view and keeps it, dropping the oldest record of r's
// member when that member already has cfg.Keep.
func (a *observerActor) keep(r Restart) Restart {
	if a.perNode[r.Node] >= a.cfg.Keep {
		for i := range a.ring {
			if a.ring[i].Node == r.Node {
				a.ring = append(a.ring[:i], a.ring[i+1:]...)
				break
			}
		}
		a.perNode[r.Node]--
	}
	a.viewSeq++
	r.Seq = a.viewSeq
	a.ring = append(a.ring, r)
	a.perNode[r.Node]++
	return r
}

// subscribe runs cfg.Subscribe on a goroutine (it is a cluster request), one at a time;
// a request arriving meanwhile runs once the current one ends.
func (a *observerActor) subscribe(ctx actor.Context) {
	if a.cfg.Subscribe == nil {
		return
	}
	if a.subscribing {
		a.again = true
		return
	}
	a.subscribing = true
	self, root, sub := ctx.Self(), ctx.ActorSystem().Root, a.cfg.Subscribe
	go func() { root.Send(self, subscribed{err: sub(self)}) }()
}

// Record converts r to the record published on the cluster's restarts topic.
func Record(r Restart) *messages.RestartRecord {
	return &messages.RestartRecord{Seq: r.NodeSeq, Node: r.Node, Actor: r.Actor, Kind: r.Kind, SessionId: r.SessionID,
		Reason: r.Reason, Directive: r.Directive, Count: int32(min(r.Count, math.MaxInt32)), AtUnixNano: r.At.UnixNano()}
}

func fromRecord(m *messages.RestartRecord) Restart {
	return Restart{NodeSeq: m.GetSeq(), Node: m.GetNode(), Actor: m.GetActor(), Kind: m.GetKind(), SessionID: m.GetSessionId(),
		Reason: m.GetReason(), Directive: m.GetDirective(), Count: int(m.GetCount()), At: time.Unix(0, m.GetAtUnixNano()).UTC()}
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
// the agent actors agent-orchestrator$n and agent-<sub_agent_id>$n, whose children are
// step-runner$n and tool-runner$n; summarizers/… and sandbox/… are the node's pools;
// mcp/… its MCP server connections.
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
		case last == "tool-runner":
			return KindToolRunner, sessionID
		case strings.HasPrefix(last, "agent-"):
			return KindAgent, sessionID
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
