package node_test

import (
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/cluster/topics"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
)

// TestSessionTopicOnlyWhenSubscribed: a session nobody follows on the cluster's pub-sub
// activates no topic actor at any moment of its run (each used to hold one from its first
// event to its last). A session whose topic a Proto.Actor program subscribed to before
// starting it delivers every event to that subscriber, seq 1 to session_completed, the
// same events the live feed gives, and its topic actor stops after the terminal event.
func TestSessionTopicOnlyWhenSubscribed(t *testing.T) {
	script := mock.DemoScript()
	for i := range script.Rules {
		script.Rules[i].DelayMS = 20 // a run long enough for a topic actor to be seen
	}
	n := startLocalNode(t, mock.New(mock.Config{Script: script}).Handler(), "topics-e2e",
		node.Config{Session: session.DefaultConfig(), Logger: slog.New(slog.NewTextHandler(&testenv.Buffer{}, nil))})
	c := n.Cluster().Cluster()
	topicKind := c.GetClusterKind(cluster.TopicActorKind)
	// The node's observer subscribes to the restarts topic: the one topic actor there is.
	testenv.Eventually(t, 10*time.Second, func() bool { return topicKind.Count() == 1 }, "the restarts topic's actor")

	var most atomic.Int32
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			if k := topicKind.Count(); k > most.Load() {
				most.Store(k)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	quiet := runSession(t, n, "topic-quiet", "anything")
	close(stop)
	watch.Wait()
	if m := most.Load(); m != 1 {
		t.Fatalf("%d topic actors were active during a session nobody subscribed to (%d events), want only the restarts topic's", m, len(quiet))
	}
	// Operators see it on /metrics: every event of the session skipped, none published.
	testenv.Eventually(t, 10*time.Second, func() bool { return pubsubMessages(t, n, "skipped") == len(quiet) },
		"fathom_pubsub_messages_total{outcome=\"skipped\"} to count the %d events of the unfollowed session", len(quiet))
	if p := pubsubMessages(t, n, "published"); p != 0 {
		t.Fatalf("fathom_pubsub_messages_total{outcome=\"published\"} = %d with no subscriber", p)
	}

	var mu sync.Mutex
	var got []*messages.Event
	sub := n.Cluster().System().Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if ev, ok := ctx.Message().(*messages.Event); ok {
			mu.Lock()
			got = append(got, ev)
			mu.Unlock()
		}
	}))
	if _, err := c.SubscribeByPid(topics.Session("topic-watched"), sub, cluster.WithTimeout(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	fed := runSession(t, n, "topic-watched", "anything")
	testenv.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= len(fed)
	}, "the subscriber to receive the %d events of session topic-watched", len(fed))
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(fed) {
		t.Fatalf("the subscriber received %d events, the feed %d", len(got), len(fed))
	}
	for i, ev := range got {
		if ev.GetSeq() != uint64(i+1) || ev.Type() != fed[i].Type() {
			t.Fatalf("event %d: seq %d %s, want seq %d %s", i, ev.GetSeq(), ev.Type(), i+1, fed[i].Type())
		}
	}
	if got[len(got)-1].GetSessionCompleted() == nil {
		t.Fatalf("the last event is %s, want session_completed", got[len(got)-1].Type())
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return topicKind.Count() == 1 }, "the finished session's topic actor to stop")
	if p, s := pubsubMessages(t, n, "published"), pubsubMessages(t, n, "skipped"); p != len(fed) || s != len(quiet) {
		t.Fatalf("fathom_pubsub_messages_total: published %d, skipped %d; want %d and %d", p, s, len(fed), len(quiet))
	}
}

// pubsubMessages reads fathom_pubsub_messages_total{outcome} from n's /metrics.
func pubsubMessages(t *testing.T, n *node.Node, outcome string) int {
	t.Helper()
	rec := httptest.NewRecorder()
	n.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	m := regexp.MustCompile(`(?m)^fathom_pubsub_messages_total\{[^}]*outcome="` + outcome + `"[^}]*\} (\d+)$`).FindStringSubmatch(rec.Body.String())
	if m == nil {
		t.Fatalf("no fathom_pubsub_messages_total{outcome=%q} in /metrics:\n%s", outcome, rec.Body)
	}
	v, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return v
}
