package sandbox

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/dispatch"
	"github.com/fathom-agents/fathom/llm/fairshare"
	"github.com/fathom-agents/fathom/tools"
)

// pool is the supervisor of the sandbox connections and the token manager, and the one
// place executions are queued and checked out. It keeps Config.PoolSize connections
// open, opens up to Config.PoolOverflow more while every healthy connection is busy and
// executions wait, and closes those again once idle. An execution that finds no free,
// healthy connection within Config.CheckoutTimeout fails with a retryable sandbox
// error ("pool exhausted" when all are busy, "unavailable" when none is up); when every
// connection is down because the sandbox refused the credentials, waiting executions
// fail at once with a non-retryable one (without a refresh URL; with one, they wait
// for the refreshed token until CheckoutTimeout).
type pool struct {
	cfg      Config
	log      *slog.Logger
	token    *tokenStore
	tokenMgr *actor.PID

	slots     []*slot // base connections first, then overflow ones
	waiting   []*waiter
	busy      map[string]*slot
	abandoned map[string]bool
	// shares picks the tenant the next free connection goes to (the model endpoint's
	// fair-share rule): it counts every waiting execution and every checked-out one;
	// tenantOf is the tenant of each checked-out execution.
	shares   fairshare.Shares
	tenantOf map[string]string
	lastErr  *DialError
	names    int
	stopping bool
	// unreachable is set while no connection is up and every one's last dial failed
	// (Stats.Unreachable): logged once when it starts and once when it ends.
	unreachable bool
}

// slot is the pool's view of one connection.
type slot struct {
	pid      *actor.PID
	up       bool
	dialFail bool   // its last dial failed
	exec     string // the checked-out execution, "" when idle
	overflow bool
}

// waiter is an execution waiting for a connection.
type waiter struct {
	ex    *execution
	timer *time.Timer
}

// Messages the pool receives.
type (
	// submit (Pool.Execute → pool) queues an execution.
	submit struct{ exec *execution }
	// checkoutExpired (timer → pool): execution id waited CheckoutTimeout.
	checkoutExpired struct{ id string }
	// connUp (connection → pool): the connection is open and idle.
	connUp struct{ pid *actor.PID }
	// connDown (connection → pool): the connection is closed (err says why); whatever
	// was checked out to it has been answered or handed back.
	connDown struct {
		pid *actor.PID
		err *DialError
		// dial is set when a dial failed (not when an open connection was lost).
		dial bool
	}
	// checkin (connection → pool): execution id is over; the connection is free.
	checkin struct {
		pid *actor.PID
		id  string
	}
	// handback (connection → pool): the execution was not sent (failed health check or
	// no socket); try another connection.
	handback struct {
		pid  *actor.PID
		exec *execution
		err  error
	}
	// statsRequest (Pool.Stats → pool) asks for a Stats reply.
	statsRequest struct{}
)

// Stats is a snapshot of the pool.
type Stats struct {
	// Connections is the number of connection actors (base and overflow).
	Connections int
	// Up is how many of them are connected.
	Up int
	// Busy is how many run an execution.
	Busy int
	// Overflow is how many overflow connections exist.
	Overflow int
	// Waiting is the number of executions waiting for a connection.
	Waiting int
	// Unreachable is set while no connection is up and every connection's last dial
	// failed: the sandbox is down or cannot be reached.
	Unreachable bool
}

// Names of the pool's children.
const (
	tokenChild      = "token"
	connChildPrefix = "conn-"
)

func newPoolProps(cfg Config, log *slog.Logger, token *tokenStore) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &pool{cfg: cfg, log: log, token: token, busy: map[string]*slot{}, abandoned: map[string]bool{},
			tenantOf: map[string]string{}}
	}, actor.WithSupervisor(newSupervisor(cfg)), dispatch.Props())
}

// Receive implements actor.Actor.
func (p *pool) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		p.onStarted(ctx)
	case *submit:
		p.onSubmit(ctx, msg)
	case *abandon:
		p.onAbandon(ctx, msg)
	case *checkoutExpired:
		p.onCheckoutExpired(ctx, msg)
	case *connUp:
		p.onConnUp(ctx, msg)
	case *connDown:
		p.onConnDown(ctx, msg)
	case *checkin:
		p.onCheckin(ctx, msg)
	case *handback:
		p.onHandback(ctx, msg)
	case *statsRequest:
		ctx.Respond(p.stats())
	case *actor.Terminated:
		p.onTerminated(ctx, msg)
	case *actor.Stopping, *actor.Restarting:
		p.onStopping()
	case *actor.Stopped, *actor.Restart:
	default:
		p.log.Warn("sandbox pool: unexpected message", "type", fmt.Sprintf("%T", msg))
	}
}

