// Package journaltest is the conformance suite every journal backend must pass, and a
// fault wrapper (Faulty) for tests of what uses a journal. Backends call Run from their
// own tests with a function that opens the journal under test: it runs the
// persistence.Journal contract and then every capability of persistence.SessionStore
// (a journal that lacks one fails the suite). The suite uses fresh random stream ids
// so one store can be shared by all subtests and by earlier runs.
package journaltest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/persistence"
)

// Opener opens the journal under test. Every call must open the same underlying store
// (so a record appended through one handle is visible through the next); the suite
// closes what it opens.
type Opener func(t *testing.T) persistence.Journal

// Run runs the conformance suite.
func Run(t *testing.T, open Opener) {
	prefix := "jt-" + randomID() + "-"
	n := 0
	stream := func() string { n++; return fmt.Sprintf("%s%03d", prefix, n) }
	use := func(t *testing.T) persistence.Journal {
		t.Helper()
		j := open(t)
		t.Cleanup(func() { _ = j.Close() })
		return j
	}
	ctx := context.Background()

	t.Run("AppendLoadInOrder", func(t *testing.T) {
		j, s := use(t), stream()
		last, err := j.Append(ctx, s, 0, recs("a", 3))
		mustNil(t, err)
		if last != 3 {
			t.Fatalf("last = %d, want 3", last)
		}
		last, err = j.Append(ctx, s, 3, recs("b", 2))
		mustNil(t, err)
		if last != 5 {
			t.Fatalf("last = %d, want 5", last)
		}
		got := load(t, j, s, 0)
		want := []string{"a0", "a1", "a2", "b0", "b1"}
		if len(got) != len(want) {
			t.Fatalf("loaded %d records, want %d", len(got), len(want))
		}
		for i, r := range got {
			if r.Seq != uint64(i+1) || string(r.Data) != want[i] || r.Type != "ev_"+want[i][:1] {
				t.Fatalf("record %d = {%d %s %q}, want seq %d data %q", i, r.Seq, r.Type, r.Data, i+1, want[i])
			}
			if r.At.IsZero() {
				t.Fatalf("record %d has no time", i)
			}
		}
		if seq, err := j.LastSeq(ctx, s); err != nil || seq != 5 {
			t.Fatalf("LastSeq = %d, %v; want 5", seq, err)
		}
	})

	t.Run("LoadAfterSeq", func(t *testing.T) {
		j, s := use(t), stream()
		_, err := j.Append(ctx, s, 0, recs("x", 10))
		mustNil(t, err)
		got := load(t, j, s, 7)
		if len(got) != 3 || got[0].Seq != 8 || got[2].Seq != 10 {
			t.Fatalf("after 7 got %v", seqs(got))
		}
		if got := load(t, j, s, 10); len(got) != 0 {
			t.Fatalf("after last got %v", seqs(got))
		}
	})

	t.Run("TimesRoundTrip", func(t *testing.T) {
		j, s := use(t), stream()
		at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
		_, err := j.Append(ctx, s, 0, []persistence.Record{{Type: "t", Data: []byte("x"), At: at}})
		mustNil(t, err)
		got := load(t, j, s, 0)
		if !got[0].At.Equal(at) {
			t.Fatalf("At = %v, want %v", got[0].At, at)
		}
	})

	t.Run("UnknownStream", func(t *testing.T) {
		j, s := use(t), stream()
		if got := load(t, j, s, 0); len(got) != 0 {
			t.Fatalf("unknown stream has records %v", seqs(got))
		}
		if seq, err := j.LastSeq(ctx, s); err != nil || seq != 0 {
			t.Fatalf("LastSeq = %d, %v", seq, err)
		}
		if _, ok, err := j.LoadSnapshot(ctx, s, math.MaxUint64); err != nil || ok {
			t.Fatalf("LoadSnapshot = %v, %v", ok, err)
		}
	})

	t.Run("ConflictStoresNothing", func(t *testing.T) {
		j, s := use(t), stream()
		_, err := j.Append(ctx, s, 0, recs("a", 2))
		mustNil(t, err)
		for _, expected := range []uint64{0, 1, 3, 100} {
			_, err := j.Append(ctx, s, expected, recs("z", 2))
			if !errors.Is(err, persistence.ErrConflict) {
				t.Fatalf("append after %d: err = %v, want ErrConflict", expected, err)
			}
		}
		if got := load(t, j, s, 0); len(got) != 2 || string(got[1].Data) != "a1" {
			t.Fatalf("after conflicts stream is %v", seqs(got))
		}
	})

	t.Run("ConcurrentWritersExactlyOneWins", func(t *testing.T) {
		j := use(t)
		for round := 0; round < 20; round++ {
			s := stream()
			_, err := j.Append(ctx, s, 0, recs("base", 1))
			mustNil(t, err)
			const writers = 8
			var wins, conflicts atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					<-start
					_, err := j.Append(ctx, s, 1, recs(fmt.Sprintf("w%d-", w), 2))
					switch {
					case err == nil:
						wins.Add(1)
					case errors.Is(err, persistence.ErrConflict):
						conflicts.Add(1)
					default:
						t.Errorf("writer %d: %v", w, err)
					}
				}(w)
			}
			close(start)
			wg.Wait()
			if wins.Load() != 1 || conflicts.Load() != writers-1 {
				t.Fatalf("round %d: %d wins, %d conflicts; want 1 and %d", round, wins.Load(), conflicts.Load(), writers-1)
			}
			got := load(t, j, s, 0)
			if len(got) != 3 || got[1].Data[1] != got[2].Data[1] {
				t.Fatalf("round %d: stream mixes writers: %q", round, datas(got))
			}
		}
	})

	t.Run("ParallelStreams", func(t *testing.T) {
		j := use(t)
		const streams, per = 8, 25
		ids := make([]string, streams)
		for i := range ids {
			ids[i] = stream()
		}
		var wg sync.WaitGroup
		for _, s := range ids {
			wg.Add(1)
			go func(s string) {
				defer wg.Done()
				for i := 0; i < per; i++ {
					if _, err := j.Append(ctx, s, uint64(i), []persistence.Record{{Type: "p", Data: []byte(fmt.Sprint(i))}}); err != nil {
						t.Errorf("%s append %d: %v", s, i, err)
						return
					}
				}
			}(s)
		}
		wg.Wait()
		for _, s := range ids {
			got := load(t, j, s, 0)
			if len(got) != per {
				t.Fatalf("%s has %d records, want %d", s, len(got), per)
			}
			for i, r := range got {
				if string(r.Data) != fmt.Sprint(i) {
					t.Fatalf("%s record %d = %q", s, i, r.Data)
				}
			}
		}
	})

	t.Run("InvalidArguments", func(t *testing.T) {
		j := use(t)
		for name, c := range map[string]struct {
			stream string
			recs   []persistence.Record
		}{
			"empty stream": {"", recs("a", 1)},
			"no records":   {stream(), nil},
			"no type":      {stream(), []persistence.Record{{Data: []byte("x")}}},
			"wrong seq":    {stream(), []persistence.Record{{Seq: 1, Type: "t"}, {Seq: 3, Type: "t"}}},
		} {
			if _, err := j.Append(ctx, c.stream, 0, c.recs); !errors.Is(err, persistence.ErrInvalid) {
				t.Errorf("%s: err = %v, want ErrInvalid", name, err)
			}
			if c.stream != "" {
				if last, err := j.LastSeq(ctx, c.stream); err != nil || last != 0 {
					t.Errorf("%s: a refused append stored something (last seq %d, %v)", name, last, err)
				}
			}
		}
	})

	// Records may carry the seq they will have (the session grain numbers its events
	// when it decides them): the right ones are stored at those seqs.
	t.Run("RecordsCarryingTheirSeq", func(t *testing.T) {
		j, s := use(t), stream()
		last, err := j.Append(ctx, s, 0, []persistence.Record{{Seq: 1, Type: "a"}, {Seq: 2, Type: "b"}})
		mustNil(t, err)
		last, err = j.Append(ctx, s, last, []persistence.Record{{Seq: 3, Type: "c"}})
		mustNil(t, err)
		if last != 3 {
			t.Fatalf("last seq %d, want 3", last)
		}
		if _, err := j.Append(ctx, s, 3, []persistence.Record{{Seq: 3, Type: "d"}}); !errors.Is(err, persistence.ErrInvalid) {
			t.Fatalf("a record carrying seq 3 appended after 3: err = %v, want ErrInvalid", err)
		}
	})

	t.Run("SnapshotPlusTail", func(t *testing.T) {
		j, s := use(t), stream()
		_, err := j.Append(ctx, s, 0, recs("e", 10))
		mustNil(t, err)
		mustNil(t, j.SaveSnapshot(ctx, s, persistence.Snapshot{Seq: 4, Data: []byte("state@4")}))
		mustNil(t, j.SaveSnapshot(ctx, s, persistence.Snapshot{Seq: 8, Data: []byte("state@8")}))
		snap, ok, err := j.LoadSnapshot(ctx, s, math.MaxUint64)
		mustNil(t, err)
		if !ok || snap.Seq != 8 || string(snap.Data) != "state@8" || snap.At.IsZero() {
			t.Fatalf("newest snapshot = %+v ok=%v", snap, ok)
		}
		tail := load(t, j, s, snap.Seq)
		if len(tail) != 2 || tail[0].Seq != 9 {
			t.Fatalf("tail after snapshot = %v", seqs(tail))
		}
		for _, c := range []struct {
			max  uint64
			want uint64
			ok   bool
		}{{7, 4, true}, {8, 8, true}, {4, 4, true}, {3, 0, false}, {100, 8, true}} {
			snap, ok, err := j.LoadSnapshot(ctx, s, c.max)
			mustNil(t, err)
			if ok != c.ok || snap.Seq != c.want {
				t.Fatalf("LoadSnapshot(max %d) = seq %d ok %v, want %d %v", c.max, snap.Seq, ok, c.want, c.ok)
			}
		}
		mustNil(t, j.SaveSnapshot(ctx, s, persistence.Snapshot{Seq: 8, Data: []byte("state@8 v2")}))
		snap, _, err = j.LoadSnapshot(ctx, s, 8)
		mustNil(t, err)
		if string(snap.Data) != "state@8 v2" {
			t.Fatalf("replaced snapshot = %q", snap.Data)
		}
	})

	// A record of exactly MaxEventBytes is stored; snapshots have no such bound.
	t.Run("LargePayload", func(t *testing.T) {
		j, s := use(t), stream()
		big := make([]byte, persistence.MaxEventBytes)
		_, _ = rand.Read(big)
		_, err := j.Append(ctx, s, 0, []persistence.Record{{Type: "big", Data: big}, {Type: "small", Data: []byte("s")}})
		mustNil(t, err)
		got := load(t, j, s, 0)
		if len(got) != 2 || !bytes.Equal(got[0].Data, big) || string(got[1].Data) != "s" {
			t.Fatalf("large payload did not round-trip (%d records)", len(got))
		}
		state := make([]byte, 4<<20)
		_, _ = rand.Read(state)
		mustNil(t, j.SaveSnapshot(ctx, s, persistence.Snapshot{Seq: 2, Data: state}))
		snap, ok, err := j.LoadSnapshot(ctx, s, 2)
		mustNil(t, err)
		if !ok || !bytes.Equal(snap.Data, state) {
			t.Fatal("large snapshot did not round-trip")
		}
	})

	// A record one byte over MaxEventBytes is refused with an *EventTooLargeError naming
	// it, and nothing of its append is stored.
	t.Run("EventOverMaxRefused", func(t *testing.T) {
		j, s := use(t), stream()
		over := make([]byte, persistence.MaxEventBytes+1)
		_, err := j.Append(ctx, s, 0, []persistence.Record{{Type: "small", Data: []byte("s")}, {Type: "tool_result", Data: over}})
		var tooLarge *persistence.EventTooLargeError
		if !errors.As(err, &tooLarge) || !errors.Is(err, persistence.ErrEventTooLarge) || !errors.Is(err, persistence.ErrInvalid) {
			t.Fatalf("append of a %d-byte record: err = %v, want an *EventTooLargeError (ErrEventTooLarge, ErrInvalid)", len(over), err)
		}
		if tooLarge.Index != 1 || tooLarge.Type != "tool_result" || tooLarge.Size != len(over) || tooLarge.Limit != persistence.MaxEventBytes {
			t.Fatalf("error %+v does not name record 1 (tool_result, %d bytes, limit %d)", tooLarge, len(over), persistence.MaxEventBytes)
		}
		if last, err := j.LastSeq(ctx, s); err != nil || last != 0 {
			t.Fatalf("the refused append stored something: last seq %d, %v", last, err)
		}
	})

	t.Run("ManyRecordsLoadAcrossChunks", func(t *testing.T) {
		j, s := use(t), stream()
		var last uint64
		for last < 1000 {
			l, err := j.Append(ctx, s, last, recs("m", 100))
			mustNil(t, err)
			last = l
		}
		got := load(t, j, s, 0)
		if len(got) != 1000 || got[999].Seq != 1000 {
			t.Fatalf("loaded %d records", len(got))
		}
		for i, r := range got {
			if r.Seq != uint64(i+1) {
				t.Fatalf("gap at %d: seq %d", i, r.Seq)
			}
		}
	})

	t.Run("MixedBatchesLoadFromEverySeq", func(t *testing.T) {
		j, s := use(t), stream()
		var last uint64
		for i, n := range []int{1, 3, 2, 5, 1, 1, 4, 2} {
			l, err := j.Append(ctx, s, last, recs(fmt.Sprintf("b%d-", i), n))
			mustNil(t, err)
			last = l
		}
		for after := uint64(0); after <= last+1; after++ {
			got := seqs(load(t, j, s, after))
			want := []uint64{}
			for q := after + 1; q <= last; q++ {
				want = append(want, q)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after %d: got %v, want %v", after, got, want)
			}
		}
		for expected := uint64(0); expected < last; expected++ {
			if _, err := j.Append(ctx, s, expected, recs("z", 1)); !errors.Is(err, persistence.ErrConflict) {
				t.Fatalf("append after %d of %d: err = %v, want ErrConflict", expected, last, err)
			}
		}
		if seq, err := j.LastSeq(ctx, s); err != nil || seq != last {
			t.Fatalf("LastSeq = %d, %v; want %d", seq, err, last)
		}
	})

	t.Run("ManySingleAppendsLoadAcrossChunks", func(t *testing.T) {
		j, s := use(t), stream()
		const n = 1200 // more appends than a PostgreSQL load chunk holds
		for last := uint64(0); last < n; last++ {
			_, err := j.Append(ctx, s, last, recs("s", 1))
			mustNil(t, err)
		}
		got := load(t, j, s, 0)
		if len(got) != n {
			t.Fatalf("loaded %d records, want %d", len(got), n)
		}
		for i, r := range got {
			if r.Seq != uint64(i+1) {
				t.Fatalf("gap at %d: seq %d", i, r.Seq)
			}
		}
		if got := load(t, j, s, n-5); len(got) != 5 || got[0].Seq != n-4 {
			t.Fatalf("tail after %d: %v", n-5, seqs(got))
		}
	})

	t.Run("ListStreams", func(t *testing.T) {
		j := use(t)
		p := prefix + "list-"
		for _, s := range []string{p + "b", p + "a", p + "c"} {
			_, err := j.Append(ctx, s, 0, recs("l", 2))
			mustNil(t, err)
		}
		got, err := j.ListStreams(ctx, p)
		mustNil(t, err)
		if len(got) != 3 || got[0].ID != p+"a" || got[2].ID != p+"c" {
			t.Fatalf("ListStreams = %+v", got)
		}
		for _, si := range got {
			if si.LastSeq != 2 || si.CreatedAt.IsZero() || si.UpdatedAt.Before(si.CreatedAt) {
				t.Fatalf("stream info %+v", si)
			}
		}
		all, err := j.ListStreams(ctx, "")
		mustNil(t, err)
		if len(all) < 3 {
			t.Fatalf("ListStreams(\"\") = %d streams", len(all))
		}
	})

	t.Run("ReopenAfterClose", func(t *testing.T) {
		s := stream()
		j := open(t)
		_, err := j.Append(ctx, s, 0, recs("r", 3))
		mustNil(t, err)
		mustNil(t, j.SaveSnapshot(ctx, s, persistence.Snapshot{Seq: 2, Data: []byte("snap")}))
		mustNil(t, j.Close())
		if _, err := j.Append(ctx, s, 3, recs("r", 1)); !errors.Is(err, persistence.ErrClosed) {
			t.Fatalf("append after close: %v, want ErrClosed", err)
		}
		if err := j.Load(ctx, s, 0, func(persistence.Record) error { return nil }); !errors.Is(err, persistence.ErrClosed) {
			t.Fatalf("load after close: %v, want ErrClosed", err)
		}
		j2 := use(t)
		if got := load(t, j2, s, 0); len(got) != 3 {
			t.Fatalf("after reopen %d records", len(got))
		}
		if snap, ok, err := j2.LoadSnapshot(ctx, s, math.MaxUint64); err != nil || !ok || string(snap.Data) != "snap" {
			t.Fatalf("snapshot after reopen: %+v %v %v", snap, ok, err)
		}
		last, err := j2.Append(ctx, s, 3, recs("r", 1))
		mustNil(t, err)
		if last != 4 {
			t.Fatalf("append after reopen: last %d", last)
		}
	})

	t.Run("LoadStopsAtCallbackError", func(t *testing.T) {
		j, s := use(t), stream()
		_, err := j.Append(ctx, s, 0, recs("f", 5))
		mustNil(t, err)
		stop := errors.New("enough")
		calls := 0
		err = j.Load(ctx, s, 0, func(persistence.Record) error {
			calls++
			if calls == 2 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || calls != 2 {
			t.Fatalf("err = %v after %d calls", err, calls)
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		j, s := use(t), stream()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := j.Append(cctx, s, 0, recs("c", 1)); !errors.Is(err, context.Canceled) {
			t.Fatalf("append: %v", err)
		}
		if err := j.Load(cctx, s, 0, func(persistence.Record) error { return nil }); !errors.Is(err, context.Canceled) {
			t.Fatalf("load: %v", err)
		}
		if seq, err := j.LastSeq(ctx, s); err != nil || seq != 0 {
			t.Fatalf("cancelled append stored something: %d %v", seq, err)
		}
	})

	t.Run("SessionStore", func(t *testing.T) {
		probe := open(t)
		_, err := persistence.CheckSessionStore(fmt.Sprintf("%T", probe), probe)
		_ = probe.Close()
		if err != nil {
			t.Fatal(err)
		}
		runIndex(t, use, stream, prefix)
		runCapabilities(t, use, stream)
	})
}

func recs(prefix string, n int) []persistence.Record {
	out := make([]persistence.Record, n)
	for i := range out {
		out[i] = persistence.Record{Type: "ev_" + prefix[:1], Data: []byte(fmt.Sprintf("%s%d", prefix, i))}
	}
	return out
}

func load(t *testing.T, j persistence.Journal, s string, after uint64) []persistence.Record {
	t.Helper()
	var out []persistence.Record
	if err := j.Load(context.Background(), s, after, func(r persistence.Record) error { out = append(out, r); return nil }); err != nil {
		t.Fatalf("load %s: %v", s, err)
	}
	return out
}

func seqs(rs []persistence.Record) []uint64 {
	out := make([]uint64, len(rs))
	for i, r := range rs {
		out[i] = r.Seq
	}
	return out
}

func datas(rs []persistence.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Data)
	}
	return out
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
