package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fathom-agents/fathom/auth"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/errcode"
	"github.com/fathom-agents/fathom/persistence/ltm"
	"github.com/fathom-agents/fathom/persistence/ltm/ltmbolt"
	"github.com/fathom-agents/fathom/persistence/ltm/ltmpg"
	"github.com/fathom-agents/fathom/tools/builtin"
)

// ErrNoLongTermMemory is returned by the memory operations of a node whose long-term
// memory is off (MemoryConfig.LongTerm).
var ErrNoLongTermMemory = errcode.ErrNoLongTermMemory

// startLongTerm opens the long-term memory store when MemoryConfig.LongTerm is on:
// PostgreSQL's fathom_memories beside a PostgreSQL journal, else DataDir/memories.db;
// and registers remember, recall and forget with the node's tools.
func (n *Node) startLongTerm(ctx context.Context, b *boot) error {
	cfg := n.cfg
	if !cfg.Memory.LongTerm {
		return nil
	}
	dims := b.embedder.Dimensions()
	var store ltm.Store
	var err error
	switch {
	case cfg.PostgresDSN != "":
		store, err = ltmpg.Open(ctx, cfg.PostgresDSN, dims)
	case cfg.DataDir != "":
		if err = os.MkdirAll(cfg.DataDir, 0o755); err == nil {
			store, err = ltmbolt.Open(filepath.Join(cfg.DataDir, ltmbolt.File), dims)
		}
	default:
		err = errors.New("long-term memory needs a place to keep memories: a data dir or a PostgreSQL DSN")
	}
	if err != nil {
		return fmt.Errorf("long-term memory: %w", err)
	}
	tools := &builtin.MemoryTools{Store: store, Embedder: b.embedder, Retrieval: b.session.Retrieval, TTL: cfg.Memory.LongTermTTL}
	for _, t := range tools.Tools() {
		if err := b.tools.Registry.Register(t); err != nil {
			return errors.Join(fmt.Errorf("long-term memory: %w", err), store.Close())
		}
	}
	n.longTerm = &longTermMemory{MemoryTools: tools, stop: make(chan struct{}), done: make(chan struct{})}
	go n.longTerm.purge(n.log, MemoryPurgeInterval)
	return nil
}

// MemoryPurgeInterval is how often a node removes expired memories from its store
// (reads leave them out from the moment they expire).
const MemoryPurgeInterval = time.Hour

// longTermMemory is the node's long-term memory: the store with the tools on it, and
// the goroutine that purges expired memories.
type longTermMemory struct {
	*builtin.MemoryTools
	stop, done chan struct{}
	closeOnce  sync.Once
}

// purge removes expired memories now and every interval until close.
func (l *longTermMemory) purge(log *slog.Logger, interval time.Duration) {
	defer close(l.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if c, err := l.Store.PurgeExpired(ctx, time.Now()); err != nil {
			log.Warn("expired memories not purged", "error", err)
		} else if c > 0 {
			log.Info("expired memories purged", "count", c)
		}
		cancel()
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
	}
}

// close stops the purge and closes the store.
func (l *longTermMemory) close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.stop)
		<-l.done
		err = l.Store.Close()
	})
	return err
}

// LongTerm is the node's long-term memory store; nil when long-term memory is off.
func (n *Node) LongTerm() ltm.Store {
	if n.longTerm == nil {
		return nil
	}
	return n.longTerm.Store
}