func (p *pool) onStarted(ctx actor.Context) {
	if p.cfg.RefreshURL != "" {
		pid, err := ctx.SpawnNamed(newTokenManagerProps(p.cfg, p.log.With("component", "sandbox-token"), p.token), tokenChild)
		if err != nil {
			p.log.Error("sandbox pool: cannot start the token manager", "error", err)
		}
		p.tokenMgr = pid
	}
	for range p.cfg.PoolSize {
		p.spawn(ctx, false)
	}
}

func (p *pool) spawn(ctx actor.Context, overflow bool) {
	p.names++
	name := fmt.Sprintf("%s%d", connChildPrefix, p.names)
	pid, err := ctx.SpawnNamed(newConnectionProps(p.cfg, p.log, name, p.token, p.tokenMgr), name)
	if err != nil {
		p.log.Error("sandbox pool: cannot start a connection", "name", name, "error", err)
		return
	}
	p.slots = append(p.slots, &slot{pid: pid, overflow: overflow})
}

func (p *pool) onSubmit(ctx actor.Context, msg *submit) {
	id := msg.exec.id
	p.shares.Wait(msg.exec.tenant, p.weight(msg.exec.tenant))
	p.waiting = append(p.waiting, &waiter{ex: msg.exec,
		timer: sendAfter(ctx, p.cfg.CheckoutTimeout, func(*time.Timer) any { return &checkoutExpired{id: id} })})
	p.dispatch(ctx)
}

// dispatch checks waiting executions out to idle healthy connections in order, fails
// them at once if the sandbox refuses the credentials, opens overflow connections while
// all healthy ones are busy, and closes idle overflow ones when nothing waits.
func (p *pool) dispatch(ctx actor.Context) {
	for len(p.waiting) > 0 {
		s := p.idle()
		if s == nil {
			break
		}
		i := p.next()
		w := p.waiting[i]
		p.waiting = append(p.waiting[:i], p.waiting[i+1:]...)
		stopTimer(w.timer)
		s.exec = w.ex.id
		p.busy[w.ex.id] = s
		p.tenantOf[w.ex.id] = w.ex.tenant
		p.shares.Grant(w.ex.tenant)
		ctx.Send(s.pid, &checkout{exec: w.ex})
	}
	if len(p.waiting) == 0 {
		p.trimOverflow(ctx)
		return
	}
	up, connecting := 0, 0
	for _, s := range p.slots {
		switch {
		case s.up:
			up++
		case s.overflow:
			connecting++
		}
	}
	if up == 0 {
		// Refused credentials fail at once, unless a refresh may still fix them.
		if p.lastErr != nil && p.lastErr.Auth() && p.cfg.RefreshURL == "" {
			p.failWaiting(authError(p.waiting[0].ex.tool, p.lastErr))
		}
		return // no overflow while the sandbox is unreachable: it would not help
	}
	for connecting < len(p.waiting) && len(p.slots) < p.cfg.PoolSize+p.cfg.PoolOverflow {
		p.spawn(ctx, true)
		connecting++
	}
}

func (p *pool) idle() *slot {
	for _, s := range p.slots {
		if s.up && s.exec == "" {
			return s
		}
	}
	return nil
}

// trimOverflow stops the overflow connections that have nothing to do.
func (p *pool) trimOverflow(ctx actor.Context) {
	kept := p.slots[:0]
	for _, s := range p.slots {
		if s.overflow && s.exec == "" {
			ctx.Stop(s.pid)
			continue
		}
		kept = append(kept, s)
	}
	clear(p.slots[len(kept):])
	p.slots = kept
}

func (p *pool) failWaiting(err *tools.ToolError) {
	for _, w := range p.waiting {
		stopTimer(w.timer)
		p.shares.Cancel(w.ex.tenant)
		e := *err
		e.ToolName = w.ex.tool
		w.ex.finish(nil, &e)
	}
	p.waiting = nil
}

func (p *pool) onAbandon(ctx actor.Context, msg *abandon) {
	for i, w := range p.waiting {
		if w.ex.id == msg.id {
			stopTimer(w.timer)
			p.waiting = append(p.waiting[:i], p.waiting[i+1:]...)
			p.shares.Cancel(w.ex.tenant)
			return
		}
	}
	if s := p.busy[msg.id]; s != nil {
		p.abandoned[msg.id] = true
		ctx.Send(s.pid, msg)
	}
}

func (p *pool) onCheckoutExpired(ctx actor.Context, msg *checkoutExpired) {
	for i, w := range p.waiting {
		if w.ex.id != msg.id {
			continue
		}
		p.waiting = append(p.waiting[:i], p.waiting[i+1:]...)
		p.shares.Cancel(w.ex.tenant)
		switch st := p.stats(); {
		case st.Up > 0:
			w.ex.finish(nil, poolExhaustedError(w.ex.tool, st.Up, p.cfg.CheckoutTimeout))
		case p.lastErr != nil && p.lastErr.Auth():
			w.ex.finish(nil, authError(w.ex.tool, p.lastErr))
		default:
			var last error
			if p.lastErr != nil {
				last = p.lastErr
			}
			w.ex.finish(nil, unavailableError(w.ex.tool, p.cfg.URL, last))
		}
		p.dispatch(ctx)
		return
	}
}

