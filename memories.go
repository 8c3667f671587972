package fathom

import (
	"context"
	"time"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/persistence/ltm"
)

// MemoryItem is one long-term memory (persistence/ltm): a fact, preference or lesson a
// session saved with the remember tool for later sessions of the same user.
type MemoryItem = ltm.Item

// MemoryHit is a memory found by SearchMemories, with its rank score.
type MemoryHit = ltm.Hit

// MemoryJSON is memory it as the gateway's /v1/memories answers it (gateway.Memory): the
// one conversion the gateway, the fathom CLI and programs share.
func MemoryJSON(it MemoryItem) gateway.Memory { return node.MemoryJSON(it) }

// MemoryUpdate edits a memory (UpdateMemory): the fields that are set replace the
// memory's.
type MemoryUpdate = node.MemoryUpdate

// ErrNoLongTermMemory wraps the errors of the memory calls of a node started without
// long-term memory (Memory.LongTerm); errors.Is(err, errors.ErrUnsupported) holds too.
var ErrNoLongTermMemory = node.ErrNoLongTermMemory

// The memory calls act for ctx's principal (auth.WithPrincipal): user "" is the
// principal's own subject; a member may name only themselves (ErrPermissionDenied),
// an admin or operator any user of their tenant. Without a principal they act on user of
// the default tenant, who must then be named. An unknown id is ErrNotFound, an item over
// the size limit ErrInvalidArgument.

// ListMemories returns user's newest memories, at most limit (1..1000).
func (n *Node) ListMemories(ctx context.Context, user string, limit int) ([]MemoryItem, error) {
	items, err := n.n.ListMemories(ctx, user, limit)
	if err != nil {
		return nil, failed("list memories", err)
	}
	return items, nil
}

// SearchMemories ranks user's memories for query as the recall tool does (text and
// vector search fused; the newest for an empty query), at most limit (1..1000).
func (n *Node) SearchMemories(ctx context.Context, user, query string, limit int) ([]MemoryHit, error) {
	hits, err := n.n.SearchMemories(ctx, user, query, limit)
	if err != nil {
		return nil, failed("search memories", err)
	}
	return hits, nil
}

// GetMemory returns user's memory id.
func (n *Node) GetMemory(ctx context.Context, user, id string) (MemoryItem, error) {
	it, err := n.n.GetMemory(ctx, user, id)
	if err != nil {
		return MemoryItem{}, failed("get memory "+id, err)
	}
	return it, nil
}

// UpdateMemory edits user's memory id and returns it as saved.
func (n *Node) UpdateMemory(ctx context.Context, user, id string, u MemoryUpdate) (MemoryItem, error) {
	it, err := n.n.UpdateMemory(ctx, user, id, u)
	if err != nil {
		return MemoryItem{}, failed("update memory "+id, err)
	}
	return it, nil
}

// DeleteMemory deletes user's memory id.
func (n *Node) DeleteMemory(ctx context.Context, user, id string) error {
	if err := n.n.DeleteMemory(ctx, user, id); err != nil {
		return failed("delete memory "+id, err)
	}
	return nil
}

// DeleteUserMemories deletes every memory of user (a user's deletion) from the node's
// memory store and returns how many there were.
func (n *Node) DeleteUserMemories(ctx context.Context, user string) (int, error) {
	c, err := n.n.DeleteUserMemories(ctx, user)
	if err != nil {
		return 0, failed("delete memories of "+user, err)
	}
	return c, nil
}

// PurgeExpiredMemories removes the memories expired at now (their TTL passed; reads
// leave them out already) and returns how many.
func (n *Node) PurgeExpiredMemories(ctx context.Context, now time.Time) (int, error) {
	s := n.n.LongTerm()
	if s == nil {
		return 0, failed("purge memories", ErrNoLongTermMemory)
	}
	c, err := s.PurgeExpired(ctx, now)
	if err != nil {
		return 0, failed("purge memories", err)
	}
	return c, nil
}
