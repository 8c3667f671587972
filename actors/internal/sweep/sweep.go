// Package sweep is the periodic-sweep shell shared by the node's housekeeping actors
// (the reactivator and the retention janitor): one sweep at a time on a goroutine the
// actor owns, so the mailbox never waits on a store; the next sweep a delay after the
// previous one ended; a sweep asked for while one runs is run right after it; Stopping or
// Restarting cancels the sweep in flight and waits for it. A panicking sweep is reported
// as a failed sweep, never a crashed goroutine.
package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Loop runs the sweeps of one actor. The actor passes every message to Receive first; Loop
// handles Started, its own messages, Stopping and Restarting. Its zero value is not
// usable: set Sweep, Report and Next.
type Loop[R any] struct {
	// Sweep is one sweep; it runs on the loop's goroutine and should return once ctx ends.
	Sweep func(ctx context.Context) (R, error)
	// Report receives each sweep's outcome in the actor's mailbox (a panic is an error).
	Report func(res R, err error)
	// Next is the delay before the next sweep, asked in the mailbox after each Report.
	Next func() time.Duration

	timer  *time.Timer
	cancel context.CancelFunc
	done   chan struct{} // closed when the sweep in flight ends (nil: none)
	again  bool          // Now came while a sweep ran: sweep again once it ends
}

// Messages of the loop, sent by the actor to itself. They never leave the process.
type (
	sweepMsg         struct{}
	sweepDone[R any] struct {
		res R
		err error
		// of is the sweep's done channel: a report of a sweep this instance did not start
		// (one from before a restart) is ignored.
		of chan struct{}
	}
)

// Receive handles the loop's part of ctx's message and reports whether it was the loop's
// (the actor then has nothing more to do with it). Started sweeps at once; Stopping and
// Restarting stop the loop and return false, so the actor may clean up too.
func (l *Loop[R]) Receive(ctx actor.Context) bool {
	switch msg := ctx.Message().(type) {
	case *actor.Started, *sweepMsg:
		l.start(ctx)
		return true
	case *sweepDone[R]:
		l.onDone(ctx, msg)
		return true
	case *actor.Stopping, *actor.Restarting:
		l.Stop()
	}
	return false
}

// Now sweeps at once, or right after the sweep in flight (which may have read its store
// before whatever made the caller ask). Call it from the actor's Receive.
func (l *Loop[R]) Now(ctx actor.Context) {
	if l.done != nil {
		l.again = true
		return
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	l.start(ctx)
}

func (l *Loop[R]) start(ctx actor.Context) {
	if l.done != nil {
		return
	}
	sctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	done, self, root := l.done, ctx.Self(), ctx.ActorSystem().Root
	go func() {
		defer close(done)
		msg := &sweepDone[R]{of: done}
		msg.res, msg.err = l.run(sctx)
		root.Send(self, msg)
	}()
}

func (l *Loop[R]) run(ctx context.Context) (res R, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sweep panicked: %v", p)
		}
	}()
	return l.Sweep(ctx)
}

func (l *Loop[R]) onDone(ctx actor.Context, msg *sweepDone[R]) {
	if msg.of == nil || msg.of != l.done {
		return
	}
	l.cancel()
	l.cancel, l.done = nil, nil
	l.Report(msg.res, msg.err)
	if l.again {
		l.again = false
		l.start(ctx)
		return
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	if l.timer != nil {
		l.timer.Stop()
	}
	l.timer = time.AfterFunc(l.Next(), func() { root.Send(self, &sweepMsg{}) })
}

// Stop ends the timer and the sweep in flight, waiting for it.
func (l *Loop[R]) Stop() {
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.done != nil {
		l.cancel()
		<-l.done
		l.cancel, l.done = nil, nil
	}
}
