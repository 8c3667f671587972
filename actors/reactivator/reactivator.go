package reactivator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/persistence"
)

// Config configures a reactivator.
type Config struct {
	// Index is the session index swept. Required.
	Index persistence.SessionIndex
	// Poke activates session id through normal grain placement. It must be idempotent,
	// must never write to the session, and should return once ctx ends. Required.
	Poke func(ctx context.Context, id string) error
	// Interval is the time between the end of one sweep and the start of the next.
	// Default 5 s (half the default lease TTL).
	Interval time.Duration
	// PokeTimeout bounds one poke. Default 5 s.
	PokeTimeout time.Duration
	// QueryTimeout bounds one index query. Default 5 s.
	QueryTimeout time.Duration
	// Batch bounds the sessions one sweep pokes (the earliest due first; the rest wait
	// for the next sweep). Default 256.
	Batch int
	// Parallel bounds the pokes in flight at once. Default 8.
	Parallel int
	// HurryInterval is the time between sweeps for HurryFor after Hurry (a member joined
	// or left, so sessions are changing hands). Default 200 ms.
	HurryInterval time.Duration
	// HurryFor is how long sweeps stay HurryInterval apart after Hurry. Default 5 s.
	HurryFor time.Duration
	// Logger receives a debug line per poke and warnings for failed sweeps. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the defaults (Index and Poke unset).
func DefaultConfig() Config {
	return Config{Interval: 5 * time.Second, PokeTimeout: 5 * time.Second, QueryTimeout: 5 * time.Second, Batch: 256, Parallel: 8,
		HurryInterval: 200 * time.Millisecond, HurryFor: 5 * time.Second}
}

// Validate fills defaults into zero fields and reports a configuration that cannot run.
func (c *Config) Validate() error {
	d := DefaultConfig()
	if c.Interval == 0 {
		c.Interval = d.Interval
	}
	if c.PokeTimeout == 0 {
		c.PokeTimeout = d.PokeTimeout
	}
	if c.QueryTimeout == 0 {
		c.QueryTimeout = d.QueryTimeout
	}
	if c.Batch == 0 {
		c.Batch = d.Batch
	}
	if c.Parallel == 0 {
		c.Parallel = d.Parallel
	}
	if c.HurryInterval == 0 {
		c.HurryInterval = d.HurryInterval
	}
	if c.HurryFor == 0 {
		c.HurryFor = d.HurryFor
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.Index == nil:
		return errors.New("reactivator: no session index")
	case c.Poke == nil:
		return errors.New("reactivator: no poke function")
	case c.Interval < 0 || c.PokeTimeout < 0 || c.QueryTimeout < 0 || c.Batch < 0 || c.Parallel < 0 || c.HurryInterval < 0 || c.HurryFor < 0:
		return errors.New("reactivator: intervals, timeouts and bounds must not be negative")
	}
	return nil
}

// Spawn validates cfg and spawns the reactivator as name under root. It sweeps at once.
func Spawn(root *actor.RootContext, name string, cfg Config) (*actor.PID, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pid, err := root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &Actor{cfg: cfg} }), name)
	if err != nil {
		return nil, fmt.Errorf("reactivator: spawn %s: %w", name, err)
	}
	return pid, nil
}

// Hurry tells the reactivator at pid that sessions are changing hands (a member joined
// or left the cluster): it sweeps at once, and then every HurryInterval for HurryFor,
// so a session whose activation the change stopped continues on its new owner within a
// fraction of a second instead of at the next regular sweep.
func Hurry(root *actor.RootContext, pid *actor.PID) {
	root.Send(pid, &hurryMsg{})
}

// Messages of the reactivator. They never leave the process.
type (
	// sweepMsg starts a sweep.
	sweepMsg struct{}
	// hurryMsg starts a hurried spell (Hurry).
	hurryMsg struct{}
	// sweepDone reports a sweep.
	sweepDone struct {
		poked, failed int
		err           error
		// of is the sweep's done channel: a report of a sweep this instance did not start
		// (one from before a restart) is ignored.
		of chan struct{}
	}
)

