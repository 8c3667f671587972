package errcode

import (
	"context"
	"strconv"
	"time"

	"github.com/fathom-agents/fathom/messages"
)

// StartRetryEvery is how often WaitStart tries a queued start again.
const StartRetryEvery = 250 * time.Millisecond

// WaitStart runs start (one Start request to a session grain) and, while the grain
// refuses it because the tenant runs its max_running_sessions and the tenant has a
// start queue (the refusal's messages.StartQueueKey: its start_queue_timeout), runs it
// again every StartRetryEvery until it is admitted, ctx ends, or the queue time has
// passed. It returns the last answer: a start still refused when the queue time is up
// is the refusal (RESOURCE_EXHAUSTED, with its retry delay). A refused start stored
// nothing, so running the same request again (same session id, same command id) is
// safe.
func WaitStart(ctx context.Context, start func() error) error {
	err := start()
	ms, queued := startQueue(err)
	if !queued {
		return err
	}
	deadline := time.Now().Add(time.Duration(ms) * time.Millisecond)
	t := time.NewTimer(StartRetryEvery)
	defer t.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return err
		case <-t.C:
		}
		if err = start(); Of(err) != ResourceExhausted {
			return err
		}
		t.Reset(min(StartRetryEvery, max(time.Until(deadline), time.Millisecond)))
	}
	return err
}

// startQueue returns the start queue time (ms) of a refusal by max_running_sessions.
func startQueue(err error) (int64, bool) {
	ge, ok := Grain(err)
	if !ok || Of(err) != ResourceExhausted {
		return 0, false
	}
	ms, perr := strconv.ParseInt(ge.GetMetadata()[messages.StartQueueKey], 10, 64)
	return ms, perr == nil && ms > 0
}
