//go:build !race

// Two members in one process trip data races inside Proto.Actor's remoting, so this test
// is excluded from -race runs; `make test` runs it in its second, non-race pass.

package topics_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/observer"
	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/cluster/topics"
	"github.com/fathom-agents/fathom/internal/testenv"
)

// crashingRunner panics on every string, like a step runner that crashes.
type crashingRunner struct{}

func (crashingRunner) Receive(ctx actor.Context) {
	if s, ok := ctx.Message().(string); ok {
		panic("boom: " + s)
	}
}

// grainShaped spawns a crashing child named like a grain's step runner.
type grainShaped struct{ child *actor.PID }

func (g *grainShaped) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		g.child = ctx.SpawnPrefix(actor.PropsFromProducer(func() actor.Actor { return crashingRunner{} }), "step-runner")
	case string:
		ctx.Send(g.child, m)
	}
}

// member is a Consul member with an observer wired to the restarts topic as a node wires it.
func member(t *testing.T, cfg fcluster.Config) (*fcluster.Node, *observer.Observer) {
	t.Helper()
	n, err := fcluster.New(cfg, fcluster.NewActorSystem(cfg.Logger))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	p := topics.NewPublisher(n.Cluster(), topics.Options{})
	obs, err := observer.Spawn(n.System(), observer.Config{Node: n.Address(), Logger: cfg.Logger,
		OnRestart: func(r observer.Restart) { p.Restart(observer.Record(r)) },
		Subscribe: func(pid *actor.PID) error {
			_, err := n.Cluster().SubscribeByPid(topics.Restarts, pid, cluster.WithTimeout(5*time.Second))
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		obs.Stop()
		p.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = n.Stop(ctx)
	})
	return n, obs
}

// TestConsulRestartsReachEveryMember: a restart on one member is kept, with that member's
// address and numbering, by the observer of another member (the topic of restarts is
// hosted by one of them), and each member's own records keep their order.
func TestConsulRestartsReachEveryMember(t *testing.T) {
	cfg := fcluster.DefaultConfig()
	cfg.Name = fmt.Sprintf("fathom-topics-%d", time.Now().UnixNano())
	cfg.Provider, cfg.ConsulAddr = fcluster.ProviderConsul, testenv.ConsulAddr(t)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, _ := member(t, cfg)
	b, obsB := member(t, cfg)
	testenv.Eventually(t, 20*time.Second, func() bool {
		return len(a.MemberAddresses()) == 2 && len(b.MemberAddresses()) == 2
	}, "both members see two members (a %v, b %v)", a.MemberAddresses(), b.MemberAddresses())

	grain, err := a.System().Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &grainShaped{} }), "partition-activator/s-remote$1")
	if err != nil {
		t.Fatal(err)
	}
	var fromA []observer.Restart
	testenv.Eventually(t, 30*time.Second, func() bool {
		a.System().Root.Send(grain, "crash") // until b has subscribed and sees some
		recent, err := obsB.Recent(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		fromA = fromA[:0]
		for _, r := range recent {
			if r.Node == a.Address() {
				fromA = append(fromA, r)
			}
		}
		return len(fromA) >= 2
	}, "member b kept no restart of member a")
	r := fromA[0]
	if r.Kind != observer.KindStepRunner || r.SessionID != "s-remote" || r.Directive != "restart" || r.At.IsZero() || r.NodeSeq == 0 {
		t.Fatalf("b's record of a's restart: %+v", r)
	}
	for i := 1; i < len(fromA); i++ {
		if fromA[i].NodeSeq <= fromA[i-1].NodeSeq || fromA[i].Seq <= fromA[i-1].Seq {
			t.Fatalf("a's records out of order at b: %+v then %+v", fromA[i-1], fromA[i])
		}
	}
}

// TestMemberThatLeavesIsARecord: a member that leaves the cluster is a record of kind
// member, naming it, in the restarts feed of a member that stays.
func TestMemberThatLeavesIsARecord(t *testing.T) {
	cfg := fcluster.DefaultConfig()
	cfg.Name = fmt.Sprintf("fathom-left-%d", time.Now().UnixNano())
	cfg.Provider, cfg.ConsulAddr = fcluster.ProviderConsul, testenv.ConsulAddr(t)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, _ := member(t, cfg)
	b, obsB := member(t, cfg)
	testenv.Eventually(t, 20*time.Second, func() bool {
		return len(a.MemberAddresses()) == 2 && len(b.MemberAddresses()) == 2
	}, "both members see two members (a %v, b %v)", a.MemberAddresses(), b.MemberAddresses())
	gone := a.Address()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	var got []observer.Restart
	testenv.Eventually(t, 30*time.Second, func() bool {
		recent, err := obsB.Recent(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, r := range recent {
			if r.Kind == observer.KindMember {
				got = append(got, r)
			}
		}
		return len(got) > 0
	}, "member b kept no record of a leaving")
	if len(got) != 1 || got[0].Node != gone || got[0].Directive != "left" || got[0].At.IsZero() {
		t.Fatalf("b's member records: %+v, want one for %s", got, gone)
	}
}
