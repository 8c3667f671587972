package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/persistence"
)

// TestGroupCommitIsolatesEachAppend floods one committer with appends of many streams so
// that they share batches: every good append is stored, a stale one is a conflict, and an
// append the server refuses (a NUL byte in its type) fails alone, its batch-mates stored.
func TestGroupCommitIsolatesEachAppend(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	j, err := Open(ctx, dsn, Options{Committers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	run := fmt.Sprintf("group-%d", time.Now().UnixNano())
	// Every stale stream has one event, so an append expecting seq 0 conflicts.
	const streams, rounds = 48, 5
	for i := range streams {
		if i%8 == 0 {
			if _, err := j.Append(ctx, fmt.Sprintf("%s-%d", run, i), 0, []persistence.Record{{Type: "seed"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for round := range rounds {
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, streams)
		for i := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				s := fmt.Sprintf("%s-%d", run, i)
				expected, typ := uint64(round), "ok"
				switch {
				case i%8 == 0:
					expected = 0 // stale: the stream has moved on
				case i%8 == 1 && round == rounds-1:
					typ = "bad\x00type"
				}
				_, errs[i] = j.Append(ctx, s, expected, []persistence.Record{{Type: typ, Data: []byte("x")}})
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			switch {
			case i%8 == 0:
				if !errors.Is(err, persistence.ErrConflict) {
					t.Fatalf("round %d: stale append to stream %d: got %v, want a conflict", round, i, err)
				}
			case i%8 == 1 && round == rounds-1:
				if err == nil || errors.Is(err, persistence.ErrConflict) {
					t.Fatalf("round %d: the append with a NUL in its type: got %v, want the server's error", round, err)
				}
			default:
				if err != nil {
					t.Fatalf("round %d: append to stream %d: %v", round, i, err)
				}
			}
		}
	}
	if j.group.grouped.Load() == 0 {
		t.Fatal("no append shared a batch: the test did not exercise group commit")
	}
	if j.group.split.Load() == 0 {
		t.Fatal("no batch was refused and split: the refused append never shared a batch")
	}
	// Every stream holds exactly its own appends, in order, once.
	for i := range streams {
		s := fmt.Sprintf("%s-%d", run, i)
		want := rounds
		switch i % 8 {
		case 0:
			want = 1
		case 1:
			want = rounds - 1
		}
		var n uint64
		err := j.Load(ctx, s, 0, func(r persistence.Record) error {
			n++
			if r.Seq != n {
				return fmt.Errorf("seq %d at position %d", r.Seq, n)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("load %s: %v", s, err)
		}
		if n != uint64(want) {
			t.Fatalf("stream %d holds %d events, want %d", i, n, want)
		}
	}
}
