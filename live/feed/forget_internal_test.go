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
	f := newBoltFeed(t)
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
// some subscriber of the stream has not been given yet (and up to trimAt events more),
// not the stream's last Options.Recent events: an active session followed by readers
// that keep up costs the feed a few dozen events, not its history. A subscriber that
// stops reading keeps everything after its position in the window, for its catch-up.
func TestWindowKeepsOnlyWhatASubscriberWasNotGiven(t *testing.T) {
	f := newBoltFeed(t)
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
	take := func(n int) {
		for range n {
			if ev, ok, err := fast.TryNext(t.Context()); err != nil || !ok || ev.GetSeq() == 0 {
				t.Fatalf("TryNext = %v, %v, %v", ev, ok, err)
			}
		}
	}
	// contiguous reports whether w is seqs from..to in order.
	contiguous := func(w []uint64, from, to uint64) bool {
		if len(w) == 0 || w[0] != from || w[len(w)-1] != to {
			return false
		}
		for i := 1; i < len(w); i++ {
			if w[i] != w[i-1]+1 {
				return false
			}
		}
		return true
	}
	for range 200 { // 400 events, the subscriber keeping up
		publish()
		take(2)
		if got := window(); len(got) > trimAt+2 || !contiguous(got, got[0], seq) {
			t.Fatalf("with its one subscriber kept up, the window holds seqs %v; want at most %d ending at %d", got, trimAt+2, seq)
		}
	}
	for range 40 { // a burst: many batches before the reader runs
		publish()
	}
	take(80)
	publish()
	take(2)
	if got := window(); len(got) > trimAt+2 || !contiguous(got, got[0], seq) {
		t.Fatalf("once its subscriber took a burst, the window holds seqs %v; want at most %d ending at %d", got, trimAt+2, seq)
	}
	slow := f.Subscribe("s", seq)
	defer slow.Close()
	slow.catchUp = false
	from := seq
	for range 50 {
		publish()
		take(2)
	}
	if got := window(); len(got) < int(seq-from) || !contiguous(got, got[0], seq) || got[0] > from+1 {
		t.Fatalf("the window holds seqs %v; want everything after the slow subscriber's %d", got, from)
	}
}

// newBoltFeed is a feed with default options over a fresh embedded journal, both closed
// when t ends.
func newBoltFeed(t *testing.T) *Feed {
	t.Helper()
	j, err := bolt.Open(filepath.Join(t.TempDir(), "j.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	f := New(j, Options{})
	t.Cleanup(f.Close)
	return f
}
