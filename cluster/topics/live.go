package topics

import (
	"log/slog"
	"strings"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
)

// Live records which topics have a topic actor running on this member. A topic actor
// holds a topic's subscriptions (Proto.Actor keeps them nowhere else: the topic kind's
// store is empty), and only a subscription or a publication activates one; so a topic
// placed on this member with no actor running here has no subscriber, and publishing to
// it would only activate an actor to deliver to nobody. Kind keeps a Live up to date;
// Options.NoSubscriber reads it. Safe for concurrent use.
type Live struct {
	mu sync.RWMutex
	// running counts the topic actors of each topic (more than one only for the moment a
	// stopping activation overlaps the next).
	running map[string]int
}

// NewLive returns an empty Live.
func NewLive() *Live { return &Live{running: map[string]int{}} }

// Running reports whether a topic actor of topic runs on this member.
func (l *Live) Running(topic string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.running[topic] > 0
}

// Len is the number of topics with a topic actor running on this member.
func (l *Live) Len() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.running)
}

// NoSubscriber is Options.NoSubscriber for a member that registered Kind(l): it reports
// a session's topic that places (the member's placement: fcluster.Node.Places) puts on
// this member and of which no topic actor runs here. Only a subscription could have
// started one, since the publisher does not for such a topic. Any other topic, or one
// placed on another member, is published as ever.
func (l *Live) NoSubscriber(places func(kind, identity string) bool) func(topic string) bool {
	return func(topic string) bool {
		return strings.HasPrefix(topic, SessionPrefix) && places(cluster.TopicActorKind, topic) && !l.Running(topic)
	}
}

func (l *Live) add(topic string, d int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.running[topic] + d; n > 0 {
		l.running[topic] = n
	} else {
		delete(l.running, topic)
	}
}

// Kind is Proto.Actor's topic kind (cluster.TopicActorKind) as the cluster would register
// it by default (cluster.NewTopicActor with no subscription store), whose actors also
// record in l that they run. Register it with the member's other kinds; logger receives
// the topic actors' logs.
func Kind(l *Live, logger *slog.Logger) *cluster.Kind {
	store := &cluster.EmptyKeyValueStore[*cluster.Subscribers]{}
	return cluster.NewKind(cluster.TopicActorKind, actor.PropsFromProducer(func() actor.Actor {
		return &liveTopic{TopicActor: cluster.NewTopicActor(store, logger), live: l}
	}))
}

// liveTopic is a topic actor that counts itself in live from its start to its stop.
type liveTopic struct {
	*cluster.TopicActor
	live  *Live
	topic string
}

// Receive implements actor.Actor. The count is raised before Proto.Actor's actor sees
// Started, so before it answers any subscription: an event published after a subscriber
// got its answer finds the topic running.
func (t *liveTopic) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started:
		t.topic = cluster.GetClusterIdentity(c).Identity
		t.live.add(t.topic, 1)
	case *actor.Restarting: // the next instance counts itself at its Started
		t.live.add(t.topic, -1)
	case *actor.Stopped:
		t.live.add(t.topic, -1)
	}
	t.TopicActor.Receive(c)
}
