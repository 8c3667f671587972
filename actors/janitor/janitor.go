// Package janitor is the node's retention janitor: an actor that, every Interval,
// deletes the terminal sessions (completed, failed, cancelled) whose last event is older
// than the retention (`fathom node --retention`, env FATHOM_RETENTION). It reads the
// session index and deletes through Config.Delete (the node's DeleteSession: artifacts,
// vectors, then the journal in one transaction that checks the status again).
//
// Every node runs one. Two nodes on one PostgreSQL journal may pick the same session:
// the second delete finds nothing and is not an error. A sweep runs on a goroutine the
// actor owns, so the mailbox never waits on the store; Stopping or Restarting cancels
// the sweep and waits for it, and the default supervisor restarts a crashed janitor (a
// failed sweep loses nothing: the next one reads the index again).
package janitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/persistence"
)

// Config configures a janitor.
type Config struct {
	// Index is the session index swept. Required.
	Index persistence.SessionIndex
	// Delete removes a terminal session. An error wrapping ErrGone counts as done (another
	// node deleted it first). Required.
	Delete func(ctx context.Context, id string) error
	// Retention is how long a terminal session is kept after its last event. Required
	// (positive).
	Retention time.Duration
	// Interval is the time between the end of one sweep and the start of the next.
	// Default min(Retention/10, 1 minute), at least 1 s.
	Interval time.Duration
	// Batch bounds the sessions one sweep deletes per status (the rest wait for the next
	// sweep). Default 100.
	Batch int
	// Timeout bounds one index query or one delete. Default 30 s.
	Timeout time.Duration
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// Logger receives a line per sweep that deleted something and warnings for failures.
	// Nil means slog.Default().
	Logger *slog.Logger
}

// ErrGone is what Config.Delete may wrap for a session already deleted.
var ErrGone = errors.New("session already deleted")

// Validate fills defaults into zero fields and reports a configuration that cannot run.
func (c *Config) Validate() error {
	switch {
	case c.Index == nil:
		return errors.New("janitor: no session index")
	case c.Delete == nil:
		return errors.New("janitor: no delete function")
	case c.Retention <= 0:
		return fmt.Errorf("janitor: retention must be positive, not %s", c.Retention)
	case c.Interval < 0 || c.Batch < 0 || c.Timeout < 0:
		return errors.New("janitor: interval, batch and timeout must not be negative")
	}
	if c.Interval == 0 {
		c.Interval = max(min(c.Retention/10, time.Minute), time.Second)
	}
	if c.Batch == 0 {
		c.Batch = 100
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Spawn validates cfg and spawns the janitor as name under root. It sweeps at once.
func Spawn(root *actor.RootContext, name string, cfg Config) (*actor.PID, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pid, err := root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &Actor{cfg: cfg} }), name)
	if err != nil {
		return nil, fmt.Errorf("janitor: spawn %s: %w", name, err)
	}
	return pid, nil
}

// Messages the janitor sends itself. They never leave the process.
type (
	// sweepMsg starts a sweep.
	sweepMsg struct{}
	// sweepDone reports a sweep.
	sweepDone struct {
		deleted, failed int
		err             error
		// of is the sweep's done channel: a report of a sweep this instance did not start
		// (one from before a restart) is ignored.
		of chan struct{}
	}
)

// Actor is the janitor.
type Actor struct {
	cfg    Config
	timer  *time.Timer
	cancel context.CancelFunc
	done   chan struct{} // closed when the sweep in flight ends (nil: none)
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
	case *actor.Stopping, *actor.Restarting:
		a.stop()
	case *actor.Stopped, actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		a.cfg.Logger.Warn("janitor: unexpected message", "type", fmt.Sprintf("%T", msg))
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

func (a *Actor) onSweepDone(ctx actor.Context, msg *sweepDone) {
	if msg.of == nil || msg.of != a.done {
		return
	}
	a.cancel()
	a.cancel, a.done = nil, nil
	switch {
	case msg.err != nil:
		a.cfg.Logger.Warn("janitor: sweep failed; trying again", "error", msg.err, "deleted", msg.deleted, "retry_in", a.cfg.Interval)
	case msg.deleted > 0 || msg.failed > 0:
		a.cfg.Logger.Info("janitor: deleted sessions past their retention", "sessions", msg.deleted, "failed", msg.failed, "retention", a.cfg.Retention)
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	if a.timer != nil {
		a.timer.Stop()
	}
	a.timer = time.AfterFunc(a.cfg.Interval, func() { root.Send(self, &sweepMsg{}) })
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

// Expired reports whether index row e is a terminal session whose last event is older
// than retention at now.
func Expired(e persistence.IndexEntry, retention time.Duration, now time.Time) bool {
	return persistence.TerminalStatus(e.Status) && !e.UpdatedAt.IsZero() && e.UpdatedAt.Before(now.Add(-retention))
}

// sweep deletes, per terminal status, up to Batch sessions past the retention. A panic
// (a bug in Delete) is reported as a failed sweep, not a crash of the goroutine.
func (a *Actor) sweep(ctx context.Context) (res *sweepDone) {
	res = &sweepDone{}
	defer func() {
		if r := recover(); r != nil {
			res.err = fmt.Errorf("sweep panicked: %v", r)
		}
	}()
	now := a.cfg.Now()
	cutoff := now.Add(-a.cfg.Retention)
	for _, status := range []string{persistence.StatusCompleted, persistence.StatusFailed, persistence.StatusCancelled} {
		// A session updated before the cutoff was created before it too: the query narrows
		// by creation, Expired checks the last event.
		qctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
		es, err := a.cfg.Index.ListSessions(qctx, persistence.ListQuery{Status: status, Until: cutoff, Limit: a.cfg.Batch})
		cancel()
		if err != nil {
			res.err = fmt.Errorf("query the session index: %w", err)
			return res
		}
		for _, e := range es {
			if !Expired(e, a.cfg.Retention, now) {
				continue
			}
			if err := ctx.Err(); err != nil {
				res.err = err
				return res
			}
			dctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
			err := a.cfg.Delete(dctx, e.SessionID)
			cancel()
			switch {
			case err == nil:
				res.deleted++
				a.cfg.Logger.Debug("janitor: deleted session", "session_id", e.SessionID, "status", e.Status, "updated_at", e.UpdatedAt)
			case errors.Is(err, ErrGone):
			default:
				res.failed++
				a.cfg.Logger.Warn("janitor: delete failed", "session_id", e.SessionID, "error", err)
			}
		}
	}
	return res
}
