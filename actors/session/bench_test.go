package session_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/messages"
)

// BenchmarkGrainGetState measures a request/response to a session grain through the
// cluster (identity lookup, PID cache, grain dispatch, protobuf), on one node.
// Compare with BenchmarkBaselineRequestFuture (BENCHMARKS.md).
func BenchmarkGrainGetState(b *testing.B) {
	h := startHarness(b, harnessOpts{})
	if _, err := h.start("bench", "c1", "benchmark goal"); err != nil {
		b.Fatal(err)
	}
	waitTerminal(b, h.j, "bench", 30*time.Second)
	client := h.node.Session("bench")
	req := &messages.GetStateRequest{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := client.GetState(req, cluster.WithTimeout(5*time.Second)); err != nil {
			b.Fatal(err)
		}
	}
}

// echo is a plain actor answering every request with the same response.
type echo struct{ resp *messages.GetStateResponse }

func (e *echo) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*messages.GetStateRequest); ok {
		ctx.Respond(e.resp)
	}
}

// BenchmarkBaselineRequestFuture is the floor: a bare Proto.Actor RequestFuture to a
// plain local actor, same process, no cluster, answering with a state of the same size
// as the grain's (a completed three-step demo session).
func BenchmarkBaselineRequestFuture(b *testing.B) {
	h := startHarness(b, harnessOpts{})
	if _, err := h.start("bench", "c1", "benchmark goal"); err != nil {
		b.Fatal(err)
	}
	waitTerminal(b, h.j, "bench", 30*time.Second)
	st, err := h.state("bench")
	if err != nil {
		b.Fatal(err)
	}
	system := fcluster.NewActorSystem(slog.New(slog.DiscardHandler))
	defer system.Shutdown()
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &echo{resp: st}
	}))
	req := &messages.GetStateRequest{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := system.Root.RequestFuture(pid, req, 5*time.Second).Result(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGrainDuplicateStart measures the grain round trip with small messages: a
// Start repeating an applied command id is answered from the remembered commands,
// without touching the journal. Compare with BenchmarkBaselineRequestFutureSmall.
func BenchmarkGrainDuplicateStart(b *testing.B) {
	h := startHarness(b, harnessOpts{})
	if _, err := h.start("bench", "c1", "benchmark goal"); err != nil {
		b.Fatal(err)
	}
	waitTerminal(b, h.j, "bench", 30*time.Second)
	client := h.node.Session("bench")
	req := &messages.StartRequest{CommandId: "c1", Goal: "benchmark goal"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := client.Start(req, cluster.WithTimeout(5*time.Second))
		if err != nil || !resp.GetDuplicate() {
			b.Fatalf("%v %v", resp, err)
		}
	}
}

// smallEcho answers a StartRequest with a StartResponse.
type smallEcho struct{}

func (smallEcho) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*messages.StartRequest); ok {
		ctx.Respond(&messages.StartResponse{SessionId: "bench", Seq: 9, Duplicate: true})
	}
}

// BenchmarkBaselineRequestFutureSmall is a bare RequestFuture to a plain local actor with
// the same small request and response as BenchmarkGrainDuplicateStart.
func BenchmarkBaselineRequestFutureSmall(b *testing.B) {
	system := fcluster.NewActorSystem(slog.New(slog.DiscardHandler))
	defer system.Shutdown()
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return smallEcho{} }))
	req := &messages.StartRequest{CommandId: "c1", Goal: "benchmark goal"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := system.Root.RequestFuture(pid, req, 5*time.Second).Result(); err != nil {
			b.Fatal(err)
		}
	}
}