func (p *pool) slot(pid *actor.PID) *slot {
	for _, s := range p.slots {
		if s.pid.Equal(pid) {
			return s
		}
	}
	return nil
}

// release frees slot s of execution id.
func (p *pool) release(s *slot, id string) {
	if s != nil && s.exec == id {
		s.exec = ""
	}
	delete(p.busy, id)
	delete(p.abandoned, id)
	if t, ok := p.tenantOf[id]; ok {
		delete(p.tenantOf, id)
		p.shares.Release(t)
	}
}

// next picks the waiting execution the next free connection goes to: the earliest of
// the tenant the fair-share rule names (a handed-back execution is put first, so it
// keeps its turn in its tenant).
func (p *pool) next() int {
	tenant, _ := p.shares.Next()
	for i, w := range p.waiting {
		if w.ex.tenant == tenant {
			return i
		}
	}
	return 0 // not reached: shares counts every waiting execution
}

func (p *pool) weight(tenant string) int {
	if p.cfg.TenantWeight == nil {
		return 1
	}
	return p.cfg.TenantWeight(tenant)
}

func (p *pool) onConnUp(ctx actor.Context, msg *connUp) {
	if s := p.slot(msg.pid); s != nil {
		s.up, s.dialFail = true, false
		p.lastErr = nil
	}
	p.noteReachable()
	p.dispatch(ctx)
}

// noteReachable logs the sandbox becoming unreachable (every connection's dial fails)
// or reachable again, once per change: the connections' own retries log at debug.
func (p *pool) noteReachable() {
	now := p.stats().Unreachable
	if now == p.unreachable {
		return
	}
	p.unreachable = now
	if now {
		p.log.Error("the sandbox is unreachable: every connection fails; code_execute fails until it is back (see GET /readyz)",
			"url", p.cfg.URL, "connections", len(p.slots), "error", p.lastErr)
		return
	}
	p.log.Info("the sandbox is reachable again", "url", p.cfg.URL)
}

func (p *pool) onConnDown(ctx actor.Context, msg *connDown) {
	s := p.slot(msg.pid)
	if s == nil {
		return
	}
	s.up, s.dialFail = false, msg.dial
	if s.exec != "" {
		p.release(s, s.exec)
	}
	p.lastErr = msg.err
	p.noteReachable()
	p.dispatch(ctx)
}

func (p *pool) onCheckin(ctx actor.Context, msg *checkin) {
	p.release(p.slot(msg.pid), msg.id)
	p.dispatch(ctx)
}

// onHandback puts an execution that was never sent back at the head of the queue,
// unless its caller left or it has bounced off every connection already.
func (p *pool) onHandback(ctx actor.Context, msg *handback) {
	ex := msg.exec
	gone := p.abandoned[ex.id]
	p.release(p.slot(msg.pid), ex.id)
	if gone {
		return
	}
	ex.handbacks++
	if ex.handbacks > p.cfg.PoolSize+p.cfg.PoolOverflow {
		ex.finish(nil, unavailableError(ex.tool, p.cfg.URL, msg.err))
		p.dispatch(ctx)
		return
	}
	id := ex.id
	w := &waiter{ex: ex, timer: sendAfter(ctx, p.cfg.CheckoutTimeout, func(*time.Timer) any { return &checkoutExpired{id: id} })}
	p.shares.Wait(ex.tenant, p.weight(ex.tenant))
	p.waiting = append([]*waiter{w}, p.waiting...)
	p.dispatch(ctx)
}

// onTerminated forgets a stopped connection; a base connection that stopped although
// the pool did not stop it is replaced.
func (p *pool) onTerminated(ctx actor.Context, msg *actor.Terminated) {
	if p.stopping {
		return
	}
	for i, s := range p.slots {
		if !s.pid.Equal(msg.Who) {
			continue
		}
		p.slots = append(p.slots[:i], p.slots[i+1:]...)
		if s.exec != "" {
			p.release(s, s.exec)
		}
		if !s.overflow {
			p.log.Warn("sandbox connection stopped unexpectedly; replacing it", "connection", s.pid.Id)
			p.spawn(ctx, false)
		}
		p.dispatch(ctx)
		return
	}
}

func (p *pool) onStopping() {
	p.stopping = true
	err := tools.SandboxError("", "the sandbox pool is stopping", true)
	p.failWaiting(err)
}

func (p *pool) stats() Stats {
	st := Stats{Connections: len(p.slots), Waiting: len(p.waiting)}
	failing := 0
	for _, s := range p.slots {
		if s.dialFail {
			failing++
		}
		if s.up {
			st.Up++
		}
		if s.exec != "" {
			st.Busy++
		}
		if s.overflow {
			st.Overflow++
		}
	}
	st.Unreachable = len(p.slots) > 0 && st.Up == 0 && failing == len(p.slots)
	return st
}
