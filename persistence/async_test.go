package persistence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/memjournal"
)

// asyncOutcome is one AppendIndexedAsync callback.
type asyncOutcome struct {
	last uint64
	err  error
}

// appendAsync runs persistence.AppendIndexedAsync on s and returns its one outcome,
// failing when it does not come or comes twice.
func appendAsync(t *testing.T, s persistence.SessionIndex, stream string, expected uint64, typ string) asyncOutcome {
	t.Helper()
	out := make(chan asyncOutcome, 2)
	persistence.AppendIndexedAsync(context.Background(), s, stream, expected, []persistence.Record{{Type: typ, Data: []byte("x")}},
		persistence.IndexEntry{SessionID: stream, Status: persistence.StatusRunning}, func(last uint64, err error) { out <- asyncOutcome{last, err} })
	var o asyncOutcome
	select {
	case o = <-out:
	case <-time.After(10 * time.Second):
		t.Fatal("no callback")
	}
	select {
	case o2 := <-out:
		t.Fatalf("a second callback %+v after %+v", o2, o)
	case <-time.After(10 * time.Millisecond):
	}
	return o
}

// TestAppendIndexedAsyncFallsBackAndGates: a store without asynchronous appends
// (memjournal) is appended to through AppendIndexedAsync all the same, conflicts
// included; through FormatGate, which is an AsyncIndexAppender, an append of an event
// newer than the cluster's lowest format is refused by the callback and stores nothing.
func TestAppendIndexedAsyncFallsBackAndGates(t *testing.T) {
	mem := memjournal.New(memjournal.Options{})
	defer mem.Close()
	if _, ok := any(mem).(persistence.AsyncIndexAppender); ok {
		t.Fatal("memjournal appends asynchronously: this test no longer covers the fallback")
	}
	if o := appendAsync(t, mem, "s1", 0, "session_started"); o.err != nil || o.last != 1 {
		t.Fatalf("fallback append: %+v", o)
	}
	if o := appendAsync(t, mem, "s1", 0, "session_started"); !errors.Is(o.err, persistence.ErrConflict) {
		t.Fatalf("stale fallback append: %+v, want a conflict", o)
	}

	const typ = "push_config_set"
	lowest := persistence.EventFormat(typ) - 1
	gated := persistence.FormatGate(mem, func() int { return lowest })
	if _, ok := gated.(persistence.AsyncIndexAppender); !ok {
		t.Fatal("the format gate does not forward asynchronous appends")
	}
	if o := appendAsync(t, gated, "s2", 0, typ); !errors.Is(o.err, persistence.ErrFormatGated) {
		t.Fatalf("gated append of %s: %+v, want ErrFormatGated", typ, o)
	}
	if last, err := mem.LastSeq(context.Background(), "s2"); err != nil || last != 0 {
		t.Fatalf("the gated append left seq %d (%v)", last, err)
	}
	if o := appendAsync(t, gated, "s2", 0, "session_started"); o.err != nil || o.last != 1 {
		t.Fatalf("append through the gate: %+v", o)
	}
}
