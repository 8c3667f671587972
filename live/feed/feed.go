// Package feed fans freshly stored session events out to live subscribers: it is the
// implementation of the live read side (package live) on top of a node's journal.
//
// A subscriber asks for a stream from a sequence number: it first reads what is already
// in the journal (decoding each record with messages.DecodeEvent), then switches to the
// events published live, with no gap and no repeat across the switch. A subscriber that
// falls behind never blocks the publisher and never loses events: its live buffer is
// dropped and it catches up again: from the feed's window of the stream's recently
// published events when the window reaches back far enough (decoded once and shared by
// every lagging subscriber of a hot stream), else from the journal. Subscribers receive
// decoded *messages.Event values, shared between them.
//
//	f := feed.New(journal, feed.Options{})
//	sub := f.Subscribe("session-1", 0)
//	defer sub.Close()
//	for {
//		ev, err := sub.Next(ctx)
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
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// ErrClosed is returned by Next after the subscription or the feed was closed
// (live.ErrClosed).
var ErrClosed = live.ErrClosed

// Aliases of the live vocabulary, for publishers and readers of a concrete feed.
type (
	// Delta is live.Delta.
	Delta = live.Delta
	// Update is live.Update.
	Update = live.Update
)

// Delta kinds (live.KindText, ...).
const (
	KindText   = live.KindText
	KindStdout = live.KindStdout
	KindStderr = live.KindStderr
)

var (
	_ live.Subscription = (*Subscription)(nil)
	_ interface {
		Follow(string, uint64, int) live.Subscription
	} = (*Feed)(nil)
)

// DefaultBuffer is the default Options.Buffer: enough unread commits for a reader that
// keeps up, small enough that thousands of idle subscribers stay cheap (a reader that
// falls further behind reads the journal instead, losing nothing).
const DefaultBuffer = 16

// DefaultRecent is the default Options.Recent.
const DefaultRecent = 1024

// Options tune a Feed.
type Options struct {
	// Buffer is how many published batches a subscriber may have unread before it is
	// switched back to reading from the journal. Default DefaultBuffer.
	Buffer int
	// Page is how many records one catch-up read takes from the journal. Default 256.
	Page int
	// Recent is how many of a subscribed stream's last published events the feed keeps,
	// so that a subscriber that fell behind catches up without reading and decoding the
	// journal itself. Default DefaultRecent; negative keeps none.
	Recent int
	// Poll, when > 0, makes the subscriptions of a stream that nothing was published to
	// on this feed during the last Poll read the journal (records another node stored).
	// 0 relies on Publish alone (a single node).
	Poll time.Duration
}

// Feed is a publisher (it implements the session grain's Publisher) and the subscription
// point of one node (its Follow serves the gateway). Safe for concurrent use.
type Feed struct {
	j    persistence.Journal
	opts Options

	mu     sync.Mutex
	subs   map[string]map[*Subscription]struct{}
	closed bool
	// pubs counts Publish calls per subscribed stream (the poller's "published lately").
	pubs map[string]uint64
	// recent holds the last Options.Recent events published to each subscribed stream,
	// oldest first, contiguous in seq.
	recent map[string][]*messages.Event

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
	if opts.Recent == 0 {
		opts.Recent = DefaultRecent
	}
	f := &Feed{j: j, opts: opts, subs: map[string]map[*Subscription]struct{}{}, pubs: map[string]uint64{},
		recent: map[string][]*messages.Event{}, stop: make(chan struct{})}
	if opts.Poll > 0 {
		f.wg.Add(1)
		go f.pollLoop()
	}
	return f
}

// Subscribers returns the number of open subscriptions (the node's
// fathom_feed_subscribers gauge).
func (f *Feed) Subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, subs := range f.subs {
		n += len(subs)
	}
	return n
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

