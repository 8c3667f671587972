// Package topics owns what Fathom publishes on Proto.Actor's cluster pub-sub, so that a
// process that joined the cluster follows sessions and supervision without polling:
//
//   - Session(id), "fathom.session.{id}": every durable event of session id, in seq order,
//     as *messages.Event, published by the member whose grain stored it.
//   - Restarts, "fathom.restarts": every supervision event of every member, as
//     *messages.RestartRecord, published by each member's observer.
//
// Publishing is a live view, never the record: the journal is. A Publisher never blocks
// the grain or the observer that hands it a message; when its bounded queue is full it drops
// the message and counts it (Dropped). A subscriber therefore checks that seq is contiguous
// and, on a gap, reads what it missed from the grain (Timeline, or GetState for the whole
// state). Subscriptions live in the topic actor, which Proto.Actor places on one member by
// identity hashing: when that member leaves, the topic's subscribers must subscribe again
// (on a *cluster.ClusterTopology event) and catch up by seq. A session's topic actor stops
// once the session's terminal event (completed, failed, cancelled) is delivered, so a
// finished session leaves nothing behind; a subscriber that wants later turns subscribes
// again. A topic nobody subscribed to costs nothing: with Options.NoSubscriber (the node
// sets it from Live, which Kind keeps), the publisher skips a session's topic whose actor
// would be placed on this member when none runs here, since only a subscription could
// have started one. A subscriber subscribes first, then reads what it missed.
//
// Subscribing, from any process that joined the cluster:
//
//	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
//		if ev, ok := ctx.Message().(*messages.Event); ok { ... }
//	}))
//	_, err := c.SubscribeByPid(topics.Session(id), pid)
package topics

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/messages"
)

// Restarts is the topic of every member's supervision events (*messages.RestartRecord).
const Restarts = "fathom.restarts"

// SessionPrefix starts the name of every session's topic.
const SessionPrefix = "fathom.session."

// Session is the topic of session id's durable events (*messages.Event).
func Session(id string) string { return SessionPrefix + id }

// Defaults of Options.
const (
	DefaultQueue   = 4096
	DefaultBatch   = 256
	DefaultTimeout = 5 * time.Second
)

// Options configures a Publisher. Zero values take the defaults.
type Options struct {
	// Queue bounds the messages waiting to be published (default DefaultQueue); past it,
	// messages are dropped and counted.
	Queue int
	// Batch bounds the messages published in one call (default DefaultBatch).
	Batch int
	// Timeout bounds one publish call, and Close's publishing of what is still queued
	// (default DefaultTimeout).
	Timeout time.Duration
	// Logger receives publish failures (default slog.Default()).
	Logger *slog.Logger
	// NoSubscriber, when set, reports that topic has no subscriber for certain: its
	// messages are then not published (Skipped counts them), so that no topic actor is
	// activated only to deliver them to nobody. The node's reports it for a session's
	// topic placed on this member with no topic actor running here (Live). Called from
	// the publisher's goroutine only.
	NoSubscriber func(topic string) bool
}

// Publisher publishes sessions' events and members' restarts from one goroutine, in the
// order they were handed to it, batching consecutive messages of one topic.
type Publisher struct {
	c         *cluster.Cluster
	opts      Options
	q         chan item
	stop      chan struct{}
	done      chan struct{}
	once      sync.Once
	published atomic.Uint64
	dropped   atomic.Uint64
	failed    atomic.Uint64
	skipped   atomic.Uint64
	// drainBy is when Close gives up on what is still queued (unix ns; 0 until Close).
	drainBy atomic.Int64
	// drainFailed: a publish failed after Close; the rest is counted as failed without
	// trying (only the loop's goroutine uses it).
	drainFailed bool
}

type item struct {
	topic string
	msg   proto.Message
	// last: the topic ends after this message (a session's terminal event).
	last bool
}

