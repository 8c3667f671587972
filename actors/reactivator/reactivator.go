package reactivator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/internal/sweep"
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
	pid, err := root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newActor(cfg) }), name)
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

// hurryMsg starts a hurried spell (Hurry). It never leaves the process.
type hurryMsg struct{}

// tally is what one sweep did.
type tally struct{ poked, failed int }

// Actor is the reactivator. Its sweeps run on a goroutine it owns, one at a time
// (actors/internal/sweep), so the mailbox never waits on the index or on a poke.
type Actor struct {
	cfg  Config
	loop sweep.Loop[tally]
	// hurryUntil ends the hurried spell: until then sweeps are HurryInterval apart.
	hurryUntil time.Time
}

func newActor(cfg Config) *Actor {
	a := &Actor{cfg: cfg}
	a.loop = sweep.Loop[tally]{Sweep: a.sweep, Report: a.report, Next: a.next}
	return a
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	if a.loop.Receive(ctx) {
		return
	}
	switch msg := ctx.Message().(type) {
	case *hurryMsg:
		// A sweep in flight may have read the index before the change: the loop sweeps
		// again right after it.
		a.hurryUntil = time.Now().Add(a.cfg.HurryFor)
		a.loop.Now(ctx)
	case *actor.Stopping, *actor.Restarting, *actor.Stopped, actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		a.cfg.Logger.Warn("reactivator: unexpected message", "type", fmt.Sprintf("%T", msg))
	}
}

func (a *Actor) report(t tally, err error) {
	switch {
	case err != nil:
		a.cfg.Logger.Warn("reactivator: sweep failed; trying again", "error", err, "retry_in", a.cfg.Interval)
	case t.poked > 0:
		a.cfg.Logger.Info("reactivator: woke sessions with no live owner", "sessions", t.poked, "failed", t.failed)
	}
}

// next is the delay before the next sweep: HurryInterval during a hurried spell.
func (a *Actor) next() time.Duration {
	if time.Now().Before(a.hurryUntil) {
		return min(a.cfg.Interval, a.cfg.HurryInterval)
	}
	return a.cfg.Interval
}

// sweep pokes every session the index says is due and unowned, Parallel at a time.
func (a *Actor) sweep(ctx context.Context) (res tally, err error) {
	qctx, cancel := context.WithTimeout(ctx, a.cfg.QueryTimeout)
	due, err := a.cfg.Index.Due(qctx, a.cfg.Batch)
	cancel()
	if err != nil {
		return res, fmt.Errorf("query the session index: %w", err)
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
			return res, ctx.Err()
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
	return res, nil
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
