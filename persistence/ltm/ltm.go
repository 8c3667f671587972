// Package ltm is Fathom's long-term memory: facts, preferences and lessons a session
// saves (the remember tool) for later sessions of the same user to find (recall, and the
// orchestrator's context at a session's start). The store lives beside the journal and
// is namespaced by tenant and user, optionally by agent type.
//
// # Items and namespaces
//
// An Item has an id, its text (at most MaxTextBytes), metadata, an embedding, created and
// updated times and an optional expiry (TTL). Every call names the tenant and the user:
// an item of another tenant or user is never read, listed, found, changed or deleted,
// whatever its id. An expired item is as if deleted; PurgeExpired removes it.
//
// # Search
//
// Search ranks a namespace's items by embedding similarity and by text (the terms of
// persistence.Tokenize: BM25 in the embedded store, ts_rank_cd over a tsvector column in
// PostgreSQL), fused by reciprocal rank fusion as the session's retrieval is
// (persistence.Retrieval). An empty query returns the newest items.
//
// # Backends
//
// persistence/ltm/ltmbolt is the embedded store (a bbolt file in the node's data
// directory, indexed in memory); persistence/ltm/ltmpg is PostgreSQL (the
// fathom_memories table, migrations/0015_memories.sql). Both pass ltmtest.Run.
//
// # Events
//
// Every write a session makes is recorded in its journal (memory_saved,
// memory_deleted) with everything the item needs but its embedding, which the embedder
// makes again: Rebuild replays such events into a store.
package ltm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fathom-agents/fathom/persistence"
)

// Sentinel errors of the memory store. Compare with errors.Is.
var (
	// ErrNotFound means no item of the namespace has the id (or it expired).
	ErrNotFound = errors.New("memory: not found")
	// ErrTooLarge means an item's text or metadata is over the size limit.
	ErrTooLarge = errors.New("memory: item too large")
	// ErrInvalid means an argument the store cannot use (an empty user, an empty text,
	// a vector of the wrong dimension). It also matches persistence.ErrInvalid.
	ErrInvalid = fmt.Errorf("memory: %w", persistence.ErrInvalid)
	// ErrClosed is returned by calls made after Close.
	ErrClosed = errors.New("memory: store closed")
)

// Size limits of an item.
const (
	// MaxTextBytes bounds an item's text: a memory is a fact, not a document (an
	// artifact is for those).
	MaxTextBytes = 4096
	// MaxMetadataBytes bounds an item's metadata, keys and values together.
	MaxMetadataBytes = 2048
	// MaxIDBytes bounds an item's id, a user and an agent.
	MaxIDBytes = 128
	// MaxSearch bounds k of a search or a list.
	MaxSearch = 1000
)

// Namespace says whose an item is: a tenant's user, optionally one agent type of theirs.
type Namespace struct {
	// Tenant is the tenant (auth.CheckTenant).
	Tenant string
	// User is the user within the tenant (a session's user_id); required.
	User string
	// Agent, when set, is the agent type the item belongs to ("" is the user's, shared by
	// every agent). Items are keyed by tenant, user and id: Agent narrows searches.
	Agent string
}

// Item is one memory.
type Item struct {
	Namespace
	// ID identifies the item within its tenant and user.
	ID string
	// Text is the memory, at most MaxTextBytes.
	Text string
	// Metadata is free-form (e.g. "kind": "preference"), at most MaxMetadataBytes.
	Metadata map[string]string
	// Embedding is Text's embedding, of the store's dimension (stored normalised).
	Embedding []float32
	// SessionID is the session that saved the item ("" when saved through the API).
	SessionID string
	// CreatedAt and UpdatedAt are when the item was first saved and last changed. A Put
	// of an existing item keeps its CreatedAt.
	CreatedAt, UpdatedAt time.Time
	// ExpiresAt, when set, is when the item expires: from then on it is as if deleted.
	ExpiresAt time.Time
}

