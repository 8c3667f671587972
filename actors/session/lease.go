package session

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/persistence"
)

// The lease. While a session is not terminal, the activation that hosts it renews the
// session's lease in the session index (persistence.SessionIndex) every LeaseTTL/3, and
// every append renews it too; a passivating or stopping activation releases it. A node's
// reactivator (actors/reactivator) activates the sessions whose due time passed and
// whose lease lapsed: the ones whose activation died with its node. The lease is only a
// liveness hint: two activations may both believe they hold it for a moment, and the
// journal's expected sequence stays the one guard against two writers.

// Messages of the lease. They never leave the process.
type (
	// leaseTickMsg fires when the lease is due for renewal.
	leaseTickMsg struct{}
	// leaseDone reports a renewal.
	leaseDone struct{ err error }
)

// lease is a grain's side of its session's lease.
type lease struct {
	ix    persistence.SessionIndex // nil: leases are off
	owner string                   // this member's address
	timer *time.Timer
	// inflight is closed when the renewal in flight returns (nil: none).
	inflight chan struct{}
}

// startLease renews the lease at once and then every LeaseTTL/3.
func (g *Grain) startLease(ctx cluster.GrainContext) {
	if g.deps.Config.LeaseTTL <= 0 {
		return
	}
	g.lease.ix, g.lease.owner = g.deps.Journal, ctx.ActorSystem().Address()
	g.renewLease(ctx)
}

// onLeaseTick renews the lease unless the session ended (a terminal session needs no
// owner: its lease lapses, or Terminate releases it), and has no webhook notification
// pending.
func (g *Grain) onLeaseTick(ctx cluster.GrainContext) {
	if g.fenced || (g.state != nil && core.Terminal(g.state) && len(g.state.GetWebhooks()) == 0) {
		return
	}
	g.renewLease(ctx)
}

// renewLease starts one renewal off the mailbox, bounded by a third of the TTL (a
// renewal that takes longer is late anyway); its outcome comes back as leaseDone.
func (g *Grain) renewLease(ctx cluster.GrainContext) {
	if g.lease.ix == nil || g.lease.inflight != nil {
		return
	}
	done := make(chan struct{})
	g.lease.inflight = done
	ix, id, owner, ttl := g.lease.ix, g.id, g.lease.owner, g.deps.Config.LeaseTTL
	timeout := min(max(ttl/3, 10*time.Millisecond), g.deps.Config.JournalTimeout)
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		defer close(done)
		rctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := ix.RenewLease(rctx, id, owner, ttl)
		cancel()
		root.Send(self, &leaseDone{err: err})
	}()
}

func (g *Grain) onLeaseDone(ctx cluster.GrainContext, msg *leaseDone) {
	g.lease.inflight = nil
	if msg.err != nil {
		g.log.Warn("renew session lease failed; trying again", "error", msg.err)
	}
	if g.fenced {
		return
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	g.lease.timer = resetTimer(g.lease.timer, g.deps.Config.LeaseTTL/3, func() { root.Send(self, &leaseTickMsg{}) })
}

// endLease stops renewing and releases the lease (the activation is ending), so another
// member may take the session over at once instead of after the TTL.
func (g *Grain) endLease() {
	if g.lease.ix == nil {
		return
	}
	if g.lease.timer != nil {
		g.lease.timer.Stop()
	}
	if g.lease.inflight != nil {
		<-g.lease.inflight // bounded by the renewal's own timeout
		g.lease.inflight = nil
	}
	rctx, cancel := context.WithTimeout(context.Background(), min(2*time.Second, g.deps.Config.JournalTimeout))
	defer cancel()
	if err := g.lease.ix.ReleaseLease(rctx, g.id, g.lease.owner); err != nil {
		g.log.Warn("release session lease failed; it lapses after its TTL", "error", err)
	}
	g.lease.ix = nil
}
