package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/fathom-agents/fathom/messages"
)

// requestContext is the cluster's grain-call path (installed with
// cluster.WithClusterContextProducer). It keeps Proto.Actor's semantics — PID cache,
// identity lookup, retry with back-off on timeouts and dead letters, the caller's
// GrainCallOptions — without the default context's per-call allocations (a log
// throttle, a context with timer, a reflect-built debug line), which made a local grain
// call cost about three bare RequestFutures.
type requestContext struct{ c *cluster.Cluster }

func newRequestContext(c *cluster.Cluster) cluster.Context { return &requestContext{c: c} }

func (rc *requestContext) pid(identity, kind string) *actor.PID {
	pid, _ := rc.c.PidCache.Get(identity, kind)
	if pid == nil {
		if pid = rc.c.Get(identity, kind); pid != nil {
			rc.c.PidCache.Set(identity, kind, pid)
		}
	}
	return pid
}

// Request sends message to the grain and waits for its answer, retrying while the
// identity is being placed or its activation moved, until the call's timeout.
func (rc *requestContext) Request(identity, kind string, message any, opts ...cluster.GrainCallOption) (any, error) {
	cfg := cluster.NewGrainCallOptions(rc.c)
	cfg.RetryCount, cfg.RetryAction = retryAttempts, nil // nil: backoff, unless a caller's option sets one
	for _, o := range opts {
		o(cfg)
	}
	deadline := time.Now().Add(cfg.Timeout)
	retry := func(attempt int) int {
		if cfg.RetryAction != nil {
			return cfg.RetryAction(attempt)
		}
		return backoff(attempt, deadline)
	}
	var lastErr error
	for attempt := 0; attempt < cfg.RetryCount; {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			break
		}
		pid := rc.pid(identity, kind)
		if pid == nil {
			lastErr = errNoPlacement
			attempt = retry(attempt)
			continue
		}
		resp, err := cfg.Context.RequestFuture(pid, message, remaining).Result()
		if resp != nil || err == nil {
			return resp, nil
		}
		switch {
		case errors.Is(err, actor.ErrTimeout), errors.Is(err, remote.ErrTimeout),
			errors.Is(err, actor.ErrDeadLetter), errors.Is(err, remote.ErrDeadLetter):
			lastErr = err
			rc.c.PidCache.Remove(identity, kind)
			attempt = retry(attempt)
		default:
			return nil, err
		}
	}
	if lastErr == nil {
		lastErr = actor.ErrTimeout
	}
	if errors.Is(lastErr, errNoPlacement) || errors.Is(lastErr, actor.ErrDeadLetter) || errors.Is(lastErr, remote.ErrDeadLetter) {
		return nil, unavailable(kind, identity, lastErr)
	}
	return nil, fmt.Errorf("request to %s/%s failed: %w", kind, identity, lastErr)
}

// retryAttempts bounds the attempts of a grain call that finds no placement or a stale
// activation (dead letter); backoff spaces them. A stopping activation is removed from
// the process registry before its Terminate runs (a session grain releases its lease
// there, a journal write) and the placement actor forgets it only after: in between,
// every attempt is a dead letter. Proto.Actor's default, 3 attempts 50–450 ns apart,
// gave up within that window, so a session read while the session passivated answered
// 503. The first retry is immediate (the common dead letter is a cached address of an
// activation long gone, which the next lookup replaces), the next ones 10 ms apart and
// doubling: about 1.3 s in all (a membership change settles in about that), never past
// the call's deadline. A caller's cluster.WithRetryCount or WithRetryAction replaces
// them.
const retryAttempts = 9

// backoff sleeps before retry i+1 (none after the first attempt, then 10 ms doubling to
// at most 640 ms, never past deadline) and returns i+1.
func backoff(i int, deadline time.Time) int {
	if i > 0 {
		if d := min(10*time.Millisecond<<min(i-1, 6), time.Until(deadline)); d > 0 {
			time.Sleep(d)
		}
	}
	return i + 1
}

// errNoPlacement: the identity lookup found no member to activate the grain on (the
// topology is changing, or the owner does not answer).
var errNoPlacement = errors.New("no member hosts the kind yet")

// unavailable is the error of a grain call that could not be placed: a grain error with
// reason UNAVAILABLE, which callers (the gateway) report as retryable, not internal.
func unavailable(kind, identity string, err error) error {
	return &cluster.GrainErrorResponse{Reason: messages.ErrorReason_UNAVAILABLE.String(),
		Message: fmt.Sprintf("request to %s/%s failed: %v; retry later", kind, identity, err)}
}

// RequestFuture sends message to the grain and returns the future of its answer.
func (rc *requestContext) RequestFuture(identity, kind string, message any, opts ...cluster.GrainCallOption) (*actor.Future, error) {
	cfg := cluster.NewGrainCallOptions(rc.c)
	for _, o := range opts {
		o(cfg)
	}
	pid := rc.pid(identity, kind)
	if pid == nil {
		return nil, unavailable(kind, identity, errNoPlacement)
	}
	return cfg.Context.RequestFuture(pid, message, cfg.Timeout), nil
}
