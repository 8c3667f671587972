// Package ltmbolt is the embedded ltm.Store: items are kept in a bbolt file (by default
// memories.db in the node's data directory, beside the journal) and indexed in memory
// per tenant and user, loaded when the store opens. A search scans the user's items:
// cosine similarity on the normalised embeddings, BM25 over their terms
// (persistence.Tokenize). A user's memories are a few hundred facts, not a corpus.
package ltmbolt

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/ltm"
	"github.com/fathom-agents/fathom/persistence/vectormem"
)

// File is the store's file name in a node's data directory.
const File = "memories.db"

// bucket holds the items, keyed by key(tenant, user, id).
var bucket = []byte("memories")

// Store is the embedded memory store.
type Store struct {
	dims int
	db   *bolt.DB

	mu     sync.RWMutex
	users  map[userKey]map[string]*entry
	closed bool
}

var _ ltm.Store = (*Store)(nil)

// userKey names a tenant's user.
type userKey struct{ tenant, user string }

// entry is an item with its terms (for BM25).
type entry struct {
	item  ltm.Item
	terms map[string]int
	n     int
}

// record is an item as the file keeps it.
type record struct {
	Tenant    string            `json:"tenant"`
	User      string            `json:"user"`
	Agent     string            `json:"agent,omitempty"`
	ID        string            `json:"id"`
	Text      string            `json:"text"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Embedding []float32         `json:"embedding"`
	SessionID string            `json:"session_id,omitempty"`
	Created   int64             `json:"created"`
	Updated   int64             `json:"updated"`
	Expires   int64             `json:"expires,omitempty"`
}

// Open opens (creating) the store's file at path for dims-dimensional embeddings and
// loads its items.
func Open(path string, dims int) (*Store, error) {
	if dims < 1 {
		return nil, fmt.Errorf("ltmbolt: %w: dimensions must be positive, got %d", ltm.ErrInvalid, dims)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("ltmbolt: open %s: %w", path, err)
	}
	s := &Store{dims: dims, db: db, users: map[userKey]map[string]*entry{}}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		return b.ForEach(func(_, v []byte) error {
			var r record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("decode item: %w", err)
			}
			if len(r.Embedding) != dims {
				return fmt.Errorf("item %s of user %s has %d dimensions, the store %d: the embedder changed; delete %s to start afresh", r.ID, r.User, len(r.Embedding), dims, path)
			}
			s.index(fromRecord(r))
			return nil
		})
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("ltmbolt: load %s: %w", path, err)
	}
	return s, nil
}

func key(tenant, user, id string) []byte {
	return []byte(tenant + "\x00" + user + "\x00" + id)
}

func toRecord(it ltm.Item) record {
	r := record{Tenant: it.Tenant, User: it.User, Agent: it.Agent, ID: it.ID, Text: it.Text, Metadata: it.Metadata,
		Embedding: it.Embedding, SessionID: it.SessionID, Created: it.CreatedAt.UnixNano(), Updated: it.UpdatedAt.UnixNano()}
	if !it.ExpiresAt.IsZero() {
		r.Expires = it.ExpiresAt.UnixNano()
	}
	return r
}

func fromRecord(r record) ltm.Item {
	it := ltm.Item{Namespace: ltm.Namespace{Tenant: r.Tenant, User: r.User, Agent: r.Agent}, ID: r.ID, Text: r.Text,
		Metadata: r.Metadata, Embedding: r.Embedding, SessionID: r.SessionID,
		CreatedAt: time.Unix(0, r.Created).UTC(), UpdatedAt: time.Unix(0, r.Updated).UTC()}
	if r.Expires != 0 {
		it.ExpiresAt = time.Unix(0, r.Expires).UTC()
	}
	return it
}

// index puts it in the in-memory index (s.mu held or not yet shared).
func (s *Store) index(it ltm.Item) {
	k := userKey{it.Tenant, it.User}
	m := s.users[k]
	if m == nil {
		m = map[string]*entry{}
		s.users[k] = m
	}
	terms := persistence.Tokenize(it.Text)
	e := &entry{item: it, terms: map[string]int{}, n: len(terms)}
	for _, t := range terms {
		e.terms[t]++
	}
	m[it.ID] = e
}

// Dimensions implements ltm.Store.
func (s *Store) Dimensions() int { return s.dims }

func (s *Store) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed {
		return ltm.ErrClosed
	}
	return nil
}

// Put implements ltm.Store.
func (s *Store) Put(ctx context.Context, it ltm.Item) error {
	if err := ltm.ValidateItem(it, s.dims); err != nil {
		return fmt.Errorf("ltmbolt: put: %w", err)
	}
	it.Metadata = maps.Clone(it.Metadata)
	it.Embedding = persistence.Normalize(it.Embedding)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("ltmbolt: put: %w", err)
	}
	if old, ok := s.users[userKey{it.Tenant, it.User}][it.ID]; ok {
		it.CreatedAt = old.item.CreatedAt
	}
	v, err := json.Marshal(toRecord(it))
	if err != nil {
		return fmt.Errorf("ltmbolt: put: %w", err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Put(key(it.Tenant, it.User, it.ID), v)
	}); err != nil {
		return fmt.Errorf("ltmbolt: put: %w", err)
	}
	s.index(it)
	return nil
}

// Get implements ltm.Store.
func (s *Store) Get(ctx context.Context, ns ltm.Namespace, id string) (ltm.Item, error) {
	if err := ltm.ValidateNamespace(ns); err != nil {
		return ltm.Item{}, fmt.Errorf("ltmbolt: get: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return ltm.Item{}, fmt.Errorf("ltmbolt: get: %w", err)
	}
	e, ok := s.users[userKey{ns.Tenant, ns.User}][id]
	if !ok || !ltm.Visible(ns, e.item.Agent, e.item.ExpiresAt, time.Now()) {
		return ltm.Item{}, fmt.Errorf("ltmbolt: get %s: %w", id, ltm.ErrNotFound)
	}
	return copyItem(e.item), nil
}

func copyItem(it ltm.Item) ltm.Item {
	it.Metadata = maps.Clone(it.Metadata)
	it.Embedding = append([]float32(nil), it.Embedding...)
	return it
}

// Delete implements ltm.Store.
func (s *Store) Delete(ctx context.Context, ns ltm.Namespace, id string) error {
	if err := ltm.ValidateNamespace(ns); err != nil {
		return fmt.Errorf("ltmbolt: delete: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("ltmbolt: delete: %w", err)
	}
	uk := userKey{ns.Tenant, ns.User}
	e, ok := s.users[uk][id]
	if !ok || !ltm.Visible(ns, e.item.Agent, e.item.ExpiresAt, time.Now()) {
		return fmt.Errorf("ltmbolt: delete %s: %w", id, ltm.ErrNotFound)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Delete(key(ns.Tenant, ns.User, id)) }); err != nil {
		return fmt.Errorf("ltmbolt: delete: %w", err)
	}
	delete(s.users[uk], id)
	return nil
}

// DeleteUser implements ltm.Store.
func (s *Store) DeleteUser(ctx context.Context, tenant, user string) (int, error) {
	if err := ltm.ValidateNamespace(ltm.Namespace{Tenant: tenant, User: user}); err != nil {
		return 0, fmt.Errorf("ltmbolt: delete user: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return 0, fmt.Errorf("ltmbolt: delete user: %w", err)
	}
	uk := userKey{tenant, user}
	m := s.users[uk]
	if err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for id := range m {
			if err := b.Delete(key(tenant, user, id)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("ltmbolt: delete user: %w", err)
	}
	delete(s.users, uk)
	return len(m), nil
}

// visible returns the namespace's readable entries.
func (s *Store) visible(ns ltm.Namespace) []*entry {
	now := time.Now()
	m := s.users[userKey{ns.Tenant, ns.User}]
	out := make([]*entry, 0, len(m))
	for _, e := range m {
		if ltm.Visible(ns, e.item.Agent, e.item.ExpiresAt, now) {
			out = append(out, e)
		}
	}
	return out
}

// List implements ltm.Store.
func (s *Store) List(ctx context.Context, ns ltm.Namespace, limit int) ([]ltm.Item, error) {
	if err := ltm.ValidateNamespace(ns); err != nil {
		return nil, fmt.Errorf("ltmbolt: list: %w", err)
	}
	if err := ltm.ValidateK(limit); err != nil {
		return nil, fmt.Errorf("ltmbolt: list: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("ltmbolt: list: %w", err)
	}
	es := s.visible(ns)
	items := make([]ltm.Item, len(es))
	for i, e := range es {
		items[i] = e.item
	}
	ltm.SortNewest(items)
	if len(items) > limit {
		items = items[:limit]
	}
	for i := range items {
		items[i] = copyItem(items[i])
	}
	return items, nil
}

// SearchVector implements ltm.Store: an exact scan.
func (s *Store) SearchVector(ctx context.Context, ns ltm.Namespace, vec []float32, k int) ([]ltm.Hit, error) {
	if err := ltm.ValidateNamespace(ns); err != nil {
		return nil, fmt.Errorf("ltmbolt: search: %w", err)
	}
	if err := ltm.ValidateK(k); err != nil {
		return nil, fmt.Errorf("ltmbolt: search: %w", err)
	}
	if err := persistence.ValidateVector(vec, s.dims); err != nil {
		return nil, fmt.Errorf("ltmbolt: search: %w: %v", ltm.ErrInvalid, err)
	}
	q := persistence.Normalize(vec)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("ltmbolt: search: %w", err)
	}
	es := s.visible(ns)
	hits := make([]ltm.Hit, len(es))
	for i, e := range es {
		hits[i] = ltm.Hit{Item: e.item, Score: vectormem.Dot(e.item.Embedding, q)}
	}
	return top(hits, k), nil
}

// top sorts hits, keeps k and copies them out.
func top(hits []ltm.Hit, k int) []ltm.Hit {
	ltm.SortHits(hits)
	if len(hits) > k {
		hits = hits[:k]
	}
	for i := range hits {
		hits[i].Item = copyItem(hits[i].Item)
	}
	return hits
}

// The BM25 parameters (those of persistence/vectormem).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// SearchText implements ltm.Store: BM25 over the user's visible items.
func (s *Store) SearchText(ctx context.Context, ns ltm.Namespace, text string, k int) ([]ltm.Hit, error) {
	if err := ltm.ValidateNamespace(ns); err != nil {
		return nil, fmt.Errorf("ltmbolt: search text: %w", err)
	}
	if err := ltm.ValidateK(k); err != nil {
		return nil, fmt.Errorf("ltmbolt: search text: %w", err)
	}
	terms := persistence.QueryTerms(text)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("ltmbolt: search text: %w", err)
	}
	es := s.visible(ns)
	if len(es) == 0 || len(terms) == 0 {
		return nil, nil
	}
	total := 0
	for _, e := range es {
		total += e.n
	}
	if total == 0 {
		return nil, nil
	}
	avg := float64(total) / float64(len(es))
	scores := make([]float64, len(es))
	seen := map[string]bool{}
	for _, t := range terms {
		if seen[t] {
			continue
		}
		seen[t] = true
		df := 0
		for _, e := range es {
			if e.terms[t] > 0 {
				df++
			}
		}
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (float64(len(es))-float64(df)+0.5)/(float64(df)+0.5))
		for i, e := range es {
			tf := float64(e.terms[t])
			if tf == 0 {
				continue
			}
			norm := bm25K1 * (1 - bm25B + bm25B*float64(e.n)/avg)
			scores[i] += idf * tf * (bm25K1 + 1) / (tf + norm)
		}
	}
	var hits []ltm.Hit
	for i, e := range es {
		if scores[i] > 0 {
			hits = append(hits, ltm.Hit{Item: e.item, Score: float32(scores[i])})
		}
	}
	return top(hits, k), nil
}

// PurgeExpired implements ltm.Store.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return 0, fmt.Errorf("ltmbolt: purge: %w", err)
	}
	type gone struct {
		uk userKey
		id string
	}
	var del []gone
	for uk, m := range s.users {
		for id, e := range m {
			if !e.item.ExpiresAt.IsZero() && !e.item.ExpiresAt.After(now) {
				del = append(del, gone{uk, id})
			}
		}
	}
	if len(del) == 0 {
		return 0, nil
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for _, g := range del {
			if err := b.Delete(key(g.uk.tenant, g.uk.user, g.id)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("ltmbolt: purge: %w", err)
	}
	for _, g := range del {
		delete(s.users[g.uk], g.id)
	}
	return len(del), nil
}

// Close implements ltm.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("ltmbolt: close: %w", ltm.ErrClosed)
	}
	s.closed, s.users = true, nil
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("ltmbolt: close: %w", err)
	}
	return nil
}
