package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/janitor"
	"github.com/fathom-agents/fathom/auth"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/persistence"
)

// DeleteSession implements gateway.SessionDeleter (DELETE /v1/sessions/{id}) and is the
// retention janitor's delete: a terminal session's artifacts, vectors, and then, in one
// journal transaction that checks the status again, its events, snapshots and index row.
// The journal goes last, so a delete that fails half-way can be repeated. A session that
// is not terminal is refused (gateway.ErrSessionNotTerminal) before anything is removed.
func (n *Node) DeleteSession(ctx context.Context, id string) error {
	status, tenant, _, err := n.journal.SessionStatus(ctx, id)
	if err != nil {
		return fmt.Errorf("delete session %s: read its index row: %w", id, err)
	}
	if status != "" && !persistence.TerminalStatus(status) {
		return fmt.Errorf("%w: session %s is %s", gateway.ErrSessionNotTerminal, id, status)
	}
	if status != "" {
		if err := n.deleteSessionData(ctx, id, tenant); err != nil {
			return err
		}
	}
	by := "node"
	if p, ok := auth.FromContext(ctx); ok {
		by = p.String()
	} else if deletedBy, ok := ctx.Value(deletedByKey{}).(string); ok {
		by = deletedBy
	}
	if err := DeleteError(id, n.journal.DeleteSession(ctx, id, by)); err != nil {
		return err
	}
	n.evict(id)
	n.log.Info("session deleted", "session_id", id, "status", status, "by", by)
	return nil
}

// DeleteError is the gateway's error for a journal's answer err to the delete of session
// id (persistence.SessionDeleter.DeleteSession): gateway.ErrSessionNotFound,
// gateway.ErrSessionNotTerminal, err itself otherwise (nil for nil).
func DeleteError(id string, err error) error {
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		return fmt.Errorf("%w: %s", gateway.ErrSessionNotFound, id)
	case errors.Is(err, persistence.ErrNotTerminal):
		return fmt.Errorf("%w: session %s: %v", gateway.ErrSessionNotTerminal, id, err)
	}
	return err
}

// deletedByKey names, in a delete's context, who deletes when no principal does (the
// retention janitor).
type deletedByKey struct{}

// evict stops session id's activation, if any, so no member keeps serving the deleted
// state from memory: the next call activates the session afresh from the (now empty)
// journal. The lookup may activate it first; a terminal or empty session never writes.
func (n *Node) evict(id string) {
	if n.member == nil {
		return
	}
	c := n.member.Cluster()
	if pid := c.Get(id, sessionKind); pid != nil {
		// A Stop, not a PoisonPill: a session grain takes a PoisonPill for a move and lets
		// its running calls finish first (actors/session, move.go).
		if err := c.ActorSystem.Root.StopFuture(pid).Wait(); err != nil {
			n.log.Warn("deleted session's activation did not stop", "session_id", id, "error", err)
		}
	}
}

// sessionKind is the session grain's cluster kind (sessiongrain.NewSessionKind).
const sessionKind = "Session"

// deleteSessionData removes session id's artifacts and vectors, kept under tenant, on
// every member this node sees (dropSessionData), before the journal's delete.
func (n *Node) deleteSessionData(ctx context.Context, id, tenant string) error {
	if err := n.dropSessionData(ctx, id, tenant); err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	return nil
}

// janitorName is the name of the node's retention janitor under the root.
const janitorName = "janitor"

// startJanitor spawns the retention janitor (actors/janitor) when retention is positive;
// the journal keeps the session index and deletes (persistence.SessionStore).
func (n *Node) startJanitor(system *actor.ActorSystem, retention time.Duration) error {
	if retention <= 0 {
		return nil
	}
	cfg := janitor.Config{Index: n.journal, Retention: retention, Logger: n.log.With("component", "janitor")}
	cfg.Delete = func(ctx context.Context, id string) error {
		err := n.DeleteSession(context.WithValue(ctx, deletedByKey{}, "retention"), id)
		if errors.Is(err, gateway.ErrSessionNotFound) {
			return fmt.Errorf("%w: %v", janitor.ErrGone, err)
		}
		return err
	}
	pid, err := janitor.Spawn(system.Root, janitorName, cfg)
	if err != nil {
		return err
	}
	n.janitor = pid
	n.log.Info("retention janitor started", "retention", retention)
	return nil
}

// stopJanitor stops the janitor and waits for its sweep in flight, before the journal it
// deletes from closes.
func (n *Node) stopJanitor() {
	if n.janitor == nil || n.member == nil {
		return
	}
	_ = n.member.Cluster().ActorSystem.Root.StopFuture(n.janitor).Wait()
	n.janitor = nil
}
