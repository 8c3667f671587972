// Package ltmtest is the conformance suite every ltm.Store passes: run it from each
// implementation's tests with a constructor of fresh, empty stores.
//
//	func TestConformance(t *testing.T) {
//		ltmtest.Run(t, func(t *testing.T, dims int) ltm.Store { ... })
//	}
package ltmtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/ltm"
)

// Dims is the dimension of the suite's embeddings (hashembed's vectors).
const Dims = 64

// Opener returns a fresh, empty store of dims-dimensional embeddings. The suite closes
// it.
type Opener func(t *testing.T, dims int) ltm.Store

// The suite's namespaces: U is the user whose items the tests read; the others hold
// items under the same ids that U must never reach.
var (
	U           = ltm.Namespace{Tenant: "acme", User: "u-1"}
	OtherUser   = ltm.Namespace{Tenant: "acme", User: "u-2"}
	OtherTenant = ltm.Namespace{Tenant: "globex", User: "u-1"}
)

// Run runs the suite. Each subtest opens its own store.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(*testing.T, ltm.Store)
	}{
		{"PutGetList", testPutGetList},
		{"SizeLimit", testSizeLimit},
		{"EmptyQueryReturnsNewest", testEmptyQuery},
		{"HybridSearch", testHybrid},
		{"NeverAnotherUserOrTenant", testIsolation},
		{"DeleteAndDeleteUser", testDelete},
		{"TTL", testTTL},
		{"AgentNamespace", testAgent},
		{"Validation", testValidation},
		{"Concurrent", testConcurrent},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, Dims)
			t.Cleanup(func() { _ = s.Close() })
			tc.fn(t, s)
		})
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Item returns an item of ns with the text's hashembed embedding, updated at t0+i min.
func Item(ns ltm.Namespace, id, text string, i int) ltm.Item {
	at := t0.Add(time.Duration(i) * time.Minute)
	return ltm.Item{Namespace: ns, ID: id, Text: text, Embedding: hashembed.Vector(text, Dims), CreatedAt: at, UpdatedAt: at,
		Metadata: map[string]string{"kind": "fact"}, SessionID: "s-" + id}
}

func put(t *testing.T, s ltm.Store, its ...ltm.Item) {
	t.Helper()
	for _, it := range its {
		if err := s.Put(context.Background(), it); err != nil {
			t.Fatalf("put %s: %v", it.ID, err)
		}
	}
}

func ids[T ltm.Item | ltm.Hit](xs []T) string {
	var out []string
	for _, x := range xs {
		switch v := any(x).(type) {
		case ltm.Item:
			out = append(out, v.ID)
		case ltm.Hit:
			out = append(out, v.ID)
		}
	}
	return strings.Join(out, ",")
}

func search(t *testing.T, s ltm.Store, mode string, ns ltm.Namespace, text string, k int) []ltm.Hit {
	t.Helper()
	q := ltm.Query{Namespace: ns, Text: text, K: k}
	if text != "" {
		q.Vector = hashembed.Vector(text, Dims)
	}
	hits, err := ltm.Search(context.Background(), s, persistence.Retrieval{Mode: mode}, q)
	if err != nil {
		t.Fatalf("search %q (%s): %v", text, mode, err)
	}
	return hits
}

