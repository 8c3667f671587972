package topics_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/cluster/topics"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
)

func completed(id string, seq uint64) *messages.Event {
	return &messages.Event{SessionId: id, Seq: seq, Payload: &messages.Event_SessionCompleted{SessionCompleted: &messages.SessionCompleted{}}}
}

// A session's topic nobody subscribed to is not published to: no topic actor is
// activated for it, start to terminal event. A subscriber that subscribes mid-session
// receives every event published after its subscription was answered, in order, and the
// terminal event stops that topic actor as before, which Live then no longer counts.
func TestUnsubscribedSessionTopicActivatesNothing(t *testing.T) {
	live := topics.NewLive()
	n := startMember(t, topics.Kind(live, slog.New(slog.DiscardHandler)))
	c := n.Cluster()
	if !n.Places(cluster.TopicActorKind, topics.Session("quiet")) {
		t.Fatal("a single member does not place a topic on itself")
	}
	p := topics.NewPublisher(c, topics.Options{NoSubscriber: live.NoSubscriber(n.Places)})
	defer p.Close()
	topicKind := c.GetClusterKind(cluster.TopicActorKind)

	const half, count = 100, 200
	for seq := uint64(1); seq <= half; seq++ {
		p.Event(event("quiet", seq))
		p.Event(event("watched", seq))
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return p.Skipped() == 2*half }, "the first half skipped (skipped %d)", p.Skipped())
	if k := topicKind.Count(); k != 0 || live.Len() != 0 {
		t.Fatalf("%d topic actors activated (%d live) for topics nobody subscribed to", k, live.Len())
	}

	col := &collector{}
	pid := n.System().Root.Spawn(actor.PropsFromFunc(col.receive))
	if _, err := c.SubscribeByPid(topics.Session("watched"), pid, cluster.WithTimeout(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if !live.Running(topics.Session("watched")) {
		t.Fatal("the subscribed topic's actor is not counted as running")
	}
	for seq := uint64(half + 1); seq < count; seq++ {
		p.Event(event("quiet", seq))
		p.Event(event("watched", seq))
	}
	p.Event(completed("quiet", count))
	p.Event(completed("watched", count))
	testenv.Eventually(t, 10*time.Second, func() bool { return len(col.snapshot()) >= count-half }, "the second half of session watched")
	got := col.snapshot()
	if len(got) != count-half {
		t.Fatalf("received %d messages, want %d", len(got), count-half)
	}
	for i, m := range got {
		if ev := m.(*messages.Event); ev.GetSessionId() != "watched" || ev.GetSeq() != uint64(half+1+i) {
			t.Fatalf("message %d is session %q seq %d, want session watched seq %d", i, ev.GetSessionId(), ev.GetSeq(), half+1+i)
		}
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return live.Len() == 0 && topicKind.Count() == 0 },
		"the finished session's topic actor to stop (%d live, %d activated)", live.Len(), topicKind.Count())
	if s := p.Skipped(); s != 2*half+count-half {
		t.Fatalf("skipped %d messages, want %d (session quiet's every event and watched's before its subscription)", s, 2*half+count-half)
	}
	if d, f, pub := p.Dropped(), p.Failed(), p.Published(); d != 0 || f != 0 || pub != count-half {
		t.Fatalf("dropped %d, failed %d, published %d (want 0, 0, %d)", d, f, pub, count-half)
	}
}

// A topic placed on another member is published to as ever, whether or not an actor of
// it runs on this one: only the member it is placed on knows its subscribers.
func TestNoSubscriberOnlyForTopicsPlacedHere(t *testing.T) {
	live := topics.NewLive()
	elsewhere := live.NoSubscriber(func(kind, identity string) bool { return false })
	here := live.NoSubscriber(func(kind, identity string) bool { return kind == cluster.TopicActorKind })
	if elsewhere(topics.Session("a")) {
		t.Fatal("a topic placed on another member reported without subscriber")
	}
	if !here(topics.Session("a")) {
		t.Fatal("a session topic placed here with no actor running reported as subscribed")
	}
	if here(topics.Restarts) {
		t.Fatal("the restarts topic reported without subscriber: only session topics are skipped")
	}
}
