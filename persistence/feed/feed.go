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
//
// A feed sees only what its own node publishes. With Options.Poll, subscriptions of a
// stream nothing was published to on this feed for a poll interval also read the
// journal, so a session hosted on another node (whose grain publishes to that node's
// feed) still reaches this node's subscribers, at most one interval late, with the same
// no-gap, no-repeat guarantee.
//
// A reader serving many subscriptions from one goroutine (the gateway's connection
// writer) does not wait in Next: it gives them one notify channel (Notify) and, each time
// the channel fires, takes what is ready from each with TryNextUpdate, which never waits
// for a publish.
package feed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fathom-agents/fathom/persistence"
)

// ErrClosed is returned by Next after the subscription or the feed was closed.
var ErrClosed = errors.New("feed: closed")

// DefaultBuffer is the default Options.Buffer: enough unread commits for a reader that
// keeps up, small enough that thousands of idle subscribers stay cheap (a reader that
// falls further behind reads the journal instead, losing nothing).
const DefaultBuffer = 16

// Options tune a Feed.
type Options struct {
	// Buffer is how many published batches a subscriber may have unread before it is
	// switched back to reading from the journal. Default DefaultBuffer.
	Buffer int
	// Page is how many records one catch-up read takes from the journal. Default 256.
	Page int
	// Poll, when > 0, makes the subscriptions of a stream that nothing was published to
	// on this feed during the last Poll read the journal (records another node stored).
	// 0 relies on Publish alone (a single node).
	Poll time.Duration
}

// Feed is a publisher (it implements the session grain's Publisher) and the subscription
// point of one node. Safe for concurrent use.
type Feed struct {
	j    persistence.Journal
	opts Options

	mu     sync.Mutex
	subs   map[string]map[*Subscription]struct{}
	closed bool
	// pubs counts Publish calls per subscribed stream (the poller's "published lately").
	pubs map[string]uint64

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// New returns a feed reading catch-up records from j.
func New(j persistence.Journal, opts Options) *Feed {
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	if opts.Page <= 0 {
		opts.Page = 256
	}
	f := &Feed{j: j, opts: opts, subs: map[string]map[*Subscription]struct{}{}, pubs: map[string]uint64{}, stop: make(chan struct{})}
	if opts.Poll > 0 {
		f.wg.Add(1)
		go f.pollLoop()
	}
	return f
}

// pollLoop wakes, every Poll, the subscriptions of streams nothing was published to on
// this feed since the last tick, to read the journal. It stops with Close.
func (f *Feed) pollLoop() {
	defer f.wg.Done()
	t := time.NewTicker(f.opts.Poll)
	defer t.Stop()
	seen := map[string]uint64{}
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		f.mu.Lock()
		for stream, subs := range f.subs {
			n := f.pubs[stream]
			if prev, ok := seen[stream]; ok && prev != n {
				seen[stream] = n // published here lately: the host is this node
				continue
			}
			seen[stream] = n
			for s := range subs {
				s.poll.Store(true)
				s.notify()
				select {
				case s.wake <- struct{}{}:
				default:
				}
			}
		}
		for stream := range seen {
			if f.subs[stream] == nil {
				delete(seen, stream)
			}
		}
		f.mu.Unlock()
	}
}

// Publish hands durably stored records of stream to its subscribers. It never blocks.
func (f *Feed) Publish(stream string, recs []persistence.Record) {
	if len(recs) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs[stream]) > 0 {
		f.pubs[stream]++
	}
	for s := range f.subs[stream] {
		s.published = recs[len(recs)-1].Seq
		if !s.lagged.Load() {
			select {
			case s.live <- recs:
			default:
				// Full: drop the live buffer; Next reads the journal instead.
				s.lagged.Store(true)
			}
		}
		s.notify()
	}
}

// Delta kinds.
const (
	// KindText is streamed model text (the default: an empty Kind means text).
	KindText = "text"
	// KindStdout and KindStderr are a running tool's output (code_execute in the
	// sandbox); CallID is the tool call's id.
	KindStdout = "stdout"
	KindStderr = "stderr"
)