// Actor is the reactivator. A sweep runs on a goroutine the actor owns (one at a time),
// so the mailbox never waits on the index or on a poke; Stopping or Restarting cancels
// it and waits for it.
type Actor struct {
	cfg    Config
	timer  *time.Timer
	cancel context.CancelFunc
	done   chan struct{} // closed when the sweep in flight ends (nil: none)
	// hurryUntil ends the hurried spell: until then sweeps are HurryInterval apart.
	hurryUntil time.Time
	// again asks for another sweep as soon as the one in flight ends (a Hurry came
	// while it ran, so it may have read the index before the change).
	again bool
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.onSweep(ctx)
	case *sweepMsg:
		a.onSweep(ctx)
	case *sweepDone:
		a.onSweepDone(ctx, msg)
	case *hurryMsg:
		a.onHurry(ctx)
	case *actor.Stopping, *actor.Restarting:
		a.stop()
	case *actor.Stopped, actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		a.cfg.Logger.Warn("reactivator: unexpected message", "type", fmt.Sprintf("%T", msg))
	}
}

func (a *Actor) onSweep(ctx actor.Context) {
	if a.done != nil {
		return
	}
	sctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.done = cancel, make(chan struct{})
	done, self, root := a.done, ctx.Self(), ctx.ActorSystem().Root
	go func() {
		defer close(done)
		res := a.sweep(sctx)
		res.of = done
		root.Send(self, res)
	}()
}

func (a *Actor) onHurry(ctx actor.Context) {
	a.hurryUntil = time.Now().Add(a.cfg.HurryFor)
	if a.done != nil {
		a.again = true
		return
	}
	if a.timer != nil {
		a.timer.Stop()
	}
	a.onSweep(ctx)
}

func (a *Actor) onSweepDone(ctx actor.Context, msg *sweepDone) {
	if msg.of == nil || msg.of != a.done {
		return
	}
	a.cancel()
	a.cancel, a.done = nil, nil
	switch {
	case msg.err != nil:
		a.cfg.Logger.Warn("reactivator: sweep failed; trying again", "error", msg.err, "retry_in", a.cfg.Interval)
	case msg.poked > 0:
		a.cfg.Logger.Info("reactivator: woke sessions with no live owner", "sessions", msg.poked, "failed", msg.failed)
	}
	if a.again {
		a.again = false
		a.onSweep(ctx)
		return
	}
	next := a.cfg.Interval
	if time.Now().Before(a.hurryUntil) {
		next = min(next, a.cfg.HurryInterval)
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	if a.timer != nil {
		a.timer.Stop()
	}
	a.timer = time.AfterFunc(next, func() { root.Send(self, &sweepMsg{}) })
}

// stop ends the timer and the sweep in flight.
func (a *Actor) stop() {
	if a.timer != nil {
		a.timer.Stop()
	}
	if a.done != nil {
		a.cancel()
		<-a.done
		a.cancel, a.done = nil, nil
	}
}

// sweep pokes every session the index says is due and unowned, Parallel at a time. A
// panic (a bug in Poke) is reported as a failed sweep, not a crash of the goroutine.
func (a *Actor) sweep(ctx context.Context) (res *sweepDone) {
	res = &sweepDone{}
	defer func() {
		if r := recover(); r != nil {
			res.err = fmt.Errorf("sweep panicked: %v", r)
		}
	}()
	qctx, cancel := context.WithTimeout(ctx, a.cfg.QueryTimeout)
	due, err := a.cfg.Index.Due(qctx, a.cfg.Batch)
	cancel()
	if err != nil {
		res.err = fmt.Errorf("query the session index: %w", err)
		return res
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, a.cfg.Parallel)
	)
	for _, e := range due {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			res.err = ctx.Err()
			return res
		}
		wg.Add(1)
		go func(e persistence.IndexEntry) {
			defer func() { <-sem; wg.Done() }()
			err := a.poke(ctx, e)
			mu.Lock()
			res.poked++
			if err != nil {
				res.failed++
			}
			mu.Unlock()
		}(e)
	}
	wg.Wait()
	return res
}

func (a *Actor) poke(ctx context.Context, e persistence.IndexEntry) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("poke panicked: %v", r)
		}
	}()
	pctx, cancel := context.WithTimeout(ctx, a.cfg.PokeTimeout)
	defer cancel()
	err = a.cfg.Poke(pctx, e.SessionID)
	a.cfg.Logger.Debug("reactivator: poked session", "session_id", e.SessionID, "status", e.Status, "due_at", e.DueAt,
		"lease_owner", e.LeaseOwner, "lease_expires", e.LeaseExpires, "error", err)
	return err
}