// memoryNamespace is whose memories a call acts on: the ctx principal's tenant and user
// (a member's own memories only; an admin or operator names any user of the tenant), or
// without a principal (the Go API inside the process) the default tenant's user.
func memoryNamespace(ctx context.Context, user string) (ltm.Namespace, error) {
	p, ok := auth.FromContext(ctx)
	if !ok {
		if user == "" {
			return ltm.Namespace{}, fmt.Errorf("%w: a user is required", errcode.ErrInvalidMemory)
		}
		return ltm.Namespace{Tenant: auth.DefaultTenant, User: user}, nil
	}
	if user == "" {
		user = p.Subject
	}
	if user != p.Subject && !p.Admin() && !p.Has(auth.RoleOperator) {
		return ltm.Namespace{}, fmt.Errorf("%w: %s may not act on the memories of user %q", errcode.ErrMemoryPermission, p, user)
	}
	ns := ltm.Namespace{Tenant: p.Tenant, User: user}
	return ns, memErr(ltm.ValidateNamespace(ns))
}

// memoryCall resolves the namespace of a memory operation on a node with long-term
// memory.
func (n *Node) memoryCall(ctx context.Context, user string) (ltm.Namespace, error) {
	if n.longTerm == nil {
		return ltm.Namespace{}, ErrNoLongTermMemory
	}
	return memoryNamespace(ctx, user)
}

// ListMemories returns user's newest memories, at most limit (1..ltm.MaxSearch).
func (n *Node) ListMemories(ctx context.Context, user string, limit int) ([]ltm.Item, error) {
	ns, err := n.memoryCall(ctx, user)
	if err != nil {
		return nil, err
	}
	items, err := n.longTerm.Store.List(ctx, ns, limit)
	return items, memErr(err)
}

// SearchMemories ranks user's memories for query (hybrid, as recall does; the newest
// for an empty query), at most limit.
func (n *Node) SearchMemories(ctx context.Context, user, query string, limit int) ([]ltm.Hit, error) {
	ns, err := n.memoryCall(ctx, user)
	if err != nil {
		return nil, err
	}
	if err := ltm.ValidateK(limit); err != nil {
		return nil, memErr(err)
	}
	hits, err := n.longTerm.Search(ctx, ns, query, limit)
	return hits, memErr(err)
}

// GetMemory returns user's memory id.
func (n *Node) GetMemory(ctx context.Context, user, id string) (ltm.Item, error) {
	ns, err := n.memoryCall(ctx, user)
	if err != nil {
		return ltm.Item{}, err
	}
	it, err := n.longTerm.Store.Get(ctx, ns, id)
	return it, memErr(err)
}

// MemoryUpdate is an edit of a memory: the fields that are set replace the item's.
type MemoryUpdate struct {
	// Text, when set, replaces the text (and the embedding).
	Text *string
	// Metadata, when set, replaces the metadata.
	Metadata map[string]string
	// ExpiresAt, when set, replaces the expiry (the zero time: never).
	ExpiresAt *time.Time
}

// UpdateMemory edits user's memory id and returns it as saved.
func (n *Node) UpdateMemory(ctx context.Context, user, id string, u MemoryUpdate) (ltm.Item, error) {
	ns, err := n.memoryCall(ctx, user)
	if err != nil {
		return ltm.Item{}, err
	}
	it, err := n.longTerm.Store.Get(ctx, ns, id)
	if err != nil {
		return ltm.Item{}, memErr(err)
	}
	if u.Text != nil {
		if err := ltm.ValidateText(*u.Text); err != nil {
			return ltm.Item{}, memErr(err)
		}
		vecs, err := n.longTerm.Embedder.Embed(ctx, []string{*u.Text})
		if err != nil {
			return ltm.Item{}, fmt.Errorf("embed the memory: %w", err)
		}
		it.Text, it.Embedding = *u.Text, vecs[0]
	}
	if u.Metadata != nil {
		it.Metadata = u.Metadata
	}
	if u.ExpiresAt != nil {
		it.ExpiresAt = u.ExpiresAt.UTC()
	}
	it.UpdatedAt = time.Now().UTC()
	if err := n.longTerm.Store.Put(ctx, it); err != nil {
		return ltm.Item{}, memErr(err)
	}
	it, err = n.longTerm.Store.Get(ctx, ns, id)
	return it, memErr(err)
}

