package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence/artifact"
)

// dropperName is the name, under the root of every member, of the actor that removes a
// deleted session's data kept on that member (messages.DropSessionDataRequest).
const dropperName = "session-data-dropper"

// dropTimeout bounds one member's drop when the caller's context has no deadline, and
// every drop a member serves: its embedding queue is bounded, so is the wait.
const dropTimeout = 30 * time.Second

// startDropper spawns the member's session-data dropper: it serves the
// DropSessionDataRequests that deletes on any member send to every member
// (dropSessionData). Requests are served one at a time; each waits for this member's
// embedding jobs queued before it, so it blocks the dropper, not the member's sessions.
func (n *Node) startDropper(system *actor.ActorSystem) error {
	props := actor.PropsFromFunc(func(c actor.Context) {
		req, ok := c.Message().(*messages.DropSessionDataRequest)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		defer cancel()
		res := &messages.DropSessionDataResponse{}
		tenant := req.GetTenant()
		if tenant == "" { // a member of the version before tenant-keyed stores
			tenant = auth.DefaultTenant
		}
		if err := n.dropLocalData(ctx, req.GetSessionId(), tenant); err != nil {
			res.Error = err.Error()
		}
		if c.Sender() != nil {
			c.Respond(res)
		}
	})
	pid, err := system.Root.SpawnNamed(props, dropperName)
	if err != nil {
		return fmt.Errorf("spawn the session-data dropper: %w", err)
	}
	n.dropper = pid
	return nil
}

// stopDropper stops the dropper, after the drop it is serving, before the embedding
// worker and the stores close.
func (n *Node) stopDropper() {
	if n.dropper == nil || n.member == nil {
		return
	}
	_ = n.member.System().Root.StopFuture(n.dropper).Wait()
	n.dropper = nil
}

// dropLocalData removes session id's artifacts from this member's artifact store and
// its vectors from this member's vector store, the latter after this member's embedding
// jobs queued for the session (which would otherwise put them back). Both are kept under
// the session's tenant (and, from before tenancy, without one: the stores delete those
// too).
func (n *Node) dropLocalData(ctx context.Context, id, tenant string) error {
	if n.artifacts != nil {
		infos, err := n.artifacts.List(ctx, tenant, id, "")
		if err != nil {
			return fmt.Errorf("list its artifacts: %w", err)
		}
		for _, a := range infos {
			if err := n.artifacts.Delete(ctx, tenant, a.Path); err != nil && !errors.Is(err, artifact.ErrNotFound) {
				return fmt.Errorf("artifact %s: %w", a.Path, err)
			}
		}
	}
	var err error
	switch {
	case n.embed != nil:
		err = n.embed.DropStream(ctx, tenant, id)
	case n.vectors != nil:
		err = n.vectors.DeleteStream(ctx, tenant, id)
	}
	if err != nil {
		return fmt.Errorf("its vectors: %w", err)
	}
	return nil
}

// dropSessionData removes session id's artifacts and vectors on every member this node
// sees, itself included, and waits for each. Any member may hold some: its owner or a
// former owner may have embedding jobs queued for the session, and with the in-process
// vector store or a data-dir artifact store (each member's own) the data itself. With
// shared stores (pgvector, S3) the members' deletes overlap, which is harmless. It fails,
// naming the members, if any member did not confirm: the delete is then refused before
// the journal is touched, and can be repeated.
func (n *Node) dropSessionData(ctx context.Context, id, tenant string) error {
	if err := n.dropLocalData(ctx, id, tenant); err != nil {
		return err
	}
	if n.member == nil {
		return nil
	}
	timeout := dropTimeout
	if d, ok := ctx.Deadline(); ok {
		// A future with a negative timeout would wait forever: never ask without time left.
		if timeout = time.Until(d); timeout <= 0 {
			return fmt.Errorf("ask the other members: %w", context.DeadlineExceeded)
		}
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
			if err := askDrop(root, addr, id, tenant, timeout); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("member %s: %w", addr, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// askDrop sends one member's dropper a DropSessionDataRequest and waits for its answer.
func askDrop(root *actor.RootContext, addr, id, tenant string, timeout time.Duration) error {
	res, err := root.RequestFuture(actor.NewPID(addr, dropperName), &messages.DropSessionDataRequest{SessionId: id, Tenant: tenant}, timeout).Result()
	if err != nil {
		return err
	}
	r, ok := res.(*messages.DropSessionDataResponse)
	if !ok {
		return fmt.Errorf("unexpected answer %T", res)
	}
	if r.GetError() != "" {
		return errors.New(r.GetError())
	}
	return nil
}
