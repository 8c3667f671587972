package ltmbolt_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/fathom-agents/fathom/persistence/ltm"
	"github.com/fathom-agents/fathom/persistence/ltm/ltmbolt"
	"github.com/fathom-agents/fathom/persistence/ltm/ltmtest"
)

func TestConformance(t *testing.T) {
	ltmtest.Run(t, func(t *testing.T, dims int) ltm.Store {
		s, err := ltmbolt.Open(filepath.Join(t.TempDir(), ltmbolt.File), dims)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestItemsOutliveTheProcess: what a store saved, and what it deleted, is as it was
// when the file is opened again (a node restart).
func TestItemsOutliveTheProcess(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), ltmbolt.File)
	s, err := ltmbolt.Open(path, ltmtest.Dims)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range []ltm.Item{ltmtest.Item(ltmtest.U, "a", "Order ORD-1 shipped", 1), ltmtest.Item(ltmtest.U, "b", "gone soon", 2)} {
		if err := s.Put(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, ltmtest.U, "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = ltmbolt.Open(path, ltmtest.Dims)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hits, err := s.SearchText(ctx, ltmtest.U, "ORD-1", 5)
	if err != nil || len(hits) != 1 || hits[0].ID != "a" || hits[0].Metadata["kind"] != "fact" {
		t.Fatalf("after reopening: %+v, %v", hits, err)
	}
	if list, _ := s.List(ctx, ltmtest.U, 10); len(list) != 1 {
		t.Fatalf("deleted item came back: %d items", len(list))
	}
	if _, err := ltmbolt.Open(path+"2", 0); err == nil {
		t.Fatal("0 dimensions accepted")
	}
}
