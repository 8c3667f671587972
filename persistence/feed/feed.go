// Package feed fans freshly stored journal records out to live subscribers.
//
// A subscriber asks for a stream from a sequence number: it first reads what is already
// in the journal, then switches to records published live, with no gap and no repeat
// across the switch. A subscriber that falls behind never blocks the publisher and never
// loses records: its live buffer is dropped and it catches up from the journal again.
//
//	f := feed.New(journal, feed.Options{})
//	sub := f.Subscribe("session-1", 0)
//	defer sub.Close()
//	for {
//		rec, err := sub.Next(ctx)
//		...
//	}
package feed

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/fathom-agents/fathom/persistence"
)

// ErrClosed is returned by Next after the subscription or the feed was closed.
var ErrClosed = errors.New("feed: closed")

// Options tune a Feed.
type Options struct {
	// Buffer is how many published batches a subscriber may have unread before it is
	// switched back to reading from the journal. Default 64.
	Buffer int
	// Page is how many records one catch-up read takes from the journal. Default 256.
	Page int
}

// Feed is a publisher (it implements the session grain's Publisher) and the subscription
// point of one node. Safe for concurrent use.
type Feed struct {
	j    persistence.Journal
	opts Options

	mu     sync.Mutex
	subs   map[string]map[*Subscription]struct{}
	closed bool
}

// New returns a feed reading catch-up records from j.
func New(j persistence.Journal, opts Options) *Feed {
	if opts.Buffer <= 0 {
		opts.Buffer = 64
	}
	if opts.Page <= 0 {
		opts.Page = 256
	}
	return &Feed{j: j, opts: opts, subs: map[string]map[*Subscription]struct{}{}}
}

// Publish hands durably stored records of stream to its subscribers. It never blocks.
func (f *Feed) Publish(stream string, recs []persistence.Record) {
	if len(recs) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs[stream] {
		if s.lagged {
			continue
		}
		select {
		case s.live <- recs:
		default:
			// Full: drop the live buffer; Next reads the journal instead.
			s.lagged = true
		}
	}
}

// Subscribe returns a subscription to stream's records with Seq > afterSeq.
func (f *Feed) Subscribe(stream string, afterSeq uint64) *Subscription {
	s := &Subscription{f: f, stream: stream, last: afterSeq, live: make(chan []persistence.Record, f.opts.Buffer), catchUp: true}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		s.closed = true
		return s
	}
	if f.subs[stream] == nil {
		f.subs[stream] = map[*Subscription]struct{}{}
	}
	f.subs[stream][s] = struct{}{}
	return s
}

// Close ends every subscription; their Next returns ErrClosed.
func (f *Feed) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	for _, subs := range f.subs {
		for s := range subs {
			s.closed = true
			close(s.done())
		}
	}
	f.subs = nil
}

// Subscription is one reader of one stream. Next must not be called concurrently.
type Subscription struct {
	f      *Feed
	stream string
	live   chan []persistence.Record

	// Guarded by f.mu.
	lagged bool
	closed bool
	doneCh chan struct{}

	// Owned by the reader.
	last    uint64
	catchUp bool
	queue   []persistence.Record
}

func (s *Subscription) done() chan struct{} {
	if s.doneCh == nil {
		s.doneCh = make(chan struct{})
	}
	return s.doneCh
}

// Last returns the sequence number of the last record Next returned (or afterSeq).
func (s *Subscription) Last() uint64 { return s.last }

// Next returns the next record in sequence order, waiting for one to be published.
func (s *Subscription) Next(ctx context.Context) (persistence.Record, error) {
	for {
		if len(s.queue) > 0 {
			r := s.queue[0]
			s.queue = s.queue[1:]
			if r.Seq <= s.last {
				continue // already delivered (overlap of journal and live)
			}
			if r.Seq > s.last+1 {
				// A gap can only mean records we have not seen yet: read them from the journal.
				s.queue, s.catchUp = nil, true
				continue
			}
			s.last = r.Seq
			return r, nil
		}
		s.f.mu.Lock()
		closed, lagged, done := s.closed, s.lagged, s.done()
		if lagged {
			s.lagged = false
			s.catchUp = true
			drain(s.live)
		}
		s.f.mu.Unlock()
		if closed {
			return persistence.Record{}, ErrClosed
		}
		if s.catchUp {
			n, err := s.readJournal(ctx)
			if err != nil {
				return persistence.Record{}, err
			}
			if n < s.f.opts.Page {
				s.catchUp = false
			}
			continue
		}
		select {
		case <-ctx.Done():
			return persistence.Record{}, ctx.Err()
		case <-done:
		case batch := <-s.live:
			s.queue = append(s.queue, batch...)
		}
	}
}

var errPageFull = errors.New("page full")

func (s *Subscription) readJournal(ctx context.Context) (int, error) {
	n := 0
	err := s.f.j.Load(ctx, s.stream, s.last, func(r persistence.Record) error {
		s.queue = append(s.queue, r)
		n++
		if n >= s.f.opts.Page {
			return errPageFull
		}
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return 0, fmt.Errorf("feed: read %s after %d: %w", s.stream, s.last, err)
	}
	return n, nil
}

// Close unsubscribes. It is idempotent.
func (s *Subscription) Close() {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	close(s.done())
	if subs := s.f.subs[s.stream]; subs != nil {
		delete(subs, s)
		if len(subs) == 0 {
			delete(s.f.subs, s.stream)
		}
	}
}

func drain(ch chan []persistence.Record) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