// Delta is a piece of a model answer as it streams, or of a tool's output as it runs.
// Deltas are not journaled and have no seq: a subscriber that is too slow loses some
// (Index shows the gap for text), and the whole answer arrives anyway in the
// llm_responded (or tool_result) event.
type Delta struct {
	// Kind is KindText ("" means text), KindStdout or KindStderr.
	Kind string
	// CallID is the LLM call the text belongs to ("step-1/llm-2").
	CallID string
	// StepID is the call's step, empty while planning.
	StepID string
	// Index numbers the call's deltas from 1.
	Index uint32
	// Attempt is the provider's attempt the text belongs to, from 1. When it changes the
	// earlier attempt failed: its text is void and the answer starts over.
	Attempt uint32
	// AfterSeq is the seq of the call's llm_requested event: a subscriber gets the delta
	// after that event and before the call's llm_responded. Zero means "after every
	// record published so far": PublishDelta fills it in per subscriber, which places a
	// tool's output after its tool_called (published before the tool started).
	AfterSeq uint64
	// Text is the new text.
	Text string
}

// PublishDelta hands a delta of stream to the subscribers that asked for deltas. It never
// blocks: a subscriber whose delta buffer is full misses the delta.
func (f *Feed) PublishDelta(stream string, d Delta) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs[stream] {
		if s.deltas == nil {
			continue
		}
		if d.AfterSeq == 0 {
			if s.published == 0 {
				continue // subscribed since the last publish: where the delta goes is unknown
			}
			d := d
			d.AfterSeq = s.published
			select {
			case s.deltas <- d:
			default:
			}
			s.notify()
			continue
		}
		select {
		case s.deltas <- d:
		default:
		}
		s.notify()
	}
}

// Subscribe returns a subscription to stream's records with Seq > afterSeq.
func (f *Feed) Subscribe(stream string, afterSeq uint64) *Subscription {
	return f.subscribe(stream, afterSeq, 0)
}

// SubscribeWithDeltas is Subscribe plus the stream's live deltas, read with NextUpdate.
// Up to buffer deltas wait unread (default 1024 when buffer <= 0).
func (f *Feed) SubscribeWithDeltas(stream string, afterSeq uint64, buffer int) *Subscription {
	if buffer <= 0 {
		buffer = 1024
	}
	return f.subscribe(stream, afterSeq, buffer)
}

func (f *Feed) subscribe(stream string, afterSeq uint64, deltaBuffer int) *Subscription {
	s := &Subscription{f: f, stream: stream, last: afterSeq, live: make(chan []persistence.Record, f.opts.Buffer), catchUp: true,
		wake: make(chan struct{}, 1)}
	if deltaBuffer > 0 {
		s.deltas = make(chan Delta, deltaBuffer)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		s.closed.Store(true)
		return s
	}
	if f.subs[stream] == nil {
		f.subs[stream] = map[*Subscription]struct{}{}
	}
	f.subs[stream][s] = struct{}{}
	return s
}

// Close ends every subscription (their Next returns ErrClosed) and stops the poller.
// It is idempotent.
func (f *Feed) Close() {
	f.stopOnce.Do(func() { close(f.stop) })
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	for _, subs := range f.subs {
		for s := range subs {
			s.closed.Store(true)
			close(s.done())
			s.notify()
		}
	}
	f.subs = nil
}

// Subscription is one reader of one stream. Next must not be called concurrently.
type Subscription struct {
	f      *Feed
	stream string
	live   chan []persistence.Record
	deltas chan Delta // nil unless subscribed with deltas

	// lagged (its live buffer overflowed), closed and poll (Options.Poll: read the
	// journal) are set by the feed and taken by the reader.
	lagged, closed, poll atomic.Bool
	// wake wakes a reader waiting in NextUpdate for a poll.
	wake chan struct{}

	// Guarded by f.mu.
	// published is the newest seq Publish handed this subscription (0: none yet, so a
	// delta without AfterSeq cannot be placed and is dropped for it).
	published uint64
	doneCh    chan struct{}
	notifyCh  chan<- struct{} // nil unless Notify was called

	// Owned by the reader.
	last    uint64
	catchUp bool
	queue   []persistence.Record
	held    []Delta
}

func (s *Subscription) done() chan struct{} {
	if s.doneCh == nil {
		s.doneCh = make(chan struct{})
	}
	return s.doneCh
}

// notify signals the reader's notify channel without blocking. Called with f.mu held.
func (s *Subscription) notify() {
	if s.notifyCh == nil {
		return
	}
	select {
	case s.notifyCh <- struct{}{}:
	default: // a signal is already pending: the reader will look
	}
}

