package vectortest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/fathom-agents/fathom/persistence"
)

// testStoredSeqs: a store is a persistence.VectorSeqs whose StoredSeqs lists a stream's
// seqs in increasing order, once each (an upsert replacing a seq adds none), all of
// them or only those among the asked ones, under the tenant only; an unknown stream,
// an empty among and a deleted stream have none; bad arguments and a closed store fail.
func testStoredSeqs(t *testing.T, open Opener) {
	s := openStore(t, open, 2)
	vs, ok := s.(persistence.VectorSeqs)
	if !ok {
		t.Fatalf("%T is not a persistence.VectorSeqs", s)
	}
	ctx := context.Background()
	put := func(tenant, stream string, seqs ...uint64) {
		t.Helper()
		vecs := make([]persistence.Vector, len(seqs))
		for i, seq := range seqs {
			vecs[i] = persistence.Vector{Seq: seq, Values: []float32{1, float32(seq)}}
		}
		if err := s.Upsert(ctx, tenant, stream, vecs); err != nil {
			t.Fatal(err)
		}
	}
	check := func(tenant, stream string, among, want []uint64) {
		t.Helper()
		got, err := vs.StoredSeqs(ctx, tenant, stream, among)
		if err != nil {
			t.Fatalf("stored seqs of %s/%s among %v: %v", tenant, stream, among, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("stored seqs of %s/%s among %v = %v, want %v", tenant, stream, among, got, want)
		}
	}
	put(Tenant, "s", 7, 3, 12, 1)
	put(Tenant, "s", 3) // replaces
	put(Tenant, "other", 2)
	put(OtherTenant, "s", 5)
	check(Tenant, "s", nil, []uint64{1, 3, 7, 12})
	check(Tenant, "s", []uint64{12, 2, 3, 99, 3}, []uint64{3, 12})
	check(Tenant, "s", []uint64{}, nil)
	check(Tenant, "unknown", nil, nil)
	check(OtherTenant, "s", nil, []uint64{5})
	check(OtherTenant, "other", nil, nil)
	if err := s.DeleteStream(ctx, Tenant, "s"); err != nil {
		t.Fatal(err)
	}
	check(Tenant, "s", nil, nil)
	check(Tenant, "other", nil, []uint64{2})
	for _, c := range []struct{ tenant, stream string }{{Tenant, ""}, {"", "s"}, {"no spaces", "s"}} {
		if _, err := vs.StoredSeqs(ctx, c.tenant, c.stream, nil); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("stored seqs of %q/%q: %v, want ErrInvalid", c.tenant, c.stream, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := vs.StoredSeqs(ctx, Tenant, "other", nil); !errors.Is(err, persistence.ErrClosed) {
		t.Fatalf("stored seqs after close: %v, want ErrClosed", err)
	}
}
