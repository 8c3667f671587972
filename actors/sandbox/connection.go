package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/dispatch"
	"github.com/fathom-agents/fathom/messages/fsp"
)

// connection is one pooled WebSocket to the sandbox, supervised by the pool. It dials at
// start and after every disconnect (immediately once, then with exponential backoff),
// runs the executions the pool checks out to it (a ping/pong health check first, then
// execute; frames are folded into an Accumulator and output is streamed live), and
// tells the pool when it goes up or down and when it is free again. After
// Config.MaxRetries failed dials in a row it fails with *RetriesExhaustedError and the
// pool's supervision strategy restarts it. A dial refused for its credentials (HTTP 401
// or 403) without a refresh URL ends the redialing for good: the same token would be
// refused again.
type connection struct {
	cfg   Config
	log   *slog.Logger
	name  string
	token *tokenStore
	// tokenMgr is told when the sandbox refuses the token (nil without a refresh URL).
	tokenMgr *actor.PID

	sock     *socket
	dialing  *dialAttempt
	failures int
	// down survives the actor's restarts (the props share it): a connection its
	// supervisor restarted after MaxRetries failed dials still logs "restored" when it
	// is back, although its failure count starts again at 0.
	down    *atomic.Bool
	lastErr *DialError
	redial  *time.Timer

	// checking is the execution whose health check (ping) is in flight.
	checking  *execution
	pingTimer *time.Timer
	pending   map[string]*pendingExec
}

// pendingExec is an execution sent to the sandbox and not finished yet.
type pendingExec struct {
	ex    *execution
	acc   *Accumulator
	timer *time.Timer
}

// Messages a connection receives from the pool.
type (
	// checkout hands an execution to an idle connection.
	checkout struct{ exec *execution }
	// abandon says the caller of execution id stopped waiting: cancel it.
	abandon struct{ id string }
)

// Messages a connection sends itself through timers.
type (
	redialNow   struct{ timer *time.Timer }
	pongTimeout struct {
		sock *socket
		id   string
	}
	execDeadline struct{ id string }
)

func newConnectionProps(cfg Config, log *slog.Logger, name string, token *tokenStore, tokenMgr *actor.PID) *actor.Props {
	down := new(atomic.Bool)
	return actor.PropsFromProducer(func() actor.Actor {
		return &connection{cfg: cfg, log: log.With("connection", name), name: name, token: token, tokenMgr: tokenMgr,
			pending: map[string]*pendingExec{}, down: down}
	}, dispatch.Props())
}

// Receive implements actor.Actor.
func (c *connection) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		c.dial(ctx)
	case *dialed:
		c.onDialed(ctx, msg)
	case *redialNow:
		c.onRedial(ctx, msg)
	case *frameIn:
		c.onFrame(ctx, msg)
	case *socketClosed:
		c.onSocketClosed(ctx, msg)
	case *checkout:
		c.onCheckout(ctx, msg)
	case *pongTimeout:
		c.onPongTimeout(ctx, msg)
	case *execDeadline:
		c.onExecDeadline(ctx, msg)
	case *abandon:
		c.onAbandon(ctx, msg)
	case *actor.Restarting:
		c.shutdown(ctx, errors.New("connection restarting"))
	case *actor.Stopping:
		c.shutdown(ctx, errors.New("connection stopping"))
	case *actor.Stopped, *actor.Restart:
	default:
		c.log.Warn("sandbox connection: unexpected message", "type", fmt.Sprintf("%T", msg))
	}
}

// dial starts a dial attempt with the current token.
func (c *connection) dial(ctx actor.Context) {
	c.dialing = startDial(ctx.ActorSystem().Root, ctx.Self(), c.cfg.URL, c.token.get(), c.cfg.ConnectTimeout)
}

func (c *connection) onDialed(ctx actor.Context, msg *dialed) {
	if msg.attempt != c.dialing {
		if conn := msg.attempt.take(); conn != nil {
			_ = conn.Close()
		}
		return
	}
	c.dialing = nil
	conn := msg.attempt.take()
	if msg.err == nil && conn != nil {
		if c.down.Swap(false) {
			c.log.Info("sandbox connection restored", "attempts", c.failures+1)
		}
		c.failures, c.lastErr = 0, nil
		c.sock = startSocket(ctx.ActorSystem().Root, ctx.Self(), conn, c.cfg.WriteTimeout)
		ctx.Send(ctx.Parent(), &connUp{pid: ctx.Self()})
		return
	}
	c.failures++
	c.down.Store(true)
	c.lastErr = msg.err
	ctx.Send(ctx.Parent(), &connDown{pid: ctx.Self(), err: msg.err, dial: true})
	if msg.err.Auth() {
		if c.tokenMgr == nil {
			// Refused credentials do not heal by redialing with the same token: stay down
			// (the pool fails executions at once with a non-retryable error) instead of
			// knocking on the sandbox forever.
			c.log.Error("sandbox refused the credentials; not reconnecting: fix SANDBOX_API_KEY (--sandbox-token) or set SANDBOX_REFRESH_URL, then restart",
				"url", c.cfg.URL, "status", msg.err.Status)
			return
		}
		ctx.Send(c.tokenMgr, &refreshNow{})
	}
	if c.failures >= c.cfg.MaxRetries {
		// Debug: the pool logs the sandbox unreachable once, whatever its connections do.
		c.log.Debug("sandbox connection giving up; its supervisor restarts it", "attempts", c.failures, "error", msg.err)
		// A failure, not a stop: the pool's strategy restarts the actor after a delay.
		panic(&RetriesExhaustedError{Connection: c.name, Attempts: c.failures, Last: msg.err})
	}
	wait := c.cfg.backoff(c.failures)
	c.log.Debug("sandbox dial failed; retrying", "attempt", c.failures, "retry_in", wait, "error", msg.err)
	c.redial = sendAfter(ctx, wait, func(t *time.Timer) any { return &redialNow{timer: t} })
}