// Publish hands durably stored events of stream (in seq order) to its subscribers, which
// share them: the events must not be modified afterwards. It never blocks.
func (f *Feed) Publish(stream string, evs []*messages.Event) {
	if len(evs) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs[stream]) > 0 {
		f.pubs[stream]++
		// The window is trimmed once it passes trimAt: finding what every subscriber was
		// given looks at each of them, which a publish to thousands must not do every time.
		low := uint64(0)
		if len(f.recent[stream])+len(evs) > trimAt {
			low = f.delivered(stream)
		}
		f.remember(stream, evs, low)
		if low > 0 && len(f.recent[stream]) > trimAt {
			// Earlier batches are still unread (a burst: a session's pipeline settled
			// several appends at once): one subscriber they wait for trims the window once
			// it has taken them, instead of the next publish. One, not each: a trim looks
			// at every subscriber of the stream, so a trim by each of a stream's thousands
			// would cost the square of their number per burst.
			for s := range f.subs[stream] {
				if s.delivered.Load() == low {
					s.trim.Store(true)
					break
				}
			}
		}
	}
	for s := range f.subs[stream] {
		s.published = evs[len(evs)-1].GetSeq()
		if !s.lagged.Load() {
			select {
			case s.live <- evs:
			default:
				// Full: drop the live buffer; Next reads the journal instead.
				s.lagged.Store(true)
			}
		}
		s.notify()
	}
}

// trimAt is the size past which a stream's window of recent events is trimmed of what
// every subscriber has been given: an active session followed by readers that keep up
// holds about this many events in the feed, not Options.Recent, and a publish looks at
// every subscriber's position only once per about trimAt events.
const trimAt = 8

// delivered is the lowest seq every subscriber of stream has already been given: no
// catch-up of theirs needs an event at or before it. Called with f.mu.
func (f *Feed) delivered(stream string) uint64 {
	low := uint64(math.MaxUint64)
	for s := range f.subs[stream] {
		low = min(low, s.delivered.Load())
	}
	return low
}

// remember adds evs to stream's window of recent events, keeping its last
// Options.Recent of those after upTo (what every subscriber has been given: only a
// subscriber's catch-up reads the window, from past what it was given), and at least the
// last one (so that a window ending where a lagging subscriber already is tells it that
// nothing is missing); a window that would not stay contiguous starts over. Called with f.mu.
//
// Subscribers that keep up (the usual case) have been given nearly everything published,
// so an active session's window holds a few events instead of its last Options.Recent.
func (f *Feed) remember(stream string, evs []*messages.Event, upTo uint64) {
	if f.opts.Recent < 0 {
		return
	}
	w := f.recent[stream]
	if len(w) > 0 && w[len(w)-1].GetSeq()+1 != evs[0].GetSeq() {
		w = nil
	}
	if drop := given(w, evs, upTo); drop > 0 {
		if drop >= len(w) {
			w, evs = nil, evs[drop-len(w):]
		} else {
			w = append(w[:0:0], w[drop:]...) // a fresh array: readers keep the old one
		}
	}
	if over := len(w) + len(evs) - f.opts.Recent; over > 0 {
		if over >= len(w) {
			w, evs = nil, evs[min(over-len(w), len(evs)):]
		} else {
			w = append(w[:0:0], w[over:]...) // a fresh array: readers keep the old one
		}
	}
	f.recent[stream] = append(w, evs...)
}

// forget trims stream's window of what every subscriber has been given (but its last
// event), when a subscriber that held it back has caught up.
func (f *Feed) forget(stream string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.recent[stream]
	if drop := given(w, nil, f.delivered(stream)); drop > 0 {
		f.recent[stream] = append(w[:0:0], w[drop:]...) // a fresh array: readers keep the old one
	}
}

// given is how many of the first events of w followed by evs have seq <= upTo, short
// of the last one.
func given(w, evs []*messages.Event, upTo uint64) int {
	n := 0
	for _, part := range [2][]*messages.Event{w, evs} {
		for _, ev := range part {
			if ev.GetSeq() > upTo || n == len(w)+len(evs)-1 {
				return n
			}
			n++
		}
	}
	return n
}

// recentAfter returns stream's remembered events with seq > after, and whether they
// reach back to after+1 (ok false: the window starts later, read the journal).
func (f *Feed) recentAfter(stream string, after uint64) ([]*messages.Event, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.recent[stream]
	if len(w) == 0 || w[0].GetSeq() > after+1 {
		return nil, false
	}
	if last := w[len(w)-1].GetSeq(); last <= after {
		return nil, true
	}
	return w[after+1-w[0].GetSeq():], true
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

// Follow subscribes to stream's events with seq > afterSeq and, when deltas > 0, to its
// live deltas too (up to deltas of them waiting unread). It is the reader's entry point
// of the live vocabulary: the gateway's Feed.
func (f *Feed) Follow(stream string, afterSeq uint64, deltas int) live.Subscription {
	return f.subscribe(stream, afterSeq, max(deltas, 0))
}

// LastSeq returns the seq of stream's last stored event, read from the journal: 0 when
// the stream has none (no such session).
func (f *Feed) LastSeq(ctx context.Context, stream string) (uint64, error) {
	return f.j.LastSeq(ctx, stream) // the journal's errors name the stream
}

// Subscribe returns a subscription to stream's events with seq > afterSeq.
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
	s := &Subscription{f: f, stream: stream, last: afterSeq, live: make(chan []*messages.Event, f.opts.Buffer), catchUp: true,
		wake: make(chan struct{}, 1), doneCh: make(chan struct{})}
	s.delivered.Store(afterSeq)
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
			close(s.doneCh)
			s.notify()
		}
	}
	f.subs = nil
}

