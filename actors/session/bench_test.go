package session_test

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

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
// plain local actor, same process, no cluster.
func BenchmarkBaselineRequestFuture(b *testing.B) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &echo{resp: &messages.GetStateResponse{State: &messages.SessionState{SessionId: "bench"}}}
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
