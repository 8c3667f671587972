package protoactor_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	papersistence "github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fathom-agents/fathom/persistence/bolt"
	"github.com/fathom-agents/fathom/persistence/protoactor"
)

// counter sums Int64Value events and snapshots its total; a StringValue "get" asks for it.
type counter struct {
	papersistence.Mixin
	total int64
}

func (c *counter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *papersistence.RequestSnapshot:
		c.PersistSnapshot(wrapperspb.Int64(c.total))
	case *wrapperspb.Int64Value:
		if c.Recovering() {
			c.total = m.Value // a snapshot (the only Int64Value not from a command)
			return
		}
		c.total += m.Value
		c.PersistReceive(wrapperspb.Int32(int32(m.Value)))
	case *wrapperspb.Int32Value: // replayed event
		c.total += int64(m.Value)
	case *wrapperspb.StringValue:
		ctx.Respond(wrapperspb.Int64(c.total))
	}
}

func TestMixinStateSurvivesRestartInTheJournal(t *testing.T) {
	j, err := bolt.Open(filepath.Join(t.TempDir(), "j.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	provider := protoactor.NewProvider(j, 3)
	props := actor.PropsFromProducer(func() actor.Actor { return &counter{} }, actor.WithReceiverMiddleware(papersistence.Using(provider)))

	system := actor.NewActorSystem()
	pid, err := system.Root.SpawnNamed(props, "counter-1")
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 7; i++ {
		system.Root.Send(pid, wrapperspb.Int64(i))
	}
	if got := total(t, system, pid); got != 28 {
		t.Fatalf("total = %d, want 28", got)
	}
	if err := system.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	system.Shutdown()

	system2 := actor.NewActorSystem()
	defer system2.Shutdown()
	pid2, err := system2.Root.SpawnNamed(props, "counter-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := total(t, system2, pid2); got != 28 {
		t.Fatalf("after restart total = %d, want 28", got)
	}
	streams, err := j.ListStreams(t.Context(), protoactor.StreamPrefix)
	if err != nil || len(streams) != 1 || streams[0].LastSeq != 7 {
		t.Fatalf("journal streams %+v %v", streams, err)
	}
}

func total(t *testing.T, s *actor.ActorSystem, pid *actor.PID) int64 {
	t.Helper()
	res, err := s.Root.RequestFuture(pid, wrapperspb.String("get"), 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	return res.(*wrapperspb.Int64Value).Value
}
