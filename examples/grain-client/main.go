// Command grain-client is a service that joins a Fathom cluster through Consul, starts a
// session with the generated protobuf client, follows its events on the session's
// pub-sub topic (no polling) and answers its human input with -answer.
//
//	go run ./examples/grain-client -consul 127.0.0.1:8500 -goal "print copies" -answer '{"n":3}'
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/cluster/topics"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
)

func main() {
	cfg := fcluster.DefaultConfig()
	flag.StringVar(&cfg.ConsulAddr, "consul", cfg.ConsulAddr, "Consul agent address")
	flag.StringVar(&cfg.Name, "cluster", cfg.Name, "cluster name")
	id := flag.String("id", fmt.Sprintf("client-%d", time.Now().UnixNano()), "session id")
	goal := flag.String("goal", "Explain event sourcing", "the session's goal")
	answer := flag.String("answer", `"yes"`, "the answer (JSON) to every human input request")
	flag.Parse()
	cfg.Provider, cfg.Logger = fcluster.ProviderConsul, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(cfg, *id, *goal, *answer); err != nil {
		fmt.Fprintln(os.Stderr, "grain-client:", err)
		os.Exit(1)
	}
}

func run(cfg fcluster.Config, id, goal, answer string) error {
	member, err := fcluster.New(cfg, fcluster.NewActorSystem(cfg.Logger)) // hosts no kinds: a client
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // the whole run
	defer cancel()
	if err := member.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = member.Stop(context.Background()) }()
	c, root := member.Cluster(), member.System().Root

	events := make(chan *messages.Event, 1024)
	sub := root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if ev, ok := ctx.Message().(*messages.Event); ok {
			events <- ev
		}
	}))
	if _, err := c.SubscribeByPid(topics.Session(id), sub, cluster.WithTimeout(10*time.Second)); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	session := sessiongrain.GetSessionGrainClient(c, id)
	if _, err := session.Start(&messages.StartRequest{CommandId: "start", Goal: goal}, cluster.WithTimeout(10*time.Second)); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	for next := uint64(1); ; {
		select {
		case <-ctx.Done():
			return fmt.Errorf("session %s: %w", id, ctx.Err())
		case ev := <-events:
			if ev.GetSeq() != next { // a gap: the journal has it, the live topic does not
				return fmt.Errorf("event seq %d arrived, expected %d: read the gap with Timeline", ev.GetSeq(), next)
			}
			next++
			fmt.Printf("%d %s\n", ev.GetSeq(), ev.Type())
			switch {
			case ev.GetHitlRequested() != nil:
				h := ev.GetHitlRequested()
				if _, err := session.ProvideInput(&messages.ProvideInputRequest{CommandId: "answer-" + h.GetRequestId(),
					StepId: h.GetStepId(), RequestId: h.GetRequestId(), Input: answer}, cluster.WithTimeout(10*time.Second)); err != nil {
					return fmt.Errorf("answer %s: %w", h.GetRequestId(), err)
				}
			case ev.GetSessionCompleted() != nil:
				fmt.Println("result:", ev.GetSessionCompleted().GetResult())
				return nil
			case ev.GetSessionFailed() != nil:
				return fmt.Errorf("session failed: %s", ev.GetSessionFailed().GetError())
			}
		}
	}
}
