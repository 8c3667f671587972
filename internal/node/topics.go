package node

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/observer"
	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/cluster/topics"
	"github.com/fathom-agents/fathom/internal/metrics"
)

// subscribeTimeout bounds the observer's subscription to the restarts topic.
const subscribeTimeout = 5 * time.Second

// eventObservers is the grains' observer of the node's metrics and, once the member has
// joined, of the sessions' pub-sub topics: every stored event is counted and published
// on its session's topic.
type eventObservers struct {
	metrics *metrics.Recorder
	topics  atomic.Pointer[topics.Publisher]
}

// Committed implements session.Observer.
func (o *eventObservers) Committed(c session.Commit) {
	tenant := c.State.GetTenant()
	p := o.topics.Load()
	for _, ev := range c.Events {
		if o.metrics != nil {
			o.metrics.TenantEvent(tenant, ev)
		}
		if p != nil {
			p.Event(ev)
		}
	}
}

// startTopics starts the node's pub-sub publisher on the joined member: session events
// from now on go to their topics, and the observer's options publish this node's restarts
// and subscribe to everyone's.
func (n *Node) startTopics() observer.Config {
	c := n.member.Cluster()
	n.topics = topics.NewPublisher(c, topics.Options{Logger: n.log.With("component", "topics"),
		NoSubscriber: n.liveTopics.NoSubscriber(n.member.Places)})
	n.events.topics.Store(n.topics)
	return observer.Config{
		OnRestart: func(r observer.Restart) { n.topics.Restart(observer.Record(r)) },
		Subscribe: func(pid *actor.PID) error {
			_, err := c.SubscribeByPid(topics.Restarts, pid, cluster.WithTimeout(subscribeTimeout))
			return err
		},
	}
}

// stopTopics publishes what is queued and stops the publisher; later events are dropped
// by the publisher itself, and counted (Publisher.Dropped, on /metrics).
func (n *Node) stopTopics() {
	if n.topics != nil {
		n.topics.Close()
	}
}