func (c *connection) onRedial(ctx actor.Context, msg *redialNow) {
	if msg.timer != c.redial || c.sock != nil || c.dialing != nil {
		return
	}
	c.redial = nil
	c.dial(ctx)
}

// onSocketClosed fails the pending executions as retryable, returns an unstarted one to
// the pool, and reconnects at once.
func (c *connection) onSocketClosed(ctx actor.Context, msg *socketClosed) {
	if msg.sock != c.sock {
		return
	}
	c.log.Warn("sandbox connection lost", "error", msg.err, "pending", c.pendingIDs())
	c.drop(ctx, msg.err)
	c.dial(ctx)
}

// drop closes the socket, fails what was pending and tells the pool the connection is down.
func (c *connection) drop(ctx actor.Context, cause error) {
	if c.sock != nil {
		c.sock.close()
		c.sock = nil
	}
	c.failPending(func(p *pendingExec) { p.ex.finish(nil, disconnectedError(p.ex.tool, p.acc.Acked, cause)) })
	c.handBack(ctx, cause)
	ctx.Send(ctx.Parent(), &connDown{pid: ctx.Self(), err: &DialError{URL: c.cfg.URL, Err: cause}})
}

// handBack returns the execution under health check to the pool, which tries another
// connection: it was never sent, so nothing is lost.
func (c *connection) handBack(ctx actor.Context, cause error) {
	if c.checking == nil {
		return
	}
	stopTimer(c.pingTimer)
	ex := c.checking
	c.checking, c.pingTimer = nil, nil
	ctx.Send(ctx.Parent(), &handback{pid: ctx.Self(), exec: ex, err: cause})
}

func (c *connection) failPending(fail func(*pendingExec)) {
	for id, p := range c.pending {
		stopTimer(p.timer)
		delete(c.pending, id)
		fail(p)
	}
}

// onCheckout starts the health check: the execute goes out when the pong comes back.
func (c *connection) onCheckout(ctx actor.Context, msg *checkout) {
	if c.sock == nil || c.checking != nil {
		ctx.Send(ctx.Parent(), &handback{pid: ctx.Self(), exec: msg.exec, err: errors.New("connection not ready")})
		return
	}
	ping, err := fsp.Encode(&fsp.Ping{Header: fsp.NewHeader(fsp.TypePing, "", time.Now())})
	if err != nil || !c.sock.send(ping) {
		ctx.Send(ctx.Parent(), &handback{pid: ctx.Self(), exec: msg.exec, err: errors.New("cannot send ping")})
		return
	}
	c.checking = msg.exec
	sock, id := c.sock, msg.exec.id
	c.pingTimer = sendAfter(ctx, c.cfg.HealthTimeout, func(*time.Timer) any { return &pongTimeout{sock: sock, id: id} })
}

func (c *connection) onPongTimeout(ctx actor.Context, msg *pongTimeout) {
	if msg.sock != c.sock || c.checking == nil || c.checking.id != msg.id {
		return
	}
	err := fmt.Errorf("health check: no pong within %s", c.cfg.HealthTimeout)
	c.log.Warn("sandbox connection unhealthy; reconnecting", "error", err)
	c.drop(ctx, err)
	c.dial(ctx)
}

// onPong ends a health check by sending the execute.
func (c *connection) onPong(ctx actor.Context) {
	if c.checking == nil {
		return
	}
	stopTimer(c.pingTimer)
	ex := c.checking
	c.checking, c.pingTimer = nil, nil
	ex.frame.TS = fsp.Now()
	b, err := fsp.Encode(ex.frame)
	if err != nil {
		ex.finish(nil, invalidRequestError(ex.tool, err))
		c.checkin(ctx, ex.id)
		return
	}
	if !c.sock.send(b) {
		c.pending[ex.id] = &pendingExec{ex: ex, acc: NewAccumulator(ex.id, c.cfg.MaxOutputBytes)}
		c.drop(ctx, errors.New("write buffer full"))
		c.dial(ctx)
		return
	}
	id := ex.id
	c.pending[id] = &pendingExec{ex: ex, acc: NewAccumulator(id, c.cfg.MaxOutputBytes),
		timer: sendAfter(ctx, time.Until(ex.deadline), func(*time.Timer) any { return &execDeadline{id: id} })}
}

