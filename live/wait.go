package live

import (
	"context"
	"time"
)

// Waiter waits for the updates of one subscription and tells when none came for an idle
// interval (a stream's keepalive). Every wait reuses one notify channel and one timer:
// a context with a timeout per wait would make two contexts and a timer for each update
// a subscriber waits for, and stop them again. Not safe for concurrent use.
//
//	w := live.NewWaiter(sub)
//	defer w.Stop()
//	for {
//		u, idle, err := w.Next(ctx, 15*time.Second)
//		...
//	}
type Waiter struct {
	sub   Subscription
	ch    chan struct{} // the subscription's Notify channel
	t     *time.Timer
	armed bool // t runs (set for an earlier wait, it may fire before this one's end)
}

// NewWaiter returns a waiter for sub; it takes sub's Notify channel.
func NewWaiter(sub Subscription) *Waiter {
	w := &Waiter{sub: sub, ch: make(chan struct{}, 1), t: time.NewTimer(time.Hour)}
	w.t.Stop()
	sub.Notify(w.ch)
	return w
}

// Next returns the subscription's next update, waiting for one; or idle true, without
// an update, once it waited idle without one. Errors are the subscription's, or ctx's
// when it ends first.
func (w *Waiter) Next(ctx context.Context, idle time.Duration) (u Update, isIdle bool, err error) {
	for {
		u, ok, err := w.sub.TryNextUpdate(ctx)
		if err != nil || ok {
			return u, false, err
		}
		start := time.Now()
		if !w.armed {
			w.t.Reset(idle)
			w.armed = true
		}
	wait:
		for {
			select {
			case <-w.ch:
				break wait
			case <-ctx.Done():
				return Update{}, false, ctx.Err()
			case now := <-w.t.C:
				w.armed = false
				if rest := idle - now.Sub(start); rest > 0 { // armed by an earlier wait
					w.t.Reset(rest)
					w.armed = true
					continue
				}
				return Update{}, true, nil
			}
		}
	}
}

// Stop releases the waiter's timer.
func (w *Waiter) Stop() { w.t.Stop() }
