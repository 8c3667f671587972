package feed_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/fathom-agents/fathom/live/feed"
	"github.com/fathom-agents/fathom/persistence"
)

// countingJournal counts catch-up reads.
type countingJournal struct {
	persistence.Journal
	loads atomic.Int64
}

func (c *countingJournal) Load(ctx context.Context, stream string, after uint64, fn func(persistence.Record) error) error {
	c.loads.Add(1)
	return c.Journal.Load(ctx, stream, after, fn)
}

// A subscriber that fell behind a hot stream catches up from the feed's window of recent
// events, sharing the events already decoded, without reading the journal.
func TestLaggingSubscriberCatchesUpFromTheWindow(t *testing.T) {
	cj := &countingJournal{Journal: openJournal(t)}
	f := feed.New(cj, feed.Options{Buffer: 1})
	w := &writer{j: cj.Journal, f: f}
	sub := f.Subscribe("s", 0)
	defer sub.Close()
	readN(t, sub, 0, 0) // nothing yet
	w.write(t, "s", 1)
	readN(t, sub, 0, 1) // the subscribe's own catch-up happened: it is live now
	before := cj.loads.Load()
	for range 50 { // far more batches than its buffer holds: it lags
		w.write(t, "s", 2)
	}
	readN(t, sub, 1, 100)
	if n := cj.loads.Load() - before; n != 0 {
		t.Fatalf("the lagging subscriber read the journal %d times; the window held every event it missed", n)
	}
}

// When the window does not reach back to what a subscriber missed, it reads the journal
// and still loses nothing.
func TestLaggingSubscriberBeyondTheWindowReadsTheJournal(t *testing.T) {
	cj := &countingJournal{Journal: openJournal(t)}
	f := feed.New(cj, feed.Options{Buffer: 1, Recent: 8})
	w := &writer{j: cj.Journal, f: f}
	sub := f.Subscribe("s", 0)
	defer sub.Close()
	w.write(t, "s", 1)
	readN(t, sub, 0, 1)
	before := cj.loads.Load()
	for range 50 {
		w.write(t, "s", 2)
	}
	readN(t, sub, 1, 100)
	if cj.loads.Load() == before {
		t.Fatal("the subscriber caught up 100 events with a window of 8 without reading the journal")
	}
}
