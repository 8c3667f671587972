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
