package observer_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fathom-agents/fathom/actors/observer"
	"github.com/fathom-agents/fathom/internal/testenv"
)

// crasher panics on every string message it gets.
type crasher struct{}

func (crasher) Receive(ctx actor.Context) {
	if s, ok := ctx.Message().(string); ok {
		panic("boom: " + s)
	}
}

// parent spawns a crashing child named like a grain's step runner and forwards strings to it.
type parent struct{ child *actor.PID }

func (p *parent) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.child = ctx.SpawnPrefix(actor.PropsFromProducer(func() actor.Actor { return crasher{} }), "step-runner")
	case string:
		ctx.Send(p.child, m)
	}
}

func TestSupervisionEventsAreLoggedCountedAndKept(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	var logs testenv.Buffer
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	var published []observer.Restart
	var mu sync.Mutex
	obs, err := observer.Spawn(system, observer.Config{
		Node: "127.0.0.1:7001", Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Meter: mp.Meter("test"), Keep: 2,
		OnRestart: func(r observer.Restart) { mu.Lock(); published = append(published, r); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Stop()
	// A grain-shaped tree: partition-activator/<session>$n/step-runner$m.
	grain, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &parent{} }), "partition-activator/s-abc$1")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"one", "two", "three"} {
		system.Root.Send(grain, m)
	}
	var recent []observer.Restart
	deadline := time.Now().Add(10 * time.Second)
	for {
		if recent, err = obs.Recent(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(recent) == 2 && recent[1].Count == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recent restarts = %+v, want the last 2 of 3", recent)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := recent[1]
	if r.Node != "127.0.0.1:7001" || r.Kind != observer.KindStepRunner || r.SessionID != "s-abc" ||
		r.Directive != "restart" || !strings.Contains(r.Reason, "boom: three") || !strings.HasPrefix(r.Actor, "partition-activator/s-abc$1/step-runner$") {
		t.Fatalf("restart record = %+v", r)
	}
	if recent[0].Count != 2 {
		t.Fatalf("the ring keeps the newest 2: %+v", recent)
	}
	for _, want := range []string{`"msg":"actor supervision event"`, `"kind":"step_runner"`, `"session_id":"s-abc"`, `"restart_count":3`, `boom: one`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if got := counterValue(rm, "fathom.actor.restarts", "step_runner"); got != 3 {
		t.Fatalf("fathom.actor.restarts{kind=step_runner} = %d, want 3", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(published) != 3 {
		t.Fatalf("OnRestart saw %d records, want 3", len(published))
	}
}

func counterValue(rm metricdata.ResourceMetrics, name, kind string) int64 {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range sum.DataPoints {
					if v, ok := dp.Attributes.Value("kind"); ok && v.AsString() == kind {
						return dp.Value
					}
				}
			}
		}
	}
	return -1
}

func TestClassify(t *testing.T) {
	for path, want := range map[string][2]string{
		"partition-activator/s-1$4":                                    {observer.KindSession, "s-1"},
		"partition-activator/s-1$4/step-runner$9":                      {observer.KindStepRunner, "s-1"},
		"partition-activator/s-1$4/tool-runner$2":                      {observer.KindToolRunner, "s-1"},
		"partition-activator/s-1$4/agent-orchestrator$2":               {observer.KindAgent, "s-1"},
		"partition-activator/s-1$4/agent-orchestrator$2/step-runner$7": {observer.KindStepRunner, "s-1"},
		"partition-activator/s-1$4/agent-sa-2$3":                       {observer.KindAgent, "s-1"},
		"partition-activator/s-1$4/agent-sa-2$3/step-runner$5":         {observer.KindStepRunner, "s-1"},
		"partition-activator/s-1$4/agent-sa-2$3/tool-runner$6":         {observer.KindToolRunner, "s-1"},
		"summarizers/$7": {observer.KindSummarizer, ""},
		"sandbox/conn-3": {observer.KindSandbox, ""},
		"mcp/orders":     {observer.KindMCP, ""},
		"gossip":         {observer.KindOther, ""},
		"partition-activator/s-1$4/something-else$1": {observer.KindOther, "s-1"},
	} {
		if k, s := observer.Classify(path); k != want[0] || s != want[1] {
			t.Errorf("Classify(%q) = %q, %q; want %q, %q", path, k, s, want[0], want[1])
		}
	}
}

func TestValidate(t *testing.T) {
	if err := (observer.Config{Keep: -1}).Validate(); err == nil {
		t.Fatal("negative Keep accepted")
	}
	if err := observer.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultKeepsTheIssuesThousand: each member keeps its last 1,000 restarts unless
// configured otherwise (the number GET /v1/restarts documents), and a zero Keep means
// that default.
func TestDefaultKeepsTheIssuesThousand(t *testing.T) {
	if k := observer.DefaultConfig().Keep; k != 1000 {
		t.Fatalf("DefaultConfig().Keep = %d, want 1000", k)
	}
	if err := (observer.Config{}).Validate(); err != nil {
		t.Fatalf("a zero Keep (the default) is refused: %v", err)
	}
}

// TestMemberThatLeftIsARecord: a topology in which a member left (a graceful leave or a
// kill: Proto.Actor publishes both as Left) is one record of kind member naming it,
// kept but not published (every survivor keeps its own), and one INFO line.
func TestMemberThatLeftIsARecord(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	var logs testenv.Buffer
	var published int
	var mu sync.Mutex
	obs, err := observer.Spawn(system, observer.Config{Node: "127.0.0.1:7001", Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		OnRestart: func(observer.Restart) { mu.Lock(); published++; mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Stop()
	system.EventStream.Publish(&cluster.ClusterTopology{Left: []*cluster.Member{{Host: "127.0.0.1", Port: 7002, Id: "m2"}}})
	var got []observer.Restart
	testenv.Eventually(t, 5*time.Second, func() bool {
		got, err = obs.Recent(context.Background())
		return err == nil && len(got) > 0
	}, "no record of the member that left")
	r := got[0]
	if len(got) != 1 || r.Kind != observer.KindMember || r.Node != "127.0.0.1:7002" || r.Directive != "left" {
		t.Fatalf("records %+v, want one of kind member for 127.0.0.1:7002", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if published != 0 {
		t.Errorf("the member record was published %d times", published)
	}
	if s := logs.String(); strings.Count(s, "\n") != 1 || !strings.Contains(s, `"level":"INFO","msg":"cluster member left"`) {
		t.Errorf("log: %s, want one INFO line", s)
	}
}