// Subscription is one reader of one stream. Next must not be called concurrently.
type Subscription struct {
	f      *Feed
	stream string
	live   chan []*messages.Event
	deltas chan Delta // nil unless subscribed with deltas

	// lagged (its live buffer overflowed), closed and poll (Options.Poll: read the
	// journal) are set by the feed and taken by the reader.
	lagged, closed, poll atomic.Bool
	// delivered is last, for the feed: the window of recent events keeps nothing a
	// subscriber was already given (remember).
	delivered atomic.Uint64
	// trim is set by the feed when the window keeps events for this subscriber: once it
	// has taken every batch published to it, it trims the window (forget).
	trim atomic.Bool
	// wake wakes a reader waiting in NextUpdate for a poll.
	wake chan struct{}

	// doneCh is closed (with f.mu held) when the subscription or the feed closes. It is
	// made with the subscription, so a reader waits on it without taking f.mu.
	doneCh chan struct{}

	// Guarded by f.mu.
	// published is the newest seq Publish handed this subscription (0: none yet, so a
	// delta without AfterSeq cannot be placed and is dropped for it).
	published uint64
	notifyCh  chan<- struct{} // nil unless Notify was called

	// Owned by the reader.
	last    uint64
	catchUp bool
	// fromRecent: the catch-up is after a lag, so the feed's window of recent events may
	// serve it (a subscribe or a poll reads the journal).
	fromRecent bool
	// corrupt is a stored record that did not decode: returned once the events before
	// it are delivered, and from then on.
	corrupt error
	// queue holds the events taken and not yet delivered, held the deltas; both reuse
	// their arrays, so a delivery allocates nothing.
	queue fifo[*messages.Event]
	held  fifo[Delta]
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
// "look at all of them". Events published before Notify are not signalled: call
// TryNextUpdate once after it.
func (s *Subscription) Notify(ch chan<- struct{}) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.notifyCh = ch
}

// Last returns the sequence number of the last event Next returned (or afterSeq).
func (s *Subscription) Last() uint64 { return s.last }

// Next returns the next event in sequence order, waiting for one to be published.
// Deltas, if subscribed, are skipped.
func (s *Subscription) Next(ctx context.Context) (*messages.Event, error) {
	for {
		u, err := s.NextUpdate(ctx)
		if err != nil || !u.IsDelta {
			return u.Event, err
		}
	}
}

