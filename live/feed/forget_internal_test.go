package feed

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence/bolt"
)

// TestClosedStreamsLeaveNothing: once the last subscriber of a stream has closed, the feed
// keeps nothing of that stream (its subscriber set, its window of recent events, its
// publish count), however many sessions were ever watched on the node.
func TestClosedStreamsLeaveNothing(t *testing.T) {
	j, err := bolt.Open(filepath.Join(t.TempDir(), "j.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	f := New(j, Options{})
	defer f.Close()
	for i := range 100 {
		stream := fmt.Sprintf("s-%d", i)
		a, b := f.Subscribe(stream, 0), f.Subscribe(stream, 0)
		f.Publish(stream, []*messages.Event{{Seq: 1}, {Seq: 2}})
		a.Close()
		f.mu.Lock()
		kept := len(f.recent[stream]) > 0 && f.pubs[stream] > 0
		f.mu.Unlock()
		if !kept {
			t.Fatalf("%s: with a subscriber left the feed must keep its window and publish count", stream)
		}
		b.Close()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) != 0 || len(f.recent) != 0 || len(f.pubs) != 0 {
		t.Fatalf("after every subscriber closed the feed still tracks %d subscriber sets, %d windows, %d publish counts",
			len(f.subs), len(f.recent), len(f.pubs))
	}
}

// TestWindowKeepsOnlyWhatASubscriberWasNotGiven: the window of recent events holds what
// some subscriber of the stream has not been given yet (and the last event), not the
// stream's last Options.Recent events: an active session followed by readers that keep
// up costs the feed a few events, not its history. A subscriber that stops reading keeps
// everything after its position in the window, for its catch-up.
func TestWindowKeepsOnlyWhatASubscriberWasNotGiven(t *testing.T) {
	j, err := bolt.Open(filepath.Join(t.TempDir(), "j.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	f := New(j, Options{})
	defer f.Close()
	window := func() []uint64 {
		f.mu.Lock()
		defer f.mu.Unlock()
		var seqs []uint64
		for _, ev := range f.recent["s"] {
			seqs = append(seqs, ev.GetSeq())
		}
		return seqs
	}
	fast := f.Subscribe("s", 0)
	defer fast.Close()
	fast.catchUp = false // nothing stored: read the published batches only
	seq := uint64(0)
	publish := func() {
		f.Publish("s", []*messages.Event{{Seq: seq + 1}, {Seq: seq + 2}})
		seq += 2
	}
	for range 20 {
		publish()
		for range 2 {
			if ev, ok, err := fast.TryNext(t.Context()); err != nil || !ok || ev.GetSeq() == 0 {
				t.Fatalf("TryNext = %v, %v, %v", ev, ok, err)
			}
		}
	}
	publish() // trims what fast was given, keeps the new batch
	if got := window(); len(got) != 2 || got[0] != seq-1 {
		t.Fatalf("with its one subscriber kept up, the window holds seqs %v; want only the last batch [%d %d]", got, seq-1, seq)
	}
	for range 4 { // a burst: several batches before the reader runs
		publish()
	}
	for range 2 + 8 { // the last batch above and the burst
		if _, ok, err := fast.TryNext(t.Context()); err != nil || !ok {
			t.Fatalf("TryNext = %v, %v", ok, err)
		}
	}
	if got := window(); len(got) != 1 || got[0] != seq {
		t.Fatalf("once its subscriber took a burst, the window holds seqs %v; want only the last [%d]", got, seq)
	}
	slow := f.Subscribe("s", seq)
	defer slow.Close()
	slow.catchUp = false
	from := seq
	for range 5 {
		publish()
		for range 2 {
			if _, ok, err := fast.TryNext(t.Context()); err != nil || !ok {
				t.Fatalf("TryNext = %v, %v", ok, err)
			}
		}
	}
	if got := window(); len(got) != int(seq-from) || got[0] != from+1 {
		t.Fatalf("the window holds seqs %v; want everything after the slow subscriber's %d", got, from)
	}
}
