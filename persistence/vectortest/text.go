package vectortest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/persistence"
)

// textStore opens a store that must be a persistence.TextSearcher.
func textStore(t *testing.T, open Opener, dims int) persistence.TextSearcher {
	t.Helper()
	s := openStore(t, open, dims)
	ts, ok := s.(persistence.TextSearcher)
	if !ok {
		t.Fatalf("%T is not a persistence.TextSearcher", s)
	}
	return ts
}

// textSession is a session's messages, each with a vector of its own (unit axis i) so
// that vector ranking is known, and identifiers of every kind in its text.
var textSession = []string{
	"Hi, I need help with an order that never arrived.",
	"Sure. Can you give me the order number?",
	"It is ORD-2024-0042, placed on March 3rd.",
	"The payment webhook failed with E_CONN_RESET while calling the carrier API.",
	"The retry logic lives in internal/node/memory.go, in the function handleWebhookRetry.",
	"We also saw HTTP 503 from api.carrier.example.com:8443 during the outage.",
	"The customer asked whether the parcel could be delivered to a neighbour instead.",
	"Ticket #4471 tracks the refund; the refund was approved yesterday.",
}

func upsertTexts(t *testing.T, s persistence.VectorStore, tenant, stream string, texts []string) {
	t.Helper()
	dims := s.Dimensions()
	vecs := make([]persistence.Vector, len(texts))
	for i, text := range texts {
		v := make([]float32, dims)
		v[i%dims] = 1
		vecs[i] = persistence.Vector{Seq: uint64(i + 1), Values: v, Text: text, Meta: map[string]string{"i": text[:8]}}
	}
	if err := s.Upsert(context.Background(), tenant, stream, vecs); err != nil {
		t.Fatal(err)
	}
}

func searchText(t *testing.T, s persistence.TextSearcher, tenant, stream, q string, k int) []persistence.VectorHit {
	t.Helper()
	hits, err := s.SearchText(context.Background(), tenant, stream, q, k)
	if err != nil {
		t.Fatalf("search text %q: %v", q, err)
	}
	for i := 1; i < len(hits); i++ {
		if hits[i].Score > hits[i-1].Score || (hits[i].Score == hits[i-1].Score && hits[i].Seq < hits[i-1].Seq) {
			t.Fatalf("search text %q: hits out of order: %+v", q, hits)
		}
	}
	return hits
}

// testTextIdentifiers: identifiers (an order id, an error code, a file path, a function
// name, a host:port, a ticket number) are found whole, as are their parts and plain
// words; a message without any query term is no hit.
func testTextIdentifiers(t *testing.T, open Opener) {
	s := textStore(t, open, 8)
	upsertTexts(t, s, Tenant, "s", textSession)
	for _, tc := range []struct {
		query string
		want  uint64
	}{
		{"ORD-2024-0042", 3},
		{"what happened to order ORD-2024-0042?", 3},
		{"E_CONN_RESET", 4},
		{"why did we get e_conn_reset", 4},
		{"internal/node/memory.go", 5},
		{"memory.go", 5},
		{"handleWebhookRetry", 5},
		{"where is webhook retry handled", 5},
		{"api.carrier.example.com:8443", 6},
		{"#4471", 8},
		{"deliver parcel to neighbour", 7},
		{"refunds approved", 8},
	} {
		hits := searchText(t, s, Tenant, "s", tc.query, 3)
		if len(hits) == 0 || hits[0].Seq != tc.want {
			t.Errorf("search text %q: want message %d first, got %+v", tc.query, tc.want, hits)
		}
		if len(hits) > 0 && hits[0].Meta["i"] != textSession[tc.want-1][:8] {
			t.Errorf("search text %q: meta %v", tc.query, hits[0].Meta)
		}
	}
	// Decoys that share an identifier's parts: the whole identifier decides.
	upsertTexts(t, s, Tenant, "ids", []string{
		"ORD-2024-0043 and ORD-2023-0042, both 2024 orders.",
		"ORD-2024-0042 is the one stuck in customs at the border since the paperwork for the shipment was incomplete and the broker is away.",
		"The handler is processWebhookRetry in internal/sync/client.go.",
		"E_CONN_TIMEOUT after a reset of the conn pool.",
		"The gateway logged E_CONN_RESET twice while the upstream restarted and the health checks flapped for about a minute.",
	})
	for _, tc := range []struct {
		query string
		want  uint64
	}{
		{"ORD-2024-0042", 2},
		{"webhook", 3},
		{"E_CONN_RESET", 5},
	} {
		if hits := searchText(t, s, Tenant, "ids", tc.query, 3); len(hits) == 0 || hits[0].Seq != tc.want {
			t.Errorf("search text %q among look-alikes: want message %d first, got %+v", tc.query, tc.want, hits)
		}
	}
	if hits := searchText(t, s, Tenant, "s", "zebra quantum", 8); len(hits) != 0 {
		t.Errorf("no message has the terms, got %+v", hits)
	}
	if hits := searchText(t, s, Tenant, "s", "the and of ...", 8); len(hits) != 0 {
		t.Errorf("a query of stop words has no terms, got %+v", hits)
	}
	if hits := searchText(t, s, Tenant, "nope", "ORD-2024-0042", 8); len(hits) != 0 {
		t.Errorf("unknown stream: %+v", hits)
	}
}

