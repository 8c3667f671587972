package topics_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/cluster/topics"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
)

// startMember starts a member of the local provider hosting kinds (none: Proto.Actor
// registers its own topic kind).
func startMember(t *testing.T, kinds ...*cluster.Kind) *fcluster.Node {
	t.Helper()
	cfg := fcluster.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := fcluster.New(cfg, fcluster.NewActorSystem(cfg.Logger), kinds...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = n.Stop(ctx)
	})
	return n
}

// collector is a subscriber actor keeping what it receives.
type collector struct {
	mu   sync.Mutex
	msgs []any
}

func (c *collector) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.Event, *messages.RestartRecord:
		c.mu.Lock()
		c.msgs = append(c.msgs, m)
		c.mu.Unlock()
	}
}

func (c *collector) snapshot() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]any(nil), c.msgs...)
}

func event(id string, seq uint64) *messages.Event {
	return &messages.Event{SessionId: id, Seq: seq, Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "s1"}}}
}

// A subscriber of a session's topic receives its events in seq order, and only its own;
// the terminal event stops the topic actor once delivered.
func TestSessionEventsReachSubscribersInOrder(t *testing.T) {
	n := startMember(t)
	c := n.Cluster()
	col := &collector{}
	pid := n.System().Root.Spawn(actor.PropsFromFunc(col.receive))
	if _, err := c.SubscribeByPid(topics.Session("a"), pid, cluster.WithTimeout(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	p := topics.NewPublisher(c, topics.Options{})
	defer p.Close()
	const count = 500
	for seq := uint64(1); seq < count; seq++ {
		p.Event(event("a", seq))
		p.Event(event("b", seq)) // another session's topic: not delivered to the subscriber
	}
	topic := c.Get(topics.Session("a"), cluster.TopicActorKind)
	if topic == nil {
		t.Fatal("the session's topic actor is not active")
	}
	p.Event(&messages.Event{SessionId: "a", Seq: count, Payload: &messages.Event_SessionCompleted{SessionCompleted: &messages.SessionCompleted{}}})
	testenv.Eventually(t, 10*time.Second, func() bool { return len(col.snapshot()) >= count }, "every event of session a")
	got := col.snapshot()
	if len(got) != count {
		t.Fatalf("received %d messages, want %d", len(got), count)
	}
	for i, m := range got {
		ev := m.(*messages.Event)
		if ev.GetSessionId() != "a" || ev.GetSeq() != uint64(i+1) {
			t.Fatalf("message %d is session %q seq %d, want session a seq %d", i, ev.GetSessionId(), ev.GetSeq(), i+1)
		}
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, alive := n.System().ProcessRegistry.GetLocal(topic.Id)
		return !alive
	}, "the finished session's topic actor to stop")
	if d := p.Dropped(); d != 0 {
		t.Fatalf("dropped %d messages with room in the queue", d)
	}
}

// Restarts reach subscribers of the Restarts topic; after Close, messages are dropped
// and counted, never blocking the caller.
func TestRestartsAndCloseDrops(t *testing.T) {
	n := startMember(t)
	c := n.Cluster()
	col := &collector{}
	pid := n.System().Root.Spawn(actor.PropsFromFunc(col.receive))
	if _, err := c.SubscribeByPid(topics.Restarts, pid, cluster.WithTimeout(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	p := topics.NewPublisher(c, topics.Options{})
	p.Restart(&messages.RestartRecord{Seq: 1, Node: n.Address(), Actor: "x/y", Kind: "step_runner", Reason: "boom", Directive: "restart", Count: 1})
	testenv.Eventually(t, 10*time.Second, func() bool { return len(col.snapshot()) == 1 }, "the restart record")
	if r := col.snapshot()[0].(*messages.RestartRecord); r.GetReason() != "boom" || r.GetNode() != n.Address() {
		t.Fatalf("received %v", r)
	}
	p.Close()
	p.Close() // idempotent
	p.Restart(&messages.RestartRecord{Seq: 2})
	if d := p.Dropped(); d != 1 {
		t.Fatalf("Dropped() = %d after one message past Close, want 1", d)
	}
}

// Close is bounded in all, not per queued message: on a member that has handed its
// grains over (a graceful leave), every publish finds no placement, and the grain call
// retries that for a while. A node's stop used to wait that long for each of the events
// still queued (2 s each; a gateway test's node stop overran its 20 s).
func TestCloseOnALeavingMemberIsBounded(t *testing.T) {
	n := startMember(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := n.Handover(ctx); err != nil {
		t.Fatal(err)
	}
	const timeout, count = 2 * time.Second, 40
	p := topics.NewPublisher(n.Cluster(), topics.Options{Timeout: timeout})
	for i := range count {
		p.Event(event(fmt.Sprintf("s%d", i), 1)) // one topic each: one publish call each
	}
	began := time.Now()
	p.Close()
	if took := time.Since(began); took > 2*timeout {
		t.Fatalf("Close took %v with %d messages queued on a leaving member (timeout %v)", took, count, timeout)
	}
	if got := p.Failed() + p.Dropped(); got != count {
		t.Fatalf("failed %d + dropped %d, want every one of the %d messages counted", p.Failed(), p.Dropped(), count)
	}
}
