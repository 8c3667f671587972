// Package live is the vocabulary of Fathom's live read side: what a reader following a
// session receives and the subscription it reads it from.
//
// A reader subscribes to a session from a sequence number and receives Updates: the
// session's stored events, decoded, in seq order with no gap and no repeat (first the
// ones already in the journal, then the ones stored while it reads), and, if it asked
// for them, live Deltas (streamed model text, a running tool's output) placed causally
// between them. Deltas are never stored: a slow reader may lose some, never an event.
//
// This package holds only types (and Waiter, a reader's wait with a keepalive): it
// imports no journal, no actor and no transport, so a reader such as the gateway depends
// on it alone. live/feed implements Subscription on top of a node's journal, and the
// session grain publishes to it.
//
//	sub := f.Follow("session-1", 0, 16) // a live/feed.Feed; 16 deltas may wait unread
//	defer sub.Close()
//	for {
//		u, err := sub.NextUpdate(ctx)
//		if err != nil {
//			return err
//		}
//		if u.IsDelta {
//			fmt.Print(u.Delta.Text)
//			continue
//		}
//		fmt.Println(u.Event.Type(), u.Event.GetSeq())
//	}
package live

import (
	"context"
	"errors"

	"github.com/fathom-agents/fathom/messages"
)

// ErrClosed is returned by a Subscription after it, or the feed behind it, was closed.
var ErrClosed = errors.New("feed: closed")

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
	// event published so far": the feed fills it in per subscriber, which places a
	// tool's output after its tool_called (published before the tool started).
	AfterSeq uint64
	// Text is the new text.
	Text string
}

// Update is what a subscription delivers: a stored event or a live delta.
type Update struct {
	// Event is set (IsDelta false) for a journaled event, decoded. It is shared by every
	// subscriber of the session and must not be modified.
	Event *messages.Event
	// Delta is set (IsDelta true) for streamed text or tool output.
	Delta   Delta
	IsDelta bool
}

// Subscription is one reader of one session's updates. Its methods other than Close must
// not be called concurrently.
type Subscription interface {
	// NextUpdate returns the next event in seq order or a live delta, waiting for one.
	NextUpdate(ctx context.Context) (Update, error)
	// TryNextUpdate is NextUpdate without the wait: ok is false when nothing is ready
	// now (wait for the Notify channel, then call it again). It may read the journal,
	// bounded by ctx.
	TryNextUpdate(ctx context.Context) (u Update, ok bool, err error)
	// Notify makes the subscription signal ch, without blocking, whenever it may have
	// something new for TryNextUpdate. Several subscriptions may share one channel
	// (give it a buffer of 1); a signal means "look at all of them".
	Notify(ch chan<- struct{})
	// Last returns the seq of the last event delivered (or the seq subscribed from).
	Last() uint64
	// Close unsubscribes. It is idempotent and may be called from any goroutine.
	Close()
}
