package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/gateway"
)

// The drain of a member (fathom node drain, POST /v1/node/drain, and every graceful
// stop): the reactivator stops, the member's session grains start no call and let the
// running ones finish (session.Drain) for up to the drain timeout, then the member
// hands its sessions over (it withdraws from the membership and its grains stop at a
// boundary, releasing their leases) and the other members continue them from their
// journals. A tool call is thus never cut while it runs and run again elsewhere, unless
// it outlasts the drain timeout.

// handoverTimeout bounds the hand-over that ends a drain.
const handoverTimeout = 30 * time.Second

// stopReserve is what a graceful stop keeps of its deadline for the parts that stop after
// the drain (the member's leave, the sandbox pool, the journal).
const stopReserve = 5 * time.Second

// drainer is the node's side of the drain: one drain per node, run to its end once
// begun, by an owned goroutine that Stop waits for.
type drainer struct {
	// sessions is the session grains' drain (session.Deps.Drain).
	sessions *session.Drain
	// timeout is the drain timeout (session.Config.DrainTimeout).
	timeout time.Duration

	once sync.Once
	// done is closed when the drain ended; report and err are its outcome.
	done   chan struct{}
	report gateway.DrainReport
	err    error
}

// errNotStarted answers a drain of a node whose sessions never started.
var errNotStarted = errors.New("node: the session grains are not running")

// Drain drains the node: its sessions finish their running calls (up to the drain
// timeout) and move to the other members, and the member leaves the placement. It
// returns once the node drained, with what the drain did, or when ctx ends (the drain
// goes on; call again to wait for it). Every call after the first waits for the same
// drain. The node keeps running until Stop, but hosts no session any more.
func (n *Node) Drain(ctx context.Context) (gateway.DrainReport, error) {
	return n.drain(ctx, n.drainer.timeout)
}

// Draining reports whether the node began draining.
func (n *Node) Draining() bool {
	return n.drainer.sessions != nil && n.drainer.sessions.Draining()
}

// drain begins the drain (once), letting the running calls finish for at most limit,
// and waits for its end.
func (n *Node) drain(ctx context.Context, limit time.Duration) (gateway.DrainReport, error) {
	d := &n.drainer
	if d.sessions == nil || n.member == nil {
		return gateway.DrainReport{}, errNotStarted
	}
	d.once.Do(func() {
		d.done = make(chan struct{})
		go func() {
			defer close(d.done)
			d.report, d.err = n.runDrain(limit)
		}()
	})
	select {
	case <-d.done:
		return d.report, d.err
	case <-ctx.Done():
		return gateway.DrainReport{}, fmt.Errorf("wait for the drain: %w", ctx.Err())
	}
}

// runDrain is the drain itself (drain's goroutine).
func (n *Node) runDrain(limit time.Duration) (gateway.DrainReport, error) {
	d := &n.drainer
	began := time.Now()
	rep := gateway.DrainReport{Status: "drained", Node: n.member.Address(), StartedAt: began.UTC()}
	n.log.Info("draining: sessions start no call, finish the running ones, then move to the other members", "timeout", limit)
	n.stopReactivator() // it would activate sessions here again
	rep.Sessions = d.sessions.Begin(n.member.System().Root)
	wctx, cancel := context.WithTimeout(context.Background(), limit)
	err := d.sessions.Wait(wctx)
	cancel()
	if err != nil {
		rep.Cut = d.sessions.Busy()
		n.log.Warn("drain timeout: handing over sessions whose calls still run; the member continuing each runs those calls again",
			"timeout", limit, "sessions", rep.Cut)
	}
	hctx, cancel := context.WithTimeout(context.Background(), handoverTimeout)
	defer cancel()
	d.sessions.Leave()
	if err := n.member.Handover(hctx); err != nil {
		return rep, fmt.Errorf("drain: %w", err)
	}
	rep.TookMS = time.Since(began).Milliseconds()
	n.log.Info("drained: this member hosts no session; stop it", "sessions", rep.Sessions, "cut", len(rep.Cut), "took", time.Since(began).Round(time.Millisecond))
	return rep, nil
}

// drainForStop is the graceful stop's drain: the running calls get the drain timeout,
// but no more than ctx's deadline leaves after stopReserve. A member of the local
// provider hands over at once, as it did before drains: no other member would continue
// its sessions, and `fathom run` stops on Ctrl-C without waiting for a call.
func (n *Node) drainForStop(ctx context.Context) error {
	if n.cfg.Cluster.Provider != fcluster.ProviderConsul && !n.Draining() {
		n.leave()
		return n.member.Handover(ctx)
	}
	limit := n.drainer.timeout
	if dl, ok := ctx.Deadline(); ok {
		limit = max(min(limit, time.Until(dl)-stopReserve), 0)
	}
	_, err := n.drain(ctx, limit)
	if errors.Is(err, errNotStarted) {
		n.leave()
		return n.member.Handover(ctx)
	}
	return err
}

// leave tells the session grains that the member leaves: from now on a stopped grain
// stops at once (its calls already finished in the drain, or the stop is not graceful)
// instead of moving at a boundary as it does when a member joins (actors/session,
// move.go).
func (n *Node) leave() {
	if n.drainer.sessions != nil {
		n.drainer.sessions.Leave()
	}
}