func (c *connection) onFrame(ctx actor.Context, msg *frameIn) {
	if msg.sock != c.sock {
		return
	}
	m, err := fsp.Decode(msg.data)
	if err != nil {
		c.onMalformed(ctx, msg.data, err)
		return
	}
	h := m.MessageHeader()
	switch f := m.(type) {
	case *fsp.Pong:
		c.onPong(ctx)
		return
	case *fsp.Error:
		if h.ID == "" {
			c.log.Warn("sandbox error frame without execution id", "code", f.Code, "message", f.Message)
			return
		}
	}
	p := c.pending[h.ID]
	if p == nil {
		c.log.Debug("frame for no pending execution (finished or cancelled)", "type", h.Type, "execution_id", h.ID)
		return
	}
	p.acc.Apply(m)
	if o, ok := m.(*fsp.Output); ok && p.ex.output != nil {
		p.ex.output(Chunk{ExecutionID: h.ID, Stream: o.Type, Data: o.Data})
	}
	if p.acc.Finished {
		stopTimer(p.timer)
		delete(c.pending, h.ID)
		if terr := outcomeError(p.ex.tool, p.acc, p.ex.limit, c.cfg.MemoryMB); terr != nil {
			p.ex.finish(nil, terr)
		} else {
			p.ex.finish(p.acc.Result(), nil)
		}
		c.checkin(ctx, h.ID)
	}
}

// onMalformed logs the frame with its context and fails every pending execution of the
// connection as non-retryable: which execution it belonged to cannot be known.
func (c *connection) onMalformed(ctx actor.Context, data []byte, err error) {
	c.log.Error("sandbox sent a malformed frame", "error", err, "frame", excerpt(data), "frame_bytes", len(data),
		"pending", c.pendingIDs(), "url", c.cfg.URL)
	ids := c.pendingIDs()
	c.failPending(func(p *pendingExec) { p.ex.finish(nil, malformedError(p.ex.tool, err)) })
	for _, id := range ids {
		c.checkin(ctx, id)
	}
}

// onExecDeadline gives up on an execution the sandbox did not finish in time: the caller
// gets a timeout error and the sandbox a best-effort cancel.
func (c *connection) onExecDeadline(ctx actor.Context, msg *execDeadline) {
	p := c.pending[msg.id]
	if p == nil {
		return
	}
	delete(c.pending, msg.id)
	c.log.Warn("sandbox execution timed out; cancelling", "execution_id", msg.id, "limit", p.ex.limit)
	p.ex.finish(nil, timeoutError(p.ex.tool, p.ex.limit))
	c.cancel(msg.id)
	c.checkin(ctx, msg.id)
}

// onAbandon cancels an execution whose caller left (its context ended).
func (c *connection) onAbandon(ctx actor.Context, msg *abandon) {
	if c.checking != nil && c.checking.id == msg.id {
		stopTimer(c.pingTimer)
		c.checking, c.pingTimer = nil, nil
		c.checkin(ctx, msg.id)
		return
	}
	p := c.pending[msg.id]
	if p == nil {
		return
	}
	stopTimer(p.timer)
	delete(c.pending, msg.id)
	c.cancel(msg.id)
	c.checkin(ctx, msg.id)
}

// cancel sends a best-effort cancel frame.
func (c *connection) cancel(id string) {
	if c.sock == nil {
		return
	}
	b, err := fsp.Encode(&fsp.Cancel{Header: fsp.NewHeader(fsp.TypeCancel, id, time.Now())})
	if err != nil || !c.sock.send(b) {
		c.log.Warn("could not send cancel", "execution_id", id, "error", err)
	}
}

func (c *connection) checkin(ctx actor.Context, id string) {
	ctx.Send(ctx.Parent(), &checkin{pid: ctx.Self(), id: id})
}

// shutdown releases everything the connection owns; executions still pending fail as
// retryable (the connection is going away, not the request).
func (c *connection) shutdown(ctx actor.Context, cause error) {
	stopTimer(c.redial)
	if c.dialing != nil {
		c.dialing.abandon()
		c.dialing = nil
	}
	if c.sock != nil {
		c.sock.close()
		c.sock = nil
	}
	c.failPending(func(p *pendingExec) { p.ex.finish(nil, disconnectedError(p.ex.tool, p.acc.Acked, cause)) })
	c.handBack(ctx, cause)
	ctx.Send(ctx.Parent(), &connDown{pid: ctx.Self(), err: &DialError{URL: c.cfg.URL, Err: cause}})
}

func (c *connection) pendingIDs() []string {
	ids := make([]string, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	return ids
}

// excerpt returns the start of a frame for logs.
func excerpt(b []byte) string {
	const n = 512
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// sendAfter sends the message mk returns to the actor itself after d, from a timer
// goroutine through the root context (never through ctx). mk receives the timer, so a
// message can name the timer that sent it and stale ones can be told apart.
func sendAfter(ctx actor.Context, d time.Duration, mk func(*time.Timer) any) *time.Timer {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	ready := make(chan *time.Timer, 1)
	t := time.AfterFunc(max(d, 0), func() { root.Send(self, mk(<-ready)) })
	ready <- t
	return t
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}
