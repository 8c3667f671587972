package journaltest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/journaltest"
	"github.com/fathom-agents/fathom/persistence/memjournal"
)

// TestFaultyWithoutFaultsConforms: with no fault set, the wrapper is the journal it
// wraps, every capability included.
func TestFaultyWithoutFaultsConforms(t *testing.T) {
	s := memjournal.NewStore(memjournal.Options{Facts: journaltest.Facts})
	journaltest.Run(t, func(t *testing.T) persistence.Journal { return journaltest.NewFaulty(s.Open()) })
}

func TestFaultyInjectsFaults(t *testing.T) {
	ctx := context.Background()
	rec := []persistence.Record{{Type: "t", Data: []byte("x")}}
	f := journaltest.NewFaulty(memjournal.New(memjournal.Options{}))
	stored := func() uint64 {
		t.Helper()
		last, err := f.Inner().LastSeq(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		return last
	}

	// Down: every call fails; Up heals.
	f.Down(nil)
	if _, err := f.Append(ctx, "s", 0, rec); !errors.Is(err, journaltest.ErrDown) {
		t.Fatalf("append while down: %v", err)
	}
	if err := f.Load(ctx, "s", 0, func(persistence.Record) error { return nil }); !errors.Is(err, journaltest.ErrDown) {
		t.Fatalf("load while down: %v", err)
	}
	if _, err := f.Due(ctx, 0); !errors.Is(err, journaltest.ErrDown) {
		t.Fatalf("due while down: %v", err)
	}
	f.Up()
	if _, err := f.Append(ctx, "s", 0, rec); err != nil || stored() != 1 {
		t.Fatalf("append after up: %v (stored %d)", err, stored())
	}

	// Conflicting: the next append only.
	f.ConflictNextAppend()
	if _, err := f.AppendIndexed(ctx, "s", 1, rec, persistence.IndexEntry{SessionID: "s", Status: persistence.StatusRunning}); !errors.Is(err, persistence.ErrConflict) || stored() != 1 {
		t.Fatalf("conflicting append: %v (stored %d)", err, stored())
	}
	if _, err := f.Append(ctx, "s", 1, rec); err != nil {
		t.Fatalf("append after the conflict: %v", err)
	}

	// Panicking: the next append panics and stores nothing.
	f.PanicNextAppend()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the armed append did not panic")
			}
		}()
		_, _ = f.Append(ctx, "s", 2, rec)
	}()
	if stored() != 2 {
		t.Fatalf("a panicking append stored something: %d", stored())
	}

	// Slow: an append waits; a context that ends first ends it.
	f.Slow(time.Hour)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := f.Append(cctx, "s", 2, rec); !errors.Is(err, context.DeadlineExceeded) || stored() != 2 {
		t.Fatalf("slow append with a short deadline: %v (stored %d)", err, stored())
	}
	f.Slow(0)

	// The n-th append fails; OnAppend reports outcomes.
	var outcomes []error
	f.OnAppend(func(_ string, _ []persistence.Record, _ uint64, err error) { outcomes = append(outcomes, err) })
	boom := errors.New("boom")
	f.FailAppend(f.Appends()+2, boom)
	_, err1 := f.Append(ctx, "s", 2, rec)
	_, err2 := f.Append(ctx, "s", 3, rec)
	if err1 != nil || !errors.Is(err2, boom) || len(outcomes) != 2 || outcomes[0] != nil || !errors.Is(outcomes[1], boom) {
		t.Fatalf("appends: %v, %v; reported %v", err1, err2, outcomes)
	}

	// KeepOpen: closing the wrapper leaves the journal open.
	if err := f.KeepOpen().Close(); err != nil || stored() != 3 {
		t.Fatalf("close of a kept-open wrapper: %v", err)
	}
}