// NewPublisher starts a publisher on c. Close stops it.
func NewPublisher(c *cluster.Cluster, opts Options) *Publisher {
	if opts.Queue <= 0 {
		opts.Queue = DefaultQueue
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultBatch
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	p := &Publisher{c: c, opts: opts, q: make(chan item, opts.Queue), stop: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return p
}

// Event publishes a stored event on its session's topic. It never blocks. It implements
// the session grain's EventObserver.
func (p *Publisher) Event(ev *messages.Event) {
	p.offer(item{topic: Session(ev.GetSessionId()), msg: ev, last: terminal(ev)})
}

// Restart publishes a supervision event on Restarts. It never blocks.
func (p *Publisher) Restart(r *messages.RestartRecord) { p.offer(item{topic: Restarts, msg: r}) }

// Published is how many messages a publish call delivered to their topic.
func (p *Publisher) Published() uint64 { return p.published.Load() }

// Dropped is how many messages were dropped because the queue was full or the publisher
// closed.
func (p *Publisher) Dropped() uint64 { return p.dropped.Load() }

// Failed is how many messages a publish call failed to deliver to their topic.
func (p *Publisher) Failed() uint64 { return p.failed.Load() }

// Skipped is how many messages were not published because their topic had no subscriber
// (Options.NoSubscriber).
func (p *Publisher) Skipped() uint64 { return p.skipped.Load() }

// Close publishes what is queued and stops, within Options.Timeout in all: what is not
// published by then, or after a publish failed (a leaving member's topics have no
// placement any more), is counted as failed. It is idempotent; messages handed over
// afterwards are dropped.
func (p *Publisher) Close() {
	p.once.Do(func() {
		p.drainBy.Store(time.Now().Add(p.opts.Timeout).UnixNano())
		close(p.stop)
	})
	<-p.done
}

func (p *Publisher) offer(it item) {
	select {
	case <-p.stop:
		p.dropped.Add(1)
		return
	default:
	}
	select {
	case p.q <- it:
	default:
		p.dropped.Add(1)
	}
}

func terminal(ev *messages.Event) bool {
	return ev.GetSessionCompleted() != nil || ev.GetSessionFailed() != nil || ev.GetSessionCancelled() != nil
}

func (p *Publisher) loop() {
	defer close(p.done)
	batch := make([]item, 0, p.opts.Batch)
	for {
		select {
		case it := <-p.q:
			batch = append(batch[:0], it)
		case <-p.stop:
			for {
				select {
				case it := <-p.q:
					p.publish([]item{it})
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < p.opts.Batch {
			select {
			case it := <-p.q:
				batch = append(batch, it)
			default:
				break fill
			}
		}
		p.publishGrouped(batch)
	}
}

// publishGrouped publishes runs of consecutive messages of one topic as one batch each,
// keeping the order within every topic.
func (p *Publisher) publishGrouped(batch []item) {
	for start := 0; start < len(batch); {
		end := start + 1
		for end < len(batch) && batch[end].topic == batch[start].topic && !batch[end-1].last {
			end++
		}
		p.publish(batch[start:end])
		start = end
	}
}

// publish sends items (all of one topic) as one PubSubBatch; when the last one ends the
// topic, the topic actor is stopped once they are delivered.
func (p *Publisher) publish(items []item) {
	topic := items[0].topic
	if p.opts.NoSubscriber != nil && p.opts.NoSubscriber(topic) {
		p.skipped.Add(uint64(len(items)))
		return
	}
	b := &cluster.PubSubBatch{Envelopes: make([]proto.Message, len(items))}
	for i, it := range items {
		b.Envelopes[i] = it.msg
	}
	timeout := p.opts.Timeout
	if by := p.drainBy.Load(); by != 0 {
		timeout = min(timeout, time.Until(time.Unix(0, by)))
		if p.drainFailed || timeout <= 0 {
			p.failed.Add(uint64(len(items)))
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := p.c.Publisher().PublishBatch(ctx, topic, b, cluster.WithTimeout(timeout)); err != nil {
		p.failed.Add(uint64(len(items)))
		p.drainFailed = p.drainBy.Load() != 0
		p.opts.Logger.Debug("pub-sub publish failed", "topic", topic, "messages", len(items), "error", err)
		return
	}
	p.published.Add(uint64(len(items)))
	if items[len(items)-1].last {
		if pid := p.c.Get(topic, cluster.TopicActorKind); pid != nil {
			p.c.ActorSystem.Root.Poison(pid)
		}
	}
}