// DeleteMemory deletes user's memory id.
func (n *Node) DeleteMemory(ctx context.Context, user, id string) error {
	ns, err := n.memoryCall(ctx, user)
	if err != nil {
		return err
	}
	return memErr(n.longTerm.Store.Delete(ctx, ns, id))
}

// DeleteUserMemories deletes every memory of user (a user's deletion) and returns how
// many there were.
func (n *Node) DeleteUserMemories(ctx context.Context, user string) (int, error) {
	ns, err := n.memoryCall(ctx, user)
	if err != nil {
		return 0, err
	}
	c, err := n.longTerm.Store.DeleteUser(ctx, ns.Tenant, ns.User)
	return c, memErr(err)
}

// memErr classifies a memory store's error for the gateway and the Go API
// (errcode.ErrMemoryNotFound, errcode.ErrInvalidMemory), keeping it wrapped.
func memErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ltm.ErrNotFound):
		return fmt.Errorf("%w: %w", errcode.ErrMemoryNotFound, err)
	case errors.Is(err, ltm.ErrInvalid), errors.Is(err, ltm.ErrTooLarge):
		return fmt.Errorf("%w: %w", errcode.ErrInvalidMemory, err)
	}
	return err
}

// MemoryJSON is it as /v1/memories answers it: the one conversion (fathom.MemoryJSON
// gives it to programs and the CLI, which may not import this package).
func MemoryJSON(it ltm.Item) gateway.Memory {
	m := gateway.Memory{ID: it.ID, Tenant: it.Tenant, User: it.User, Agent: it.Agent, Text: it.Text, Metadata: it.Metadata,
		SessionID: it.SessionID, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt}
	if !it.ExpiresAt.IsZero() {
		e := it.ExpiresAt
		m.ExpiresAt = &e
	}
	return m
}

// GatewayMemories serves the gateway's /v1/memories with the node's long-term memory.
func (n *Node) GatewayMemories() gateway.Memories { return gatewayMemories{n} }

// gatewayMemories is Node as a gateway.Memories.
type gatewayMemories struct{ n *Node }

func (g gatewayMemories) ListMemories(ctx context.Context, user string, limit int) ([]gateway.Memory, error) {
	items, err := g.n.ListMemories(ctx, user, limit)
	out := make([]gateway.Memory, len(items))
	for i, it := range items {
		out[i] = MemoryJSON(it)
	}
	return out, err
}

func (g gatewayMemories) SearchMemories(ctx context.Context, user, query string, limit int) ([]gateway.Memory, error) {
	hits, err := g.n.SearchMemories(ctx, user, query, limit)
	out := make([]gateway.Memory, len(hits))
	for i, h := range hits {
		out[i] = MemoryJSON(h.Item)
		sc := h.Score
		out[i].Score = &sc
	}
	return out, err
}

func (g gatewayMemories) GetMemory(ctx context.Context, user, id string) (gateway.Memory, error) {
	it, err := g.n.GetMemory(ctx, user, id)
	return MemoryJSON(it), err
}

func (g gatewayMemories) EditMemory(ctx context.Context, user, id string, e gateway.MemoryEdit) (gateway.Memory, error) {
	u := MemoryUpdate{Text: e.Text, Metadata: e.Metadata}
	if e.ExpiresAt != nil {
		t, err := gateway.ParseMemoryExpiry(*e.ExpiresAt)
		if err != nil {
			return gateway.Memory{}, err
		}
		u.ExpiresAt = &t
	}
	it, err := g.n.UpdateMemory(ctx, user, id, u)
	return MemoryJSON(it), err
}

func (g gatewayMemories) DeleteMemory(ctx context.Context, user, id string) error {
	return g.n.DeleteMemory(ctx, user, id)
}

func (g gatewayMemories) DeleteUserMemories(ctx context.Context, user string) (int, error) {
	return g.n.DeleteUserMemories(ctx, user)
}

var _ gateway.Memories = gatewayMemories{}
