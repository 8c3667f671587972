package node

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/reactivator"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
	"github.com/fathom-agents/fathom/persistence"
)

// reactivatorName is the name of the node's reactivator under the root.
const reactivatorName = "reactivator"

// startReactivator spawns the node's reactivator (actors/reactivator) when leases are
// on (the journal's session index is part of persistence.SessionStore): every leaseTTL/2 it activates, through
// normal placement, the sessions whose due time passed and whose lease lapsed. The poke
// is a state query: idempotent, and it never writes.
func (n *Node) startReactivator(system *actor.ActorSystem, leaseTTL time.Duration) error {
	if leaseTTL <= 0 {
		n.log.Info("no session reactivation", "reason", "--lease-ttl is 0")
		return nil
	}
	c := n.member.Cluster()
	cfg := reactivator.DefaultConfig()
	cfg.Index = n.journal
	cfg.Interval = leaseTTL / 2
	// A poke that hangs (its identity still hashes to a member that just died) holds up
	// its sweep: keep it short, a failed poke is simply retried by the next sweep.
	cfg.PokeTimeout = min(max(leaseTTL/4, time.Second), 5*time.Second)
	cfg.Logger = n.log.With("component", "reactivator")
	cfg.Poke = func(ctx context.Context, id string) error {
		timeout := cfg.PokeTimeout
		if d, ok := ctx.Deadline(); ok {
			timeout = time.Until(d)
		}
		_, err := sessiongrain.GetSessionGrainClient(c, id).GetState(&messages.GetStateRequest{}, cluster.WithTimeout(timeout))
		return err
	}
	pid, err := reactivator.Spawn(system.Root, reactivatorName, cfg)
	if err != nil {
		return err
	}
	n.reactivator = pid
	// A member joining or leaving moves sessions: the old owner stops their activations
	// (a leaving member all of its own, disthash the ones whose identity now hashes to a
	// new member) and releases their leases. Sweeping often for a while picks them up
	// at once instead of at the next regular sweep.
	//
	// A member that left without handing its sessions over (killed, its host lost) still
	// holds their leases until they lapse, one lease TTL after its last renewal. The
	// membership declared it gone, so its leases are broken at once and the hurried
	// sweeps find its sessions within a fraction of a second; the lease TTL stays the
	// bound only for a member that is alive but cut off (it is still a member).
	n.topologySub = system.EventStream.Subscribe(func(ev any) {
		t, ok := ev.(*cluster.ClusterTopology)
		if !ok || (len(t.Joined) == 0 && len(t.Left) == 0) {
			return
		}
		if len(t.Left) == 0 {
			reactivator.Hurry(system.Root, pid)
			return
		}
		left := make([]string, 0, len(t.Left))
		for _, m := range t.Left {
			left = append(left, m.Address())
		}
		n.takeovers.Go(func() { n.takeOver(n.journal, left, func() { reactivator.Hurry(system.Root, pid) }) }) // off the event stream: it writes to the index
	})
	return nil
}

// takeOverTimeout bounds the breaking of a departed member's leases.
const takeOverTimeout = 5 * time.Second

// takeOver breaks the leases the members at addrs (which left the cluster) still hold,
// then calls hurry so the reactivator sweeps at once. A failure is logged: the leases
// then lapse on their own.
func (n *Node) takeOver(ix persistence.SessionIndex, addrs []string, hurry func()) {
	defer hurry()
	ctx, cancel := context.WithTimeout(context.Background(), takeOverTimeout)
	defer cancel()
	for _, addr := range addrs {
		if addr == n.member.Address() {
			continue // this member leaving: its activations release their own leases
		}
		broke, err := ix.BreakLeases(ctx, addr)
		switch {
		case err != nil:
			n.log.Warn("cannot take over the sessions of a member that left; they move once its leases lapse", "member", addr, "error", err)
		case broke > 0:
			n.log.Info("taking over the sessions of a member that left", "member", addr, "sessions", broke)
			n.moves.note(addr, broke, time.Now())
		}
	}
}

// stopReactivator stops the reactivator and waits for its sweep in flight, before the
// journal it reads closes.
func (n *Node) stopReactivator() {
	n.reactivatorMu.Lock()
	defer n.reactivatorMu.Unlock()
	if n.reactivator == nil || n.member == nil {
		return
	}
	if n.topologySub != nil {
		n.member.System().EventStream.Unsubscribe(n.topologySub)
		n.topologySub = nil
	}
	n.takeovers.Wait()
	_ = n.member.Cluster().ActorSystem.Root.StopFuture(n.reactivator).Wait()
	n.reactivator = nil
}

// SessionIndex is the journal's session index.
func (n *Node) SessionIndex() persistence.SessionIndex { return n.journal }

// ListSessions implements gateway.SessionIndex over the journal's session index.
func (n *Node) ListSessions(ctx context.Context, q gateway.ListQuery) ([]gateway.SessionSummary, error) {
	return ListSessions(ctx, n.journal, q)
}

// ListSessions answers the gateway's session list q from the session index ix (a node's
// is its journal's; the gateway's tests pass an in-memory journal's).
func ListSessions(ctx context.Context, ix persistence.SessionIndex, q gateway.ListQuery) ([]gateway.SessionSummary, error) {
	pq := persistence.ListQuery{Status: q.Status, UserID: q.UserID, Since: q.Since, Until: q.Until, GoalContains: q.GoalContains, Limit: q.Limit,
		Tenant: q.Tenant, Owner: q.Owner, ForkedFrom: q.ForkedFrom}
	if q.AfterID != "" {
		pq.After = &persistence.ListPosition{CreatedAt: q.AfterCreated, SessionID: q.AfterID}
	}
	es, err := ix.ListSessions(ctx, pq)
	if err != nil {
		return nil, err
	}
	out := make([]gateway.SessionSummary, 0, len(es))
	now := time.Now()
	for _, e := range es {
		s := gateway.SessionSummary{SessionID: e.SessionID, Status: e.Status, Seq: e.Seq, UpdatedAt: e.UpdatedAt,
			UserID: e.UserID, Goal: e.Goal, CreatedAt: e.CreatedAt, CostUSD: e.CostUSD, Tenant: e.Tenant, Owner: e.Owner, ForkedFrom: e.ForkedFrom}
		if !e.DueAt.IsZero() {
			due := e.DueAt
			s.DueAt = &due
		}
		if e.LeaseOwner != "" && e.LeaseExpires.After(now) {
			s.LeaseOwner = e.LeaseOwner
		}
		out = append(out, s)
	}
	return out, nil
}