// Hit is one search result.
type Hit struct {
	Item
	// Score is the rank's score: higher is better, comparable only within one result.
	Score float32
}

// Query is a search.
type Query struct {
	Namespace
	// Text is the query; empty returns the newest items.
	Text string
	// Vector is Text's embedding; nil searches by text only.
	Vector []float32
	// K is how many hits to return, 1..MaxSearch.
	K int
}

// Store keeps memory items. Implementations are safe for concurrent use and validate
// their arguments as Validate does. Reads leave out expired items.
type Store interface {
	// Dimensions is the length of every embedding.
	Dimensions() int
	// Put saves it (insert, or replace the item of its tenant, user and id).
	Put(ctx context.Context, it Item) error
	// Get returns the namespace's item id (ErrNotFound when there is none).
	Get(ctx context.Context, ns Namespace, id string) (Item, error)
	// Delete removes the namespace's item id (ErrNotFound when there is none).
	Delete(ctx context.Context, ns Namespace, id string) error
	// DeleteUser removes every item of the tenant's user and returns how many.
	DeleteUser(ctx context.Context, tenant, user string) (int, error)
	// List returns the namespace's newest items (by UpdatedAt, then id), at most limit.
	// ns.Agent, when set, keeps the user's shared items and the agent's.
	List(ctx context.Context, ns Namespace, limit int) ([]Item, error)
	// SearchVector ranks the namespace's items by cosine similarity to vec, best first.
	SearchVector(ctx context.Context, ns Namespace, vec []float32, k int) ([]Hit, error)
	// SearchText ranks the namespace's items sharing a term with text, best first.
	SearchText(ctx context.Context, ns Namespace, text string, k int) ([]Hit, error)
	// PurgeExpired removes the items of every namespace expired at now and returns how
	// many.
	PurgeExpired(ctx context.Context, now time.Time) (int, error)
	// Close releases the store. Calls after Close return ErrClosed.
	Close() error
}

// ValidateNamespace checks a namespace: a valid tenant, a user, ids within MaxIDBytes.
func ValidateNamespace(ns Namespace) error {
	if err := persistence.ValidateTenant(ns.Tenant); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if strings.TrimSpace(ns.User) == "" {
		return fmt.Errorf("%w: no user: long-term memory belongs to a user (a session's user_id)", ErrInvalid)
	}
	if len(ns.User) > MaxIDBytes || len(ns.Agent) > MaxIDBytes {
		return fmt.Errorf("%w: user and agent are at most %d bytes", ErrInvalid, MaxIDBytes)
	}
	return nil
}

// ValidateItem checks an item before Put: its namespace, an id, a text of at most
// MaxTextBytes (ErrTooLarge), metadata of at most MaxMetadataBytes and an embedding of
// dims components that is not all zeros.
func ValidateItem(it Item, dims int) error {
	if err := ValidateNamespace(it.Namespace); err != nil {
		return err
	}
	if it.ID == "" || len(it.ID) > MaxIDBytes {
		return fmt.Errorf("%w: an item id is 1..%d bytes", ErrInvalid, MaxIDBytes)
	}
	if err := ValidateText(it.Text); err != nil {
		return err
	}
	n := 0
	for k, v := range it.Metadata {
		n += len(k) + len(v)
	}
	if n > MaxMetadataBytes {
		return fmt.Errorf("%w: metadata is %d bytes, the limit is %d", ErrTooLarge, n, MaxMetadataBytes)
	}
	if err := persistence.ValidateVector(it.Embedding, dims); err != nil {
		return fmt.Errorf("%w: embedding: %v", ErrInvalid, err)
	}
	return nil
}

// ValidateText checks an item's text: not blank, valid UTF-8, at most MaxTextBytes
// (ErrTooLarge, with the sizes).
func ValidateText(text string) error {
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("%w: empty text", ErrInvalid)
	}
	if len(text) > MaxTextBytes {
		return fmt.Errorf("%w: the text is %d bytes, the limit is %d: save a short fact, and keep documents as artifacts", ErrTooLarge, len(text), MaxTextBytes)
	}
	if !utf8.ValidString(text) {
		return fmt.Errorf("%w: text is not valid UTF-8", ErrInvalid)
	}
	return nil
}

