package ltm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fathom-agents/fathom/messages"
)

// Embedder embeds texts, one vector per text (memory.Embedder).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// ItemOf is the item a memory_saved event records, without its embedding.
func ItemOf(sessionID string, m *messages.MemorySaved) Item {
	it := Item{Namespace: Namespace{Tenant: m.GetTenant(), User: m.GetUserId(), Agent: m.GetAgent()}, ID: m.GetMemoryId(),
		Text: m.GetText(), Metadata: m.GetMetadata(), SessionID: sessionID,
		CreatedAt: time.Unix(0, m.GetCreatedAtUnixNano()).UTC(), UpdatedAt: time.Unix(0, m.GetUpdatedAtUnixNano()).UTC()}
	if m.GetExpiresAtUnixNano() != 0 {
		it.ExpiresAt = time.Unix(0, m.GetExpiresAtUnixNano()).UTC()
	}
	return it
}

// Replay applies a session's event to s: a memory_saved puts its item (its text
// embedded with e), a memory_deleted deletes it (an item already gone is not an error);
// other events change nothing. Replaying the journals' events in order rebuilds a
// store: the events carry everything an item is but its embedding.
func Replay(ctx context.Context, s Store, e Embedder, ev *messages.Event) error {
	switch p := ev.GetPayload().(type) {
	case *messages.Event_MemorySaved:
		it := ItemOf(ev.GetSessionId(), p.MemorySaved)
		vecs, err := e.Embed(ctx, []string{it.Text})
		if err != nil {
			return fmt.Errorf("replay memory %s: embed: %w", it.ID, err)
		}
		if len(vecs) != 1 {
			return fmt.Errorf("replay memory %s: the embedder returned %d vectors for 1 text", it.ID, len(vecs))
		}
		it.Embedding = vecs[0]
		if err := s.Put(ctx, it); err != nil {
			return fmt.Errorf("replay memory %s: %w", it.ID, err)
		}
	case *messages.Event_MemoryDeleted:
		m := p.MemoryDeleted
		err := s.Delete(ctx, Namespace{Tenant: m.GetTenant(), User: m.GetUserId()}, m.GetMemoryId())
		if err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("replay memory %s: %w", m.GetMemoryId(), err)
		}
	}
	return nil
}
