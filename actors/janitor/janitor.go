// Package janitor is the node's retention janitor: an actor that, every Interval,
// deletes the terminal sessions (completed, failed, cancelled) whose last event is older
// than the retention (`fathom node --retention`, env FATHOM_RETENTION). It reads the
// session index and deletes through Config.Delete (the node's DeleteSession: artifacts,
// vectors, then the journal in one transaction that checks the status again).
//
// Every node runs one. Two nodes on one PostgreSQL journal may pick the same session:
// the second delete finds nothing and is not an error. A sweep runs on a goroutine the
// actor owns (actors/internal/sweep), so the mailbox never waits on the store; Stopping
// or Restarting cancels the sweep and waits for it, and the default supervisor restarts
// a crashed janitor (a failed sweep loses nothing: the next one reads the index again).
package janitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/internal/sweep"
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
	pid, err := root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newActor(cfg) }), name)
	if err != nil {
		return nil, fmt.Errorf("janitor: spawn %s: %w", name, err)
	}
	return pid, nil
}

// tally is what one sweep did.
type tally struct{ deleted, failed int }

// Actor is the janitor. Its sweeps run on a goroutine it owns (actors/internal/sweep).
type Actor struct {
	cfg  Config
	loop sweep.Loop[tally]
}

func newActor(cfg Config) *Actor {
	a := &Actor{cfg: cfg}
	a.loop = sweep.Loop[tally]{Sweep: a.sweep, Report: a.report, Next: func() time.Duration { return cfg.Interval }}
	return a
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	if a.loop.Receive(ctx) {
		return
	}
	switch msg := ctx.Message().(type) {
	case *actor.Stopping, *actor.Restarting, *actor.Stopped, actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		a.cfg.Logger.Warn("janitor: unexpected message", "type", fmt.Sprintf("%T", msg))
	}
}

func (a *Actor) report(t tally, err error) {
	switch {
	case err != nil:
		a.cfg.Logger.Warn("janitor: sweep failed; trying again", "error", err, "deleted", t.deleted, "retry_in", a.cfg.Interval)
	case t.deleted > 0 || t.failed > 0:
		a.cfg.Logger.Info("janitor: deleted sessions past their retention", "sessions", t.deleted, "failed", t.failed, "retention", a.cfg.Retention)
	}
}

// Expired reports whether index row e is a terminal session whose last event is older
// than retention at now.
func Expired(e persistence.IndexEntry, retention time.Duration, now time.Time) bool {
	return persistence.TerminalStatus(e.Status) && !e.UpdatedAt.IsZero() && e.UpdatedAt.Before(now.Add(-retention))
}

// sweep deletes, per terminal status, up to Batch sessions past the retention.
func (a *Actor) sweep(ctx context.Context) (res tally, err error) {
	now := a.cfg.Now()
	cutoff := now.Add(-a.cfg.Retention)
	for _, status := range []string{persistence.StatusCompleted, persistence.StatusFailed, persistence.StatusCancelled} {
		// A session updated before the cutoff was created before it too: the query narrows
		// by creation, Expired checks the last event.
		qctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
		es, err := a.cfg.Index.ListSessions(qctx, persistence.ListQuery{Status: status, Until: cutoff, Limit: a.cfg.Batch})
		cancel()
		if err != nil {
			return res, fmt.Errorf("query the session index: %w", err)
		}
		for _, e := range es {
			if !Expired(e, a.cfg.Retention, now) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return res, err
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
	return res, nil
}