// Notify makes the subscription signal ch, without blocking, whenever it may have
// something new for TryNextUpdate: a published batch, a delta, the end of the feed.
// Several subscriptions may share one channel (give it a buffer of 1); a signal means
// "look at all of them". Records published before Notify are not signalled: call
// TryNextUpdate once after it.
func (s *Subscription) Notify(ch chan<- struct{}) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.notifyCh = ch
}

// Last returns the sequence number of the last record Next returned (or afterSeq).
func (s *Subscription) Last() uint64 { return s.last }

// Update is what NextUpdate returns: a stored record or a live delta.
type Update struct {
	// Record is set (IsDelta false) for a journaled event.
	Record persistence.Record
	// Delta is set (IsDelta true) for streamed text.
	Delta   Delta
	IsDelta bool
}

// Next returns the next record in sequence order, waiting for one to be published.
// Deltas, if subscribed, are skipped.
func (s *Subscription) Next(ctx context.Context) (persistence.Record, error) {
	for {
		u, err := s.NextUpdate(ctx)
		if err != nil || !u.IsDelta {
			return u.Record, err
		}
	}
}

// NextUpdate returns the next record in sequence order or a live delta (for
// subscriptions made with SubscribeWithDeltas), waiting for one to be published. Records
// keep their guarantees (no gap, no repeat). Deltas are best-effort, in order within a
// call, and placed in the record stream causally: after their call's llm_requested
// (Delta.AfterSeq) and before its llm_responded.
func (s *Subscription) NextUpdate(ctx context.Context) (Update, error) {
	for {
		u, ok, err := s.TryNextUpdate(ctx)
		if err != nil || ok {
			return u, err
		}
		s.f.mu.Lock()
		done := s.done()
		s.f.mu.Unlock()
		select {
		case <-ctx.Done():
			return Update{}, ctx.Err()
		case <-done:
		case batch := <-s.live:
			s.queue = append(s.queue, batch...)
		case d := <-s.deltas:
			s.hold(d)
		case <-s.wake:
		}
	}
}

// TryNextUpdate is NextUpdate without the wait: ok is false when nothing is ready now
// (wait for the Notify channel, then call it again). It may read the journal (catching
// up after a subscribe or a lag), bounded by ctx. It returns ErrClosed after Close or
// the feed's Close.
func (s *Subscription) TryNextUpdate(ctx context.Context) (u Update, ok bool, err error) {
	for {
		s.takeDeltas()
		if len(s.held) > 0 && s.held[0].AfterSeq <= s.last {
			d := s.held[0]
			s.held = s.held[1:]
			return Update{Delta: d, IsDelta: true}, true, nil
		}
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
			return Update{Record: r}, true, nil
		}
		// Atomics, not the feed's lock: with thousands of subscribers a publish and their
		// readers would otherwise all queue on one mutex. A batch published between the
		// swap and the drain is dropped with the rest and read back from the journal.
		if s.lagged.CompareAndSwap(true, false) {
			s.catchUp = true
			drain(s.live)
		}
		if s.poll.CompareAndSwap(true, false) {
			s.catchUp = true
		}
		if s.closed.Load() {
			return Update{}, false, ErrClosed
		}
		if s.catchUp {
			n, err := s.readJournal(ctx)
			if err != nil {
				return Update{}, false, err
			}
			if n < s.f.opts.Page {
				s.catchUp = false
			}
			continue
		}
		select {
		case batch := <-s.live:
			s.queue = append(s.queue, batch...)
		default:
			return Update{}, false, nil
		}
	}
}

// TryNext is TryNextUpdate for records only: deltas, if subscribed, are skipped.
func (s *Subscription) TryNext(ctx context.Context) (persistence.Record, bool, error) {
	for {
		u, ok, err := s.TryNextUpdate(ctx)
		if err != nil || !ok || !u.IsDelta {
			return u.Record, ok, err
		}
	}
}

// takeDeltas moves the deltas published so far into held. A delta is published before
// the records that follow it causally, so taking them before each record keeps order.
func (s *Subscription) takeDeltas() {
	for s.deltas != nil {
		select {
		case d := <-s.deltas:
			s.hold(d)
		default:
			return
		}
	}
}

// hold keeps d until its call's request is delivered, dropping the oldest held delta
// when a subscriber that is catching up holds too many.
func (s *Subscription) hold(d Delta) {
	if len(s.held) >= cap(s.deltas) {
		s.held = s.held[1:]
	}
	s.held = append(s.held, d)
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
	if s.closed.Load() {
		return
	}
	s.closed.Store(true)
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
