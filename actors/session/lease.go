package session

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
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

// lease is an activation's side of its session's lease. It is one of the activation's
// commit observers: a commit that makes an ended session work again (a follow-up
// message) starts renewing again.
type lease struct {
	ix    persistence.SessionIndex // nil: leases are off
	id    string
	owner string // this member's address
	ttl   time.Duration
	// timeout bounds a journal call.
	timeout time.Duration
	log     *slog.Logger
	self    *actor.PID
	root    *actor.RootContext
	timer   *time.Timer
	// inflight is closed when the renewal in flight returns (nil: none).
	inflight chan struct{}
}

// start renews the lease of the activation ctx of session id at once and then every
// LeaseTTL/3 (nothing when leases are off).
func (l *lease) start(ctx cluster.GrainContext, d *Deps, id string, log *slog.Logger) {
	if d.Config.LeaseTTL <= 0 {
		return
	}
	*l = lease{ix: d.Journal, id: id, owner: ctx.ActorSystem().Address(), ttl: d.Config.LeaseTTL, timeout: d.Config.JournalTimeout,
		log: log, self: ctx.Self(), root: ctx.ActorSystem().Root}
	l.renew()
}

// heldError is an activation's loadErr while another member holds its session's lease
// (the activation that member hosts may still run the calls in flight, as a grain that
// moves does: move.go): the state is loaded but nothing runs and every command answers
// unavailable until the lease is released or lapses; ready then reloads the state and
// takes the lease.
type heldError struct{ holder string }

func (e *heldError) Error() string {
	return "member " + e.holder + " still hosts the session and finishes its running calls"
}

// heldElsewhere returns the member other than this one (address self) that holds the
// live lease of session id in state st, "" for none. Only a session that has not ended
// is asked for (a new or ended one runs nothing); with leases off, or when the index
// cannot be read, it returns "" (the journal's expected sequence stays the guard).
func heldElsewhere(d *Deps, id, self string, st *messages.SessionState) string {
	if d == nil || d.Config.LeaseTTL <= 0 || d.Journal == nil || st.GetSeq() == 0 || core.Terminal(st) {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.Config.JournalTimeout)
	defer cancel()
	h, err := d.Journal.LeaseHolder(ctx, id)
	if err != nil {
		d.Logger.Warn("read the session's lease; continuing", "session_id", id, "error", err)
		return ""
	}
	if h == self {
		return ""
	}
	return h
}

// tick renews the lease unless the session (in state st) ended (a terminal session needs
// no owner: its lease lapses, or end releases it), and has no webhook notification
// pending.
func (l *lease) tick(st *messages.SessionState) {
	if st != nil && core.Terminal(st) && len(st.GetWebhooks()) == 0 {
		return
	}
	l.renew()
}

// Committed implements Observer: a session that ended and works again (core.Terminal
// before the commit, not after: a follow-up message opened its next turn) is renewed
// again, since tick stopped renewing it.
func (l *lease) Committed(c Commit) {
	if core.Terminal(c.Prev) && !core.Terminal(c.State) {
		l.renew()
	}
}

// renew starts one renewal off the mailbox, bounded by a third of the TTL (a renewal
// that takes longer is late anyway); its outcome comes back as leaseDone.
func (l *lease) renew() {
	if l.ix == nil || l.inflight != nil {
		return
	}
	done := make(chan struct{})
	l.inflight = done
	ix, id, owner, ttl := l.ix, l.id, l.owner, l.ttl
	timeout := min(max(ttl/3, 10*time.Millisecond), l.timeout)
	self, root := l.self, l.root
	go func() {
		defer close(done)
		rctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := ix.RenewLease(rctx, id, owner, ttl)
		cancel()
		root.Send(self, &leaseDone{err: err})
	}()
}

// done handles a renewal's outcome: the next renewal is due in LeaseTTL/3, unless the
// activation is fenced.
func (l *lease) done(msg *leaseDone, fenced bool) {
	l.inflight = nil
	if msg.err != nil {
		l.log.Warn("renew session lease failed; trying again", "error", msg.err)
	}
	if fenced || l.ix == nil {
		return
	}
	self, root := l.self, l.root
	l.timer = resetTimer(l.timer, l.ttl/3, func() { root.Send(self, &leaseTickMsg{}) })
}

// end stops renewing and releases the lease (the activation is ending), so another
// member may take the session over at once instead of after the TTL.
func (l *lease) end() {
	if l.ix == nil {
		return
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.inflight != nil {
		<-l.inflight // bounded by the renewal's own timeout
		l.inflight = nil
	}
	rctx, cancel := context.WithTimeout(context.Background(), min(2*time.Second, l.timeout))
	defer cancel()
	if err := l.ix.ReleaseLease(rctx, l.id, l.owner); err != nil {
		l.log.Warn("release session lease failed; it lapses after its TTL", "error", err)
	}
	l.ix = nil
}