// testTextDelete: an upsert of the same seq replaces its text; DeleteStream removes the
// text with the vectors.
func testTextDelete(t *testing.T, open Opener) {
	s := textStore(t, open, 8)
	ctx := context.Background()
	upsertTexts(t, s, Tenant, "s", textSession)
	upsertTexts(t, s, Tenant, "t", textSession)
	if err := s.Upsert(ctx, Tenant, "s", []persistence.Vector{{Seq: 3, Values: []float32{0, 0, 1, 0, 0, 0, 0, 0}, Text: "It is ORD-2025-7777 now."}}); err != nil {
		t.Fatal(err)
	}
	if hits := searchText(t, s, Tenant, "s", "placed March 3rd", 8); len(hits) != 0 {
		t.Errorf("replaced text still found: %+v", hits)
	}
	if hits := searchText(t, s, Tenant, "s", "ORD-2024-0042", 8); len(hits) != 0 && hits[0].Seq == 3 && hits[0].Score >= searchText(t, s, Tenant, "t", "ORD-2024-0042", 8)[0].Score {
		t.Errorf("replaced identifier still matches whole: %+v", hits)
	}
	if hits := searchText(t, s, Tenant, "s", "ORD-2025-7777", 8); len(hits) != 1 || hits[0].Seq != 3 {
		t.Errorf("replacing text: %+v", hits)
	}
	if err := s.DeleteStream(ctx, Tenant, "s"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"ORD-2025-7777", "E_CONN_RESET", "refund"} {
		if hits := searchText(t, s, Tenant, "s", q, 8); len(hits) != 0 {
			t.Errorf("deleted stream's text found by %q: %+v", q, hits)
		}
	}
	if hits := searchText(t, s, Tenant, "t", "E_CONN_RESET", 8); len(hits) != 1 || hits[0].Seq != 4 {
		t.Errorf("another stream's text after the delete: %+v", hits)
	}
}

// testTextQueryBound: a query is searched by its first persistence.MaxQueryTerms
// distinct terms: a term after them finds nothing, the same term among them finds its
// message, and a query of a hundred thousand distinct terms is answered (by the first
// ones) like a short one.
func testTextQueryBound(t *testing.T, open Opener) {
	s := textStore(t, open, 8)
	upsertTexts(t, s, Tenant, "s", textSession)
	var filler []string
	for i := range persistence.MaxQueryTerms {
		filler = append(filler, fmt.Sprintf("zq%dx", i)) // terms no message holds
	}
	if hits := searchText(t, s, Tenant, "s", strings.Join(filler, " ")+" E_CONN_RESET", 8); len(hits) != 0 {
		t.Errorf("a term after the first %d distinct ones was searched: %+v", persistence.MaxQueryTerms, hits)
	}
	if hits := searchText(t, s, Tenant, "s", "E_CONN_RESET "+strings.Join(filler[1:], " "), 8); len(hits) != 1 || hits[0].Seq != 4 {
		t.Errorf("a term among the first %d distinct ones: %+v, want message 4", persistence.MaxQueryTerms, hits)
	}
	var long strings.Builder
	long.WriteString("ORD-2024-0042")
	for i := range 100_000 {
		fmt.Fprintf(&long, " zq%dx", i)
	}
	if hits := searchText(t, s, Tenant, "s", long.String(), 8); len(hits) != 1 || hits[0].Seq != 3 {
		t.Errorf("a query of 100,000 distinct terms: %+v, want message 3", hits)
	}
}

