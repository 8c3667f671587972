package builtin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/ltm"
	"github.com/fathom-agents/fathom/tools"
)

// The long-term memory tools' names.
const (
	// RememberTool saves a memory (ltm.Item) for the session's user.
	RememberTool = "remember"
	// RecallTool searches the user's memories.
	RecallTool = "recall"
	// ForgetTool deletes one of the user's memories.
	ForgetTool = "forget"
)

// MemoryTools is what the long-term memory tools work with.
type MemoryTools struct {
	// Store keeps the items.
	Store ltm.Store
	// Embedder embeds texts for the store (its dimension).
	Embedder memory.Embedder
	// Retrieval ranks recall's hits (the node's memory.retrieval).
	Retrieval persistence.Retrieval
	// TTL, when positive, is how long a saved item lives unless remember's ttl_days says
	// otherwise; 0 keeps items until deleted.
	TTL time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// RememberArgs are remember's arguments.
type RememberArgs struct {
	// Text is the memory.
	Text string `json:"text" jsonschema:"minLength=1" jsonschema_description:"The fact, preference or lesson to remember, as one self-contained sentence that will make sense in a later conversation (at most 4096 bytes)."`
	// Kind classifies it.
	Kind string `json:"kind,omitempty" jsonschema:"enum=fact,enum=preference,enum=lesson" jsonschema_description:"fact (default), preference or lesson."`
	// ID replaces an existing memory.
	ID string `json:"id,omitempty" jsonschema:"maxLength=128" jsonschema_description:"The id of a memory recall returned, to replace it with this text (when it changed); leave out to save a new memory."`
	// TTLDays bounds its life.
	TTLDays int `json:"ttl_days,omitempty" jsonschema:"minimum=0,maximum=36500" jsonschema_description:"Forget the memory after this many days (default: the node's retention; 0 keeps it)."`
}

// RecallArgs are recall's arguments.
type RecallArgs struct {
	// Query is what to look for.
	Query string `json:"query" jsonschema_description:"What to look for: words, names or identifiers. An empty query lists the newest memories."`
	// Limit bounds the hits.
	Limit int `json:"limit,omitempty" jsonschema:"minimum=1,maximum=50" jsonschema_description:"How many memories to return (default 10)."`
}

// ForgetArgs are forget's arguments.
type ForgetArgs struct {
	// ID is the memory to delete.
	ID string `json:"id" jsonschema:"minLength=1,maxLength=128" jsonschema_description:"The id of the memory to delete, as recall returned it."`
}

// Tools returns remember, recall and forget.
func (m MemoryTools) Tools() []tools.Tool {
	return []tools.Tool{m.Remember(), m.Recall(), m.Forget()}
}

func (m MemoryTools) now() time.Time {
	if m.Now != nil {
		return m.Now().UTC()
	}
	return time.Now().UTC()
}

// namespace is the calling session's user's: its tenant and user_id.
func namespace(ctx context.Context, tool string) (ltm.Namespace, tools.Call, *tools.ToolError) {
	c, _ := tools.CallInfo(ctx)
	if strings.TrimSpace(c.UserID) == "" {
		return ltm.Namespace{}, c, tools.ExecutionError(tool, "long-term memory belongs to a user, and this session has none: it was started without a user_id", false)
	}
	return ltm.Namespace{Tenant: auth.TenantOf(ctx), User: c.UserID}, c, nil
}

// MemoryID is the id remember gives a new memory: derived from its namespace and its
// text (case and spacing aside), so saving the same fact again (a call executed again
// after a crash, a fork re-running the step that saved it, another session learning it
// too) replaces the memory instead of adding a copy.
func MemoryID(ns ltm.Namespace, text string) string {
	norm := strings.Join(strings.Fields(strings.ToLower(text)), " ")
	h := sha256.Sum256([]byte(ns.Tenant + "\x00" + ns.User + "\x00" + ns.Agent + "\x00" + norm))
	return "mem-" + hex.EncodeToString(h[:8])
}

// Remember returns the remember tool.
func (m MemoryTools) Remember() tools.Tool {
	return tools.MustNew(RememberTool,
		"Save something worth knowing in later conversations with this user: a fact about them or their work, a "+
			"preference, a lesson learned. Memories outlive this session; later sessions of the same user find them "+
			"with recall and start with the most relevant ones in context. Save one self-contained sentence per memory; "+
			"do not save secrets or passing details.",
		tools.SandboxNone, func(ctx context.Context, a RememberArgs) (any, error) {
			ns, call, terr := namespace(ctx, RememberTool)
			if terr != nil {
				return nil, terr
			}
			if err := ltm.ValidateText(a.Text); err != nil {
				return nil, memoryError(ctx, RememberTool, err)
			}
			now := m.now()
			id, replaced := a.ID, false
			created := now
			if id == "" {
				id = MemoryID(ns, a.Text)
			}
			switch old, err := m.Store.Get(ctx, ns, id); {
			case err == nil:
				replaced, created = true, old.CreatedAt
			case a.ID != "" || !errors.Is(err, ltm.ErrNotFound):
				return nil, memoryError(ctx, RememberTool, err, tools.Field{Key: "id", Value: id})
			}
			vecs, err := m.Embedder.Embed(ctx, []string{a.Text})
			if err != nil || len(vecs) != 1 {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, tools.ExecutionError(RememberTool, fmt.Sprintf("the memory could not be embedded: %v", err), true)
			}
			kind := a.Kind
			if kind == "" {
				kind = "fact"
			}
			it := ltm.Item{Namespace: ns, ID: id, Text: a.Text, Metadata: map[string]string{"kind": kind}, Embedding: vecs[0],
				SessionID: call.SessionID, CreatedAt: created, UpdatedAt: now}
			switch {
			case a.TTLDays > 0:
				it.ExpiresAt = now.Add(time.Duration(a.TTLDays) * 24 * time.Hour)
			case m.TTL > 0:
				it.ExpiresAt = now.Add(m.TTL)
			}
			if err := m.Store.Put(ctx, it); err != nil {
				return nil, memoryError(ctx, RememberTool, err)
			}
			tools.RecordMemory(ctx, tools.MemoryWrite{ID: id, Tenant: ns.Tenant, User: ns.User, Agent: ns.Agent, Text: it.Text,
				Metadata: it.Metadata, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt, ExpiresAt: it.ExpiresAt, Replaced: replaced})
			verb := "Saved"
			if replaced {
				verb = "Replaced"
			}
			return fmt.Sprintf("%s memory %s. Later sessions of this user will find it.", verb, id), nil
		})
}

// Recall returns the recall tool. It only reads (tools.NoEffects).
func (m MemoryTools) Recall() tools.Tool {
	return tools.WithoutEffects(tools.MustNew(RecallTool,
		"Search what you remembered about this user in earlier sessions (facts, preferences, lessons saved with "+
			"remember). Search by words, names or identifiers; an empty query lists the newest memories.",
		tools.SandboxNone, func(ctx context.Context, a RecallArgs) (any, error) {
			ns, call, terr := namespace(ctx, RecallTool)
			if terr != nil {
				return nil, terr
			}
			ns.Agent = call.AgentType
			k := a.Limit
			if k <= 0 {
				k = 10
			}
			hits, err := m.Search(ctx, ns, a.Query, k)
			if err != nil {
				return nil, memoryError(ctx, RecallTool, err)
			}
			if len(hits) == 0 {
				return "No memories found.", nil
			}
			return FormatMemories(hits), nil
		}))
}

// Search ranks ns's memories for query (the newest for an empty one), k at most: the
// recall tool's search and the session context's.
func (m MemoryTools) Search(ctx context.Context, ns ltm.Namespace, query string, k int) ([]ltm.Hit, error) {
	q := ltm.Query{Namespace: ns, Text: query, K: k}
	if strings.TrimSpace(query) != "" && m.Retrieval.Mode != persistence.RetrievalText {
		vecs, err := m.Embedder.Embed(ctx, []string{query})
		if err != nil {
			return nil, fmt.Errorf("embed the query: %w", err)
		}
		if len(vecs) == 1 {
			q.Vector = vecs[0]
		}
	}
	return ltm.Search(ctx, m.Store, m.Retrieval, q)
}

// FormatMemories renders hits as recall answers them: one line per memory with its id
// and date.
func FormatMemories(hits []ltm.Hit) string {
	var b strings.Builder
	for i, h := range hits {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "- [%s, %s] %s", h.ID, h.UpdatedAt.Format("2006-01-02"), h.Text)
	}
	return b.String()
}

