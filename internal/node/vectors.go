package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/messages"
)

// vectorDropperName is the name, under the root of every member, of the actor that
// removes a deleted session's vectors on that member (messages.DropVectorsRequest).
const vectorDropperName = "vector-dropper"

// dropTimeout bounds one member's drop when the caller's context has no deadline, and
// every drop a member serves: its embedding queue is bounded, so is the wait.
const dropTimeout = 30 * time.Second

// startVectorDropper spawns the member's vector dropper: it serves the
// DropVectorsRequests that deletes on any member send to every member (dropVectors).
// Requests are served one at a time; each waits for this member's embedding jobs queued
// before it, so it blocks the dropper, not the member's sessions.
func (n *Node) startVectorDropper(system *actor.ActorSystem) error {
	props := actor.PropsFromFunc(func(c actor.Context) {
		req, ok := c.Message().(*messages.DropVectorsRequest)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		defer cancel()
		res := &messages.DropVectorsResponse{}
		if err := n.dropLocalVectors(ctx, req.GetStreamId()); err != nil {
			res.Error = err.Error()
		}
		if c.Sender() != nil {
			c.Respond(res)
		}
	})
	pid, err := system.Root.SpawnNamed(props, vectorDropperName)
	if err != nil {
		return fmt.Errorf("spawn the vector dropper: %w", err)
	}
	n.dropper = pid
	return nil
}

// stopVectorDropper stops the dropper, after the drop it is serving, before the
// embedding worker and the vector store close.
func (n *Node) stopVectorDropper() {
	if n.dropper == nil || n.member == nil {
		return
	}
	_ = n.member.System().Root.StopFuture(n.dropper).Wait()
	n.dropper = nil
}

// dropLocalVectors removes stream's vectors from this member's vector store, after this
// member's embedding jobs queued for it (which would otherwise put them back).
func (n *Node) dropLocalVectors(ctx context.Context, stream string) error {
	switch {
	case n.embed != nil:
		return n.embed.DropStream(ctx, stream)
	case n.vectors != nil:
		return n.vectors.DeleteStream(ctx, stream)
	}
	return nil
}

// dropVectors removes stream's vectors on every member this node sees, itself included,
// and waits for each: a member may hold embedding jobs queued for the session (its
// owner, or a former owner), and with the in-process vector store the vectors
// themselves. It fails, naming the members, if any member did not confirm the drop: the
// delete is then refused before the journal is touched, and can be repeated.
func (n *Node) dropVectors(ctx context.Context, stream string) error {
	if err := n.dropLocalVectors(ctx, stream); err != nil {
		return err
	}
	if n.member == nil {
		return nil
	}
	timeout := dropTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	self := n.member.Address()
	root := n.member.System().Root
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, addr := range n.member.MemberAddresses() {
		if addr == self {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := askDrop(root, addr, stream, timeout)
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("member %s: %w", addr, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// askDrop sends one member's dropper a DropVectorsRequest and waits for its answer.
func askDrop(root *actor.RootContext, addr, stream string, timeout time.Duration) error {
	res, err := root.RequestFuture(actor.NewPID(addr, vectorDropperName), &messages.DropVectorsRequest{StreamId: stream}, timeout).Result()
	if err != nil {
		return err
	}
	switch r := res.(type) {
	case *messages.DropVectorsResponse:
		if r.GetError() != "" {
			return errors.New(r.GetError())
		}
		return nil
	default:
		return fmt.Errorf("unexpected answer %T", res)
	}
}