// testTextTenants: a tenant's text is never found through another tenant's keys, even
// under the same stream id, and deleting one tenant's stream keeps the other's.
func testTextTenants(t *testing.T, open Opener) {
	s := textStore(t, open, 8)
	ctx := context.Background()
	upsertTexts(t, s, Tenant, "s", textSession)
	if hits := searchText(t, s, OtherTenant, "s", "ORD-2024-0042", 8); len(hits) != 0 {
		t.Fatalf("tenant %s finds tenant %s's text: %+v", OtherTenant, Tenant, hits)
	}
	upsertTexts(t, s, OtherTenant, "s", []string{"nothing to see", "still nothing", "ORD-9999-0001"})
	if hits := searchText(t, s, OtherTenant, "s", "E_CONN_RESET neighbour refund", 8); len(hits) != 0 {
		t.Fatalf("tenant %s finds tenant %s's text: %+v", OtherTenant, Tenant, hits)
	}
	if err := s.DeleteStream(ctx, OtherTenant, "s"); err != nil {
		t.Fatal(err)
	}
	if hits := searchText(t, s, Tenant, "s", "ORD-2024-0042", 8); len(hits) == 0 || hits[0].Seq != 3 {
		t.Fatalf("tenant %s's text after tenant %s's delete: %+v", Tenant, OtherTenant, hits)
	}
	if hits := searchText(t, s, OtherTenant, "s", "ORD-9999-0001", 8); len(hits) != 0 {
		t.Fatalf("tenant %s's deleted text: %+v", OtherTenant, hits)
	}
}

// testTextValidation: bad arguments and a closed store.
func testTextValidation(t *testing.T, open Opener) {
	s := textStore(t, open, 2)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"empty tenant", func() error { _, err := s.SearchText(ctx, "", "s", "x", 1); return err }()},
		{"empty stream", func() error { _, err := s.SearchText(ctx, Tenant, "", "x", 1); return err }()},
		{"k 0", func() error { _, err := s.SearchText(ctx, Tenant, "s", "x", 0); return err }()},
	} {
		if !errors.Is(tc.err, persistence.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", tc.name, tc.err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SearchText(ctx, Tenant, "s", "x", 1); !errors.Is(err, persistence.ErrClosed) {
		t.Errorf("search text after close: %v", err)
	}
}

// testRetrievalModes: persistence.HybridSearch ranks by the vectors (vector), by the
// text (text) or by both fused (hybrid): the fused ranking has the best hit of each.
func testRetrievalModes(t *testing.T, open Opener) {
	s := textStore(t, open, 8)
	ctx := context.Background()
	upsertTexts(t, s, Tenant, "s", textSession)
	// The query vector points at message 2 (axis 1), a bit at 1; the text names message 4.
	vec := []float32{0.3, 1, 0, 0, 0, 0, 0, 0}
	text := "E_CONN_RESET"
	run := func(r persistence.Retrieval) []persistence.VectorHit {
		t.Helper()
		hits, err := persistence.HybridSearch(ctx, s, r, Tenant, "s", text, vec, 2)
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		return hits
	}
	if h := run(persistence.Retrieval{Mode: persistence.RetrievalVector}); len(h) != 2 || h[0].Seq != 2 || h[1].Seq != 1 {
		t.Errorf("vector: %+v", h)
	}
	if h := run(persistence.Retrieval{Mode: persistence.RetrievalText}); len(h) != 1 || h[0].Seq != 4 {
		t.Errorf("text: %+v", h)
	}
	h := run(persistence.Retrieval{})
	if len(h) != 2 || !((h[0].Seq == 2 && h[1].Seq == 4) || (h[0].Seq == 4 && h[1].Seq == 2)) {
		t.Errorf("hybrid (default): want messages 2 and 4, got %+v", h)
	}
	// Weights decide between the two rankings' best hits.
	if h := run(persistence.Retrieval{Mode: persistence.RetrievalHybrid, VectorWeight: 1, TextWeight: 3}); len(h) == 0 || h[0].Seq != 4 {
		t.Errorf("hybrid, text weighted: %+v", h)
	}
	if h := run(persistence.Retrieval{Mode: persistence.RetrievalHybrid, VectorWeight: 3, TextWeight: 1}); len(h) == 0 || h[0].Seq != 2 {
		t.Errorf("hybrid, vector weighted: %+v", h)
	}
	// Deleted: no mode finds anything.
	if err := s.DeleteStream(ctx, Tenant, "s"); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{persistence.RetrievalVector, persistence.RetrievalText, persistence.RetrievalHybrid} {
		if h := run(persistence.Retrieval{Mode: m}); len(h) != 0 {
			t.Errorf("%s after delete: %+v", m, h)
		}
	}
	// Another tenant sees nothing in any mode.
	upsertTexts(t, s, Tenant, "s", textSession)
	for _, m := range []string{persistence.RetrievalVector, persistence.RetrievalText, persistence.RetrievalHybrid} {
		hits, err := persistence.HybridSearch(ctx, s, persistence.Retrieval{Mode: m}, OtherTenant, "s", text, vec, 5)
		if err != nil || len(hits) != 0 {
			t.Errorf("%s, other tenant: %+v %v", m, hits, err)
		}
	}
}