func testPutGetList(t *testing.T, s ltm.Store) {
	ctx := context.Background()
	put(t, s, Item(U, "a", "The user prefers metric units", 1), Item(U, "b", "The user's dog is called Rex", 2), Item(U, "c", "Deploys go out on Tuesdays", 3))
	got, err := s.Get(ctx, U, "b")
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "The user's dog is called Rex" || got.Metadata["kind"] != "fact" || got.SessionID != "s-b" || !got.CreatedAt.Equal(t0.Add(2*time.Minute)) || len(got.Embedding) != Dims {
		t.Fatalf("get b: %+v", got)
	}
	list, err := s.List(ctx, U, 10)
	if err != nil {
		t.Fatal(err)
	}
	if ids(list) != "c,b,a" {
		t.Fatalf("list: %s, want c,b,a (newest first)", ids(list))
	}
	// Replacing keeps the creation time and moves the item to the front.
	upd := Item(U, "a", "The user prefers imperial units", 9)
	upd.CreatedAt = t0.Add(9 * time.Minute)
	put(t, s, upd)
	got, err = s.Get(ctx, U, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "The user prefers imperial units" || !got.CreatedAt.Equal(t0.Add(time.Minute)) || !got.UpdatedAt.Equal(t0.Add(9*time.Minute)) {
		t.Fatalf("replaced a: %+v", got)
	}
	if list, _ := s.List(ctx, U, 2); ids(list) != "a,c" {
		t.Fatalf("list after replace, limit 2: %s, want a,c", ids(list))
	}
	if _, err := s.Get(ctx, U, "zzz"); !errors.Is(err, ltm.ErrNotFound) {
		t.Fatalf("get unknown: %v, want ErrNotFound", err)
	}
}

func testSizeLimit(t *testing.T, s ltm.Store) {
	big := Item(U, "big", strings.Repeat("x", ltm.MaxTextBytes+1), 1)
	err := s.Put(context.Background(), big)
	if !errors.Is(err, ltm.ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprint(ltm.MaxTextBytes)) {
		t.Fatalf("put of %d bytes: %v, want ErrTooLarge naming the limit", len(big.Text), err)
	}
	ok := Item(U, "max", strings.Repeat("y", ltm.MaxTextBytes), 1)
	put(t, s, ok)
	meta := Item(U, "meta", "fine", 1)
	meta.Metadata = map[string]string{"k": strings.Repeat("v", ltm.MaxMetadataBytes)}
	if err := s.Put(context.Background(), meta); !errors.Is(err, ltm.ErrTooLarge) {
		t.Fatalf("put of large metadata: %v, want ErrTooLarge", err)
	}
	if _, err := s.Get(context.Background(), U, "big"); !errors.Is(err, ltm.ErrNotFound) {
		t.Fatalf("the refused item was stored: %v", err)
	}
}

func testEmptyQuery(t *testing.T, s ltm.Store) {
	for i := range 5 {
		put(t, s, Item(U, fmt.Sprintf("m%d", i), fmt.Sprintf("fact number %d", i), i))
	}
	for _, mode := range []string{"", persistence.RetrievalVector, persistence.RetrievalText} {
		if got := ids(search(t, s, mode, U, "  ", 3)); got != "m4,m3,m2" {
			t.Fatalf("empty query (%q): %s, want the newest m4,m3,m2", mode, got)
		}
	}
}

func testHybrid(t *testing.T, s ltm.Store) {
	put(t, s,
		Item(U, "order", "Order ORD-2024-0042 was shipped to Lisbon", 1),
		Item(U, "pet", "The user has a cat named Miso who likes tuna", 2),
		Item(U, "lang", "The user writes Go and prefers table-driven tests", 3),
		Item(U, "err", "Error E_CONN_RESET happens when the VPN drops", 4),
	)
	for _, mode := range []string{"", persistence.RetrievalText} {
		hits := search(t, s, mode, U, "what happened to ORD-2024-0042?", 2)
		if len(hits) == 0 || hits[0].ID != "order" {
			t.Fatalf("identifier query (%q): %s, want order first", mode, ids(hits))
		}
		if hits := search(t, s, mode, U, "E_CONN_RESET", 4); len(hits) == 0 || hits[0].ID != "err" {
			t.Fatalf("error code (%q): %s, want err first", mode, ids(hits))
		}
	}
	hits := search(t, s, persistence.RetrievalVector, U, "The user has a cat named Miso who likes tuna", 1)
	if len(hits) != 1 || hits[0].ID != "pet" || hits[0].Score < 0.99 {
		t.Fatalf("vector query of a stored text: %+v, want pet at ~1", hits)
	}
	if hits := search(t, s, persistence.RetrievalText, U, "nothing matches zebra", 4); len(hits) != 0 {
		t.Fatalf("text query without a shared term: %s, want none", ids(hits))
	}
	if hits[0].Metadata["kind"] != "fact" || hits[0].Text == "" {
		t.Fatalf("hit without its item: %+v", hits[0])
	}
}

func testIsolation(t *testing.T, s ltm.Store) {
	ctx := context.Background()
	secret := "The launch code is ZEBRA-77"
	put(t, s, Item(OtherUser, "x", secret, 1), Item(OtherTenant, "x", secret, 2), Item(U, "mine", "An unrelated note", 3))
	if _, err := s.Get(ctx, U, "x"); !errors.Is(err, ltm.ErrNotFound) {
		t.Fatalf("get another user's id: %v, want ErrNotFound", err)
	}
	for _, mode := range []string{"", persistence.RetrievalVector, persistence.RetrievalText} {
		for _, q := range []string{secret, "ZEBRA-77", ""} {
			for _, h := range search(t, s, mode, U, q, 10) {
				if h.ID != "mine" {
					t.Fatalf("search %q (%q) under %v returned %+v of another namespace", q, mode, U, h.Item)
				}
			}
		}
	}
	if list, _ := s.List(ctx, U, 10); ids(list) != "mine" {
		t.Fatalf("list: %s, want only mine", ids(list))
	}
	if err := s.Delete(ctx, U, "x"); !errors.Is(err, ltm.ErrNotFound) {
		t.Fatalf("delete another user's id: %v, want ErrNotFound", err)
	}
	if n, err := s.DeleteUser(ctx, U.Tenant, U.User); err != nil || n != 1 {
		t.Fatalf("delete user: %d, %v; want 1", n, err)
	}
	for _, ns := range []ltm.Namespace{OtherUser, OtherTenant} {
		if it, err := s.Get(ctx, ns, "x"); err != nil || it.Text != secret {
			t.Fatalf("%v's item after U's deletes: %+v, %v", ns, it, err)
		}
	}
}

func testDelete(t *testing.T, s ltm.Store) {
	ctx := context.Background()
	put(t, s, Item(U, "a", "Kubernetes cluster prod-eu runs 1.31", 1), Item(U, "b", "Staging is on the cluster stage-us", 2), Item(OtherUser, "a", "Kubernetes cluster prod-eu is theirs", 3))
	if err := s.Delete(ctx, U, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, U, "a"); !errors.Is(err, ltm.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	for _, mode := range []string{persistence.RetrievalVector, persistence.RetrievalText, ""} {
		for _, h := range search(t, s, mode, U, "Kubernetes cluster prod-eu", 5) {
			if h.ID == "a" {
				t.Fatalf("deleted item found (%q)", mode)
			}
		}
	}
	put(t, s, Item(U, "c", "third", 4))
	if n, err := s.DeleteUser(ctx, U.Tenant, U.User); err != nil || n != 2 {
		t.Fatalf("delete user: %d, %v; want 2", n, err)
	}
	if list, _ := s.List(ctx, U, 10); len(list) != 0 {
		t.Fatalf("after delete user: %s", ids(list))
	}
	if hits := search(t, s, persistence.RetrievalText, U, "Staging cluster", 5); len(hits) != 0 {
		t.Fatalf("text index kept a deleted user's items: %s", ids(hits))
	}
	if n, err := s.DeleteUser(ctx, U.Tenant, U.User); err != nil || n != 0 {
		t.Fatalf("delete user again: %d, %v", n, err)
	}
	if list, _ := s.List(ctx, OtherUser, 10); ids(list) != "a" {
		t.Fatalf("other user's items: %s", ids(list))
	}
}

func testTTL(t *testing.T, s ltm.Store) {
	ctx := context.Background()
	old := Item(U, "old", "A short-lived fact about tokens", 1)
	old.ExpiresAt = time.Now().Add(-time.Minute)
	live := Item(U, "live", "A lasting fact about tokens", 2)
	live.ExpiresAt = time.Now().Add(time.Hour)
	put(t, s, old, live, Item(U, "forever", "A fact about tokens without expiry", 3))
	if _, err := s.Get(ctx, U, "old"); !errors.Is(err, ltm.ErrNotFound) {
		t.Fatalf("get expired: %v, want ErrNotFound", err)
	}
	for _, mode := range []string{"", persistence.RetrievalText, persistence.RetrievalVector} {
		for _, q := range []string{"", "fact about tokens"} {
			for _, h := range search(t, s, mode, U, q, 10) {
				if h.ID == "old" {
					t.Fatalf("expired item found by %q (%q)", q, mode)
				}
			}
		}
	}
	got, err := s.Get(ctx, U, "live")
	if err != nil || got.ExpiresAt.Sub(live.ExpiresAt).Abs() > time.Millisecond {
		t.Fatalf("live item: %+v, %v", got, err)
	}
	if n, err := s.PurgeExpired(ctx, time.Now()); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v; want 1", n, err)
	}
	if n, err := s.PurgeExpired(ctx, time.Now().Add(2*time.Hour)); err != nil || n != 1 {
		t.Fatalf("purge later: %d, %v; want 1 (live)", n, err)
	}
	if list, _ := s.List(ctx, U, 10); ids(list) != "forever" {
		t.Fatalf("after purges: %s", ids(list))
	}
}

func testAgent(t *testing.T, s ltm.Store) {
	coder := U
	coder.Agent = "coder"
	writer := U
	writer.Agent = "writer"
	put(t, s, Item(U, "shared", "The user is called Ada", 1), Item(coder, "c", "Use gofmt", 2), Item(writer, "w", "Use British spelling", 3))
	if got := ids(search(t, s, "", coder, "", 10)); got != "c,shared" {
		t.Fatalf("coder's view: %s, want c,shared", got)
	}
	if got := ids(search(t, s, "", U, "", 10)); got != "w,c,shared" {
		t.Fatalf("user's view: %s, want every item", got)
	}
	if _, err := s.Get(context.Background(), coder, "w"); !errors.Is(err, ltm.ErrNotFound) {
		t.Fatalf("coder reads the writer's item: %v", err)
	}
}

func testValidation(t *testing.T, s ltm.Store) {
	ctx := context.Background()
	for name, it := range map[string]ltm.Item{
		"no user":    Item(ltm.Namespace{Tenant: "acme"}, "a", "x", 1),
		"bad tenant": Item(ltm.Namespace{Tenant: "Not A Tenant!", User: "u"}, "a", "x", 1),
		"no id":      Item(U, "", "x", 1),
		"no text":    Item(U, "a", "  ", 1),
		"bad dims":   {Namespace: U, ID: "a", Text: "x", Embedding: []float32{1, 2}},
	} {
		if err := s.Put(ctx, it); !errors.Is(err, ltm.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := s.List(ctx, U, 0); !errors.Is(err, ltm.ErrInvalid) {
		t.Errorf("list 0: %v", err)
	}
	if _, err := s.SearchVector(ctx, U, []float32{1}, 3); !errors.Is(err, ltm.ErrInvalid) {
		t.Errorf("search with a short vector: %v", err)
	}
	if _, err := s.DeleteUser(ctx, "acme", ""); !errors.Is(err, ltm.ErrInvalid) {
		t.Errorf("delete user '': %v", err)
	}
}

// testConcurrent: users saving and searching at once each end with exactly their own
// items.
func testConcurrent(t *testing.T, s ltm.Store) {
	const users, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, users)
	for u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns := ltm.Namespace{Tenant: "acme", User: fmt.Sprintf("c-%d", u)}
			for i := range each {
				if err := s.Put(context.Background(), Item(ns, fmt.Sprintf("m%d", i), fmt.Sprintf("fact %d of user %d", i, u), i)); err != nil {
					errs <- err
					return
				}
				if _, err := ltm.Search(context.Background(), s, persistence.Retrieval{}, ltm.Query{Namespace: ns, Text: "fact", Vector: hashembed.Vector("fact", Dims), K: 5}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for u := range users {
		ns := ltm.Namespace{Tenant: "acme", User: fmt.Sprintf("c-%d", u)}
		list, err := s.List(context.Background(), ns, 100)
		if err != nil || len(list) != each {
			t.Fatalf("user %d: %d items, %v", u, len(list), err)
		}
		for _, it := range list {
			if !strings.HasSuffix(it.Text, fmt.Sprintf("of user %d", u)) {
				t.Fatalf("user %d holds %q", u, it.Text)
			}
		}
	}
}

func testClose(t *testing.T, s ltm.Store) {
	put(t, s, Item(U, "a", "x", 1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(context.Background(), U, 1); !errors.Is(err, ltm.ErrClosed) {
		t.Fatalf("list after close: %v", err)
	}
	if err := s.Close(); !errors.Is(err, ltm.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
}
