package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/internal/rendercache"
	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/messages"
)

// Server frame ops.
const (
	FrameEvent = "event"
	FrameDelta = "delta"
	FrameAck   = "ack"
	FrameError = "error"
	// FrameRestart carries one supervision event of the node (subscribe_restarts).
	FrameRestart = "restart"
)

// ackFrame answers a request.
type ackFrame struct {
	Op        string          `json:"op"`
	ID        json.RawMessage `json:"id,omitempty"`
	Request   string          `json:"request"`
	SessionID string          `json:"session_id,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
}

// errorFrame refuses a request or ends a subscription.
type errorFrame struct {
	Op        string          `json:"op"`
	ID        json.RawMessage `json:"id,omitempty"`
	Request   string          `json:"request,omitempty"`
	SessionID string          `json:"session_id,omitempty"`
	Code      string          `json:"code"`
	Message   string          `json:"message"`
	// RequestID names this error in the node's log, which has its detail.
	RequestID string `json:"request_id,omitempty"`
	// RetryAfter is how many seconds to wait before retrying a refusal by a tenant's
	// quota (resource_exhausted; HTTP's Retry-After).
	RetryAfter int `json:"retry_after,omitempty"`
}

// deltaFrame carries streamed model text. It has no seq: deltas are not journaled.
type deltaFrame struct {
	Op        string `json:"op"`
	SessionID string `json:"session_id"`
	Kind      string `json:"kind"`
	CallID    string `json:"call_id"`
	StepID    string `json:"step_id,omitempty"`
	Index     uint32 `json:"index"`
	Attempt   uint32 `json:"attempt"`
	AfterSeq  uint64 `json:"after_seq"`
	Text      string `json:"text"`
}

func ackBytes(req *Request, sessionID string, result json.RawMessage) []byte {
	b, _ := json.Marshal(ackFrame{Op: FrameAck, ID: req.ID, Request: req.Op, SessionID: sessionID, Result: result})
	return b
}

func errorBytes(req *Request, sessionID, requestID string, e *apiError) []byte {
	f := errorFrame{Op: FrameError, Code: e.code, Message: e.msg, SessionID: sessionID, RequestID: requestID}
	if n, err := strconv.Atoi(e.retryAfter); err == nil && n > 0 {
		f.RetryAfter = n
	}
	if req != nil {
		f.ID, f.Request = req.ID, truncate(req.Op, 40)
	}
	b, _ := json.Marshal(f)
	return b
}

func deltaBytes(session string, d live.Delta) []byte {
	kind := d.Kind
	if kind == "" {
		kind = live.KindText
	}
	b, _ := json.Marshal(deltaFrame{Op: FrameDelta, SessionID: session, Kind: kind, CallID: d.CallID, StepID: d.StepID,
		Index: d.Index, Attempt: d.Attempt, AfterSeq: d.AfterSeq, Text: d.Text})
	return b
}

// eventFrame renders a stored event as an event frame: {"op":"event"} followed by the
// event's one JSON rendering (messages.AppendEventJSON). It is encoded once, into a
// pooled scratch buffer, then copied into the frame's own slice of its exact size: one
// allocation per event, however large its JSON (growing a fresh buffer took several,
// with room to spare kept for as long as the frame is cached).
func eventFrame(ev *messages.Event) ([]byte, error) {
	const head = `{"op":"event"`
	scratch := frameScratch.Get().(*[]byte)
	defer frameScratch.Put(scratch)
	out, err := messages.AppendEventJSON(append((*scratch)[:0], head...), ev)
	if err != nil {
		return nil, fmt.Errorf("render event %d: %w", ev.GetSeq(), err)
	}
	if cap(out) <= maxScratch {
		*scratch = out[:0] // grown: kept for the next frame (not a huge one's)
	}
	out[len(head)] = ',' // the event object's '{' joins it to the head
	return bytes.Clone(out), nil
}

// frameScratch holds the buffers event frames are encoded into (*[]byte).
var frameScratch = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxScratch bounds the buffers frameScratch keeps.
const maxScratch = 64 << 10

// frameCache renders each event once however many subscribers it goes to: events are
// immutable, so (stream, seq) names a frame for good. It keeps the newest frames of a
// bounded number of events. Delta frames are kept the same way, by the delta's whole
// content. For WebSocket connections each frame is also prepared once as a WebSocket
// message (its header and payload, written as they are by every connection).
type frameCache struct {
	events   *rendercache.Cache[frameKey, []byte]
	deltas   *rendercache.Cache[deltaKey, []byte]
	wsEvents *rendercache.Cache[frameKey, *websocket.PreparedMessage]
	wsDeltas *rendercache.Cache[deltaKey, *websocket.PreparedMessage]
}

type frameKey struct {
	stream string
	seq    uint64
}

// deltaKey names a delta frame: a delta has no seq, its content is its name (the same
// text of the same call at the same place renders the same frame).
type deltaKey struct {
	stream string
	d      live.Delta
}

// newFrameCache keeps the frames of up to events events and deltas deltas.
func newFrameCache(events, deltas int) *frameCache {
	return &frameCache{events: rendercache.New[frameKey, []byte](events), deltas: rendercache.New[deltaKey, []byte](deltas),
		wsEvents: rendercache.New[frameKey, *websocket.PreparedMessage](events),
		wsDeltas: rendercache.New[deltaKey, *websocket.PreparedMessage](deltas)}
}

// event returns the frame of ev in stream, rendering it on first use; concurrent
// callers of one event wait for the one rendering.
func (c *frameCache) event(stream string, ev *messages.Event) ([]byte, error) {
	return c.events.Get(frameKey{stream, ev.GetSeq()}, func() ([]byte, error) { return eventFrame(ev) })
}

// delta returns the frame of delta d of stream (deltaBytes), rendering it on first use.
func (c *frameCache) delta(stream string, d live.Delta) []byte {
	b, _ := c.deltas.Get(deltaKey{stream, d}, func() ([]byte, error) { return deltaBytes(stream, d), nil })
	return b
}

// wsEvent returns the frame of ev in stream (event) as a WebSocket text message.
func (c *frameCache) wsEvent(stream string, ev *messages.Event) (*websocket.PreparedMessage, error) {
	return c.wsEvents.Get(frameKey{stream, ev.GetSeq()}, func() (*websocket.PreparedMessage, error) {
		b, err := c.event(stream, ev)
		if err != nil {
			return nil, err
		}
		return prepare(b)
	})
}

// wsDelta returns the frame of delta d of stream (delta) as a WebSocket text message.
func (c *frameCache) wsDelta(stream string, d live.Delta) (*websocket.PreparedMessage, error) {
	return c.wsDeltas.Get(deltaKey{stream, d}, func() (*websocket.PreparedMessage, error) { return prepare(c.delta(stream, d)) })
}

func prepare(frame []byte) (*websocket.PreparedMessage, error) {
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, frame)
	if err != nil {
		return nil, fmt.Errorf("prepare a websocket frame: %w", err)
	}
	return pm, nil
}