// NextUpdate returns the next event in sequence order or a live delta (for
// subscriptions made with SubscribeWithDeltas), waiting for one to be published. Events
// keep their guarantees (no gap, no repeat). Deltas are best-effort, in order within a
// call, and placed in the event stream causally: after their call's llm_requested
// (Delta.AfterSeq) and before its llm_responded.
func (s *Subscription) NextUpdate(ctx context.Context) (Update, error) {
	for {
		u, ok, err := s.TryNextUpdate(ctx)
		if err != nil || ok {
			return u, err
		}
		select {
		case <-ctx.Done():
			return Update{}, ctx.Err()
		case <-s.doneCh:
		case batch := <-s.live:
			s.queue.push(batch...)
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
		if s.held.len() > 0 && s.held.front().AfterSeq <= s.last {
			return Update{Delta: s.held.pop(), IsDelta: true}, true, nil
		}
		if s.queue.len() > 0 {
			ev := s.queue.pop()
			if ev.GetSeq() <= s.last {
				continue // already delivered (overlap of journal and live)
			}
			if ev.GetSeq() > s.last+1 {
				// A gap can only mean events we have not seen yet: read them from the journal.
				s.queue.reset()
				s.catchUp = true
				continue
			}
			s.last = ev.GetSeq()
			s.delivered.Store(s.last)
			if s.queue.len() == 0 && len(s.live) == 0 && s.trim.Load() && s.trim.CompareAndSwap(true, false) {
				s.f.forget(s.stream)
			}
			return Update{Event: ev}, true, nil
		}
		// Atomics, not the feed's lock: with thousands of subscribers a publish and their
		// readers would otherwise all queue on one mutex. A batch published between the
		// swap and the drain is dropped with the rest and read back from the journal.
		if s.lagged.CompareAndSwap(true, false) {
			s.catchUp, s.fromRecent = true, !s.catchUp || s.fromRecent
			drain(s.live)
		}
		if s.poll.CompareAndSwap(true, false) {
			s.catchUp, s.fromRecent = true, false
		}
		if s.closed.Load() {
			return Update{}, false, ErrClosed
		}
		if s.corrupt != nil {
			return Update{}, false, s.corrupt
		}
		if s.catchUp && s.fromRecent {
			s.fromRecent = false
			// Everything published since the lag is in the window when it reaches back to
			// s.last+1: then the catch-up is complete without the journal.
			if evs, ok := s.f.recentAfter(s.stream, s.last); ok {
				s.queue.push(evs...)
				s.catchUp = false
				continue
			}
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
			s.queue.push(batch...)
		default:
			return Update{}, false, nil
		}
	}
}

// TryNext is TryNextUpdate for events only: deltas, if subscribed, are skipped.
func (s *Subscription) TryNext(ctx context.Context) (*messages.Event, bool, error) {
	for {
		u, ok, err := s.TryNextUpdate(ctx)
		if err != nil || !ok || !u.IsDelta {
			return u.Event, ok, err
		}
	}
}

// takeDeltas moves the deltas published so far into held. A delta is published before
// the events that follow it causally, so taking them before each event keeps order.
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
	if s.held.len() >= cap(s.deltas) {
		s.held.pop()
	}
	s.held.push(d)
}

var errPageFull = errors.New("page full")

func (s *Subscription) readJournal(ctx context.Context) (int, error) {
	n := 0
	err := s.f.j.Load(ctx, s.stream, s.last, func(r persistence.Record) error {
		ev, err := messages.DecodeEvent(r.Seq, r.Data)
		if err != nil {
			kind := persistence.ErrCorrupt
			if errors.Is(err, messages.ErrUnknownEvent) {
				kind = persistence.ErrNewerFormat // not damage: a newer binary wrote it
			}
			s.corrupt = fmt.Errorf("feed: read %s: %w: %w", s.stream, kind, err)
			return errPageFull // deliver what came before it first
		}
		s.queue.push(ev)
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
	close(s.doneCh)
	if subs := s.f.subs[s.stream]; subs != nil {
		delete(subs, s)
		if len(subs) == 0 {
			delete(s.f.subs, s.stream)
			delete(s.f.recent, s.stream)
			delete(s.f.pubs, s.stream)
		}
	}
}

func drain(ch chan []*messages.Event) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// fifo is a queue that reuses its array: taken from the front, added at the back, it
// starts again at the array's beginning whenever it empties (and moves what it holds
// there when it would otherwise grow), so a reader that keeps up allocates nothing.
type fifo[T any] struct {
	buf  []T
	head int // buf[head:] is the queue
}

// maxIdleFifo is the capacity an empty fifo keeps (a catch-up page's array is let go).
const maxIdleFifo = 64

func (q *fifo[T]) len() int { return len(q.buf) - q.head }

// front is the first element; the queue must not be empty.
func (q *fifo[T]) front() T { return q.buf[q.head] }

// pop takes the first element; the queue must not be empty.
func (q *fifo[T]) pop() T {
	v := q.buf[q.head]
	var zero T
	q.buf[q.head] = zero // the array keeps no reference to it
	q.head++
	if q.head == len(q.buf) {
		q.reset()
	}
	return v
}

// push adds vs at the back.
func (q *fifo[T]) push(vs ...T) {
	if q.head > 0 && len(q.buf)+len(vs) > cap(q.buf) {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, vs...)
}

// reset empties the queue.
func (q *fifo[T]) reset() {
	if cap(q.buf) > maxIdleFifo {
		q.buf, q.head = nil, 0
		return
	}
	clear(q.buf)
	q.buf, q.head = q.buf[:0], 0
}