// ValidateK checks a search's or a list's k.
func ValidateK(k int) error {
	if k < 1 || k > MaxSearch {
		return fmt.Errorf("%w: k must be 1..%d, got %d", ErrInvalid, MaxSearch, k)
	}
	return nil
}

// Visible reports whether an item of namespace itemAgent is in a read of ns.Agent (the
// user's shared items are in every agent's reads) and has not expired at now.
func Visible(ns Namespace, itemAgent string, expiresAt, now time.Time) bool {
	if ns.Agent != "" && itemAgent != "" && itemAgent != ns.Agent {
		return false
	}
	return expiresAt.IsZero() || expiresAt.After(now)
}

// Search ranks q's namespace's items as r selects (hybrid by default: the vector and the
// text rankings fused by reciprocal rank fusion, persistence.Fuse's formula). An empty
// q.Text returns the newest items; a nil q.Vector ranks by text only.
func Search(ctx context.Context, s Store, r persistence.Retrieval, q Query) ([]Hit, error) {
	if err := ValidateK(q.K); err != nil {
		return nil, err
	}
	if strings.TrimSpace(q.Text) == "" {
		items, err := s.List(ctx, q.Namespace, q.K)
		if err != nil {
			return nil, err
		}
		out := make([]Hit, len(items))
		for i, it := range items {
			out[i] = Hit{Item: it}
		}
		return out, nil
	}
	mode := r.Mode
	if mode == "" {
		mode = persistence.RetrievalHybrid
	}
	if q.Vector == nil {
		mode = persistence.RetrievalText
	}
	switch mode {
	case persistence.RetrievalVector:
		return s.SearchVector(ctx, q.Namespace, q.Vector, q.K)
	case persistence.RetrievalText:
		return s.SearchText(ctx, q.Namespace, q.Text, q.K)
	}
	depth := r.Depth
	if depth == 0 {
		depth = max(4*q.K, 20)
	}
	depth = min(depth, MaxSearch)
	vh, err := s.SearchVector(ctx, q.Namespace, q.Vector, depth)
	if err != nil {
		return nil, err
	}
	th, err := s.SearchText(ctx, q.Namespace, q.Text, depth)
	if err != nil {
		return nil, err
	}
	vh = slices.DeleteFunc(vh, func(h Hit) bool { return h.Score <= 0 })
	vw, tw := r.VectorWeight, r.TextWeight
	if vw == 0 && tw == 0 {
		vw, tw = 1, 1
	}
	return fuse(q.K, r.RRFK, []float64{vw, tw}, vh, th), nil
}

// fuse is persistence.Fuse over items (keyed by id; ties by id).
func fuse(k, rrfK int, weights []float64, rankings ...[]Hit) []Hit {
	if rrfK <= 0 {
		rrfK = persistence.DefaultRRFK
	}
	scores := map[string]float64{}
	items := map[string]Item{}
	for i, hits := range rankings {
		for r, h := range hits {
			scores[h.ID] += weights[i] / float64(rrfK+r+1)
			if _, ok := items[h.ID]; !ok {
				items[h.ID] = h.Item
			}
		}
	}
	out := make([]Hit, 0, len(scores))
	for id, sc := range scores {
		if sc > 0 {
			out = append(out, Hit{Item: items[id], Score: float32(sc)})
		}
	}
	SortHits(out)
	if len(out) > k {
		out = out[:k]
	}
	return out
}

// SortHits orders hits best first, ties by id.
func SortHits(hits []Hit) {
	slices.SortFunc(hits, func(a, b Hit) int {
		if a.Score != b.Score {
			return cmp.Compare(b.Score, a.Score)
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// SortNewest orders items newest first (UpdatedAt, then id).
func SortNewest(items []Item) {
	slices.SortFunc(items, func(a, b Item) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}