// Forget returns the forget tool.
func (m MemoryTools) Forget() tools.Tool {
	return tools.MustNew(ForgetTool,
		"Delete a memory of this user that is wrong or no longer wanted, by the id recall gave.",
		tools.SandboxNone, func(ctx context.Context, a ForgetArgs) (any, error) {
			ns, _, terr := namespace(ctx, ForgetTool)
			if terr != nil {
				return nil, terr
			}
			if err := m.Store.Delete(ctx, ns, a.ID); err != nil {
				return nil, memoryError(ctx, ForgetTool, err, tools.Field{Key: "id", Value: a.ID})
			}
			tools.RecordMemory(ctx, tools.MemoryWrite{ID: a.ID, Tenant: ns.Tenant, User: ns.User, Deleted: true})
			return fmt.Sprintf("Deleted memory %s.", a.ID), nil
		})
}

// memoryError classifies a store failure for the model.
func memoryError(ctx context.Context, tool string, err error, fields ...tools.Field) error {
	switch {
	case errors.Is(err, ltm.ErrTooLarge):
		return tools.ValidationError(tool, strings.TrimPrefix(err.Error(), "memory: "), fields...)
	case errors.Is(err, ltm.ErrNotFound):
		return tools.ValidationError(tool, "there is no memory with this id; recall shows the ones that exist", fields...)
	case errors.Is(err, ltm.ErrInvalid):
		return tools.ValidationError(tool, err.Error(), fields...)
	case ctx.Err() != nil:
		return err
	}
	return tools.ExecutionError(tool, "the memory store failed: "+err.Error(), true)
}
