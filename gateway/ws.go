package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/messages"
)

// conn is one WebSocket client. Its goroutines: the read loop (the HTTP handler's
// goroutine, which owns the connection and cleans up), the write loop (the only writer
// of data frames: replies from the send queue, and the subscriptions' events and deltas,
// which it takes from the feed itself when the feed signals ready) and one goroutine per
// in-flight grain call, counted in work. A subscription costs no goroutine.
type conn struct {
	h      *Handler
	ws     *websocket.Conn
	nc     *batchConn // ws's connection: holds the frames of one serveSubs
	scope  Scope
	caller *messages.Principal // the authenticated principal every request acts for
	remote string

	send     chan []byte   // replies waiting for the write loop
	inflight chan struct{} // semaphore of concurrent grain calls
	ready    chan struct{} // buffer 1: a subscription may have something (feed Notify)
	// slow fires when one write has been blocked for SlowConsumerTimeout: the client is
	// not reading, and is closed as a slow consumer once the write goes through.
	slow *time.Timer

	ctx    context.Context // ends with the connection
	cancel context.CancelFunc

	closeOnce sync.Once
	closing   chan struct{} // closed by closeWith: the write loop sends the close frame
	closeCode int           // set before closing is closed
	closeText string

	deadlineMu  sync.Mutex
	closeTimely bool // the read deadline now waits for the peer's close, not for pings

	readerDone chan struct{} // the read loop ended and all work stopped
	writerDone chan struct{}

	mu       sync.Mutex
	subs     map[string]*wsSub
	draining bool           // Shutdown began: no new work
	work     sync.WaitGroup // grain calls; Add only under mu while !draining

	serving []*wsSub // the write loop's scratch list of subscriptions to serve

	restarts bool // subscribe_restarts is on (under mu)
}

// wsSub is one subscription of a connection, served by the connection's write loop.
type wsSub struct {
	session string
	sub     live.Subscription
	// acked is set (under conn.mu) once the subscribe ack is queued: the write loop
	// serves only acked subscriptions, and writes queued replies first.
	acked bool

	// mu is held by the write loop while it takes and writes one frame of the
	// subscription, and by stop: once stop returns, no frame of it follows.
	mu      sync.Mutex
	stopped bool
}

// stop ends the subscription; no frame of it is written after stop returns.
func (s *wsSub) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.stopped = true
		s.sub.Close()
	}
}

// serveWS upgrades an authenticated request and serves the connection until it ends.
func (h *Handler) serveWS(w http.ResponseWriter, r *http.Request) {
	caller := callerOf(r) // require authenticated it, or nil: the first frame will (wsauth.go)
	if h.isClosed() {
		writeError(w, errorf(CodeUnavailable, "the gateway is shutting down"))
		return
	}
	hj := &batchHijacker{ResponseWriter: w}
	ws, err := h.upgrader.Upgrade(hj, r, http.Header{RequestIDHeader: {w.Header().Get(RequestIDHeader)}})
	if err != nil {
		return // the upgrader answered the request
	}
	if caller == nil && h.authEnabled() { // opened without a credential: the first frame authenticates
		if caller = h.firstFrameAuth(r, ws); caller == nil {
			_ = ws.Close()
			return
		}
	}
	c := &conn{
		h: h, ws: ws, nc: hj.conn, scope: scopeOf(auth.FromMessage(caller)), caller: caller,
		remote:     r.RemoteAddr,
		send:       make(chan []byte, h.cfg.SendQueue),
		inflight:   make(chan struct{}, h.cfg.MaxInflight),
		ready:      make(chan struct{}, 1),
		closing:    make(chan struct{}),
		readerDone: make(chan struct{}),
		writerDone: make(chan struct{}),
		subs:       map[string]*wsSub{},
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.slow = time.AfterFunc(time.Hour, func() {
		c.logger().Info("closing a slow consumer", "waited", h.cfg.SlowConsumerTimeout)
		c.closeWith(CloseSlowConsumer, "slow consumer: frames are not read; reconnect and subscribe from the last seq received")
	})
	c.slow.Stop()
	defer c.slow.Stop()
	c.nc.timeout, c.nc.slow, c.nc.slowWait = h.cfg.WriteTimeout, c.slow, h.cfg.SlowConsumerTimeout
	if !h.track(c) {
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Now().Add(time.Second))
		_ = ws.Close()
		c.cancel()
		return
	}
	defer h.untrack(c)
	c.run()
}

// run serves the connection: the write loop in its own goroutine, the read loop here,
// then the cleanup once the read side ends (peer gone, close handshake done, deadline).
func (c *conn) run() {
	go c.writeLoop()
	c.readLoop()
	c.cancel()
	c.stopSubs()
	c.work.Wait()
	close(c.readerDone)
	<-c.writerDone
	_ = c.ws.Close()
}

// closeWith asks the write loop to send a close frame (after flushing the queue, unless
// the reader is too slow for that) and then to end. Only the first call counts.
func (c *conn) closeWith(code int, text string) {
	c.closeOnce.Do(func() {
		c.closeCode, c.closeText = code, text
		close(c.closing)
	})
}

// logger is the gateway's logger with the connection's address (made on use: most
// connections never log).
func (c *conn) logger() *slog.Logger { return c.h.cfg.Logger.With("remote", c.remote) }

func (c *conn) isClosing() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// abort drops the connection without a handshake (shutdown deadline passed).
func (c *conn) abort() { _ = c.ws.Close() }

// drain is the graceful part of Shutdown for one connection.
func (c *conn) drain() {
	c.mu.Lock()
	c.draining = true
	c.mu.Unlock()
	c.stopSubs()
	c.work.Wait() // in-flight grain calls finish and queue their answers
	c.closeWith(websocket.CloseGoingAway, "server shutting down")
	<-c.readerDone
}

func (c *conn) stopSubs() {
	c.mu.Lock()
	subs := make([]*wsSub, 0, len(c.subs))
	for id, s := range c.subs {
		subs = append(subs, s)
		delete(c.subs, id)
	}
	c.mu.Unlock()
	for _, s := range subs { // not under c.mu: the write loop takes c.mu under s.mu
		s.stop()
	}
}

// extendReadDeadline pushes the read deadline PongWait away, unless the connection is
// closing (then only the close grace counts).
func (c *conn) extendReadDeadline() {
	c.deadlineMu.Lock()
	defer c.deadlineMu.Unlock()
	if !c.closeTimely {
		_ = c.ws.SetReadDeadline(time.Now().Add(c.h.cfg.PongWait))
	}
}

func (c *conn) awaitPeerClose() {
	c.deadlineMu.Lock()
	defer c.deadlineMu.Unlock()
	c.closeTimely = true
	_ = c.ws.SetReadDeadline(time.Now().Add(c.h.cfg.CloseGrace))
}

func (c *conn) readLoop() {
	c.extendReadDeadline()
	c.ws.SetPongHandler(func(string) error { c.extendReadDeadline(); return nil })
	limit := c.h.cfg.MaxFrameBytes
	for {
		mt, rd, err := c.ws.NextReader()
		if err != nil {
			if !websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived) && !c.isClosing() {
				c.logger().Debug("websocket read ended", "error", err)
			}
			return
		}
		c.extendReadDeadline()
		if c.isClosing() {
			continue // read (and discard) until the peer's close frame
		}
		if mt != websocket.TextMessage {
			c.reply(c.errorFrame(nil, "", errorf(CodeInvalidArgument, "binary frames are not supported: send JSON text frames")))
			continue
		}
		data, err := io.ReadAll(io.LimitReader(rd, int64(limit)+1))
		if err != nil {
			return
		}
		if len(data) > limit {
			c.closeWith(websocket.CloseMessageTooBig, fmt.Sprintf("frame exceeds %d bytes", limit))
			continue
		}
		c.dispatch(data)
	}
}

func (c *conn) writeLoop() {
	defer close(c.writerDone)
	ping := time.NewTicker(c.h.cfg.PingInterval)
	defer ping.Stop()
	for {
		if c.isClosing() { // before any further frame: a slow consumer gets its close next
			c.finish()
			return
		}
		select {
		case <-c.closing:
			c.finish()
			return
		case <-c.readerDone:
			return
		case f := <-c.send:
			if err := c.write(f); err != nil {
				c.logger().Debug("websocket write failed", "error", err)
				c.abort()
				return
			}
		case <-c.ready:
			if err := c.serveSubs(); err != nil {
				c.logger().Debug("websocket write failed", "error", err)
				c.abort()
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.h.cfg.WriteTimeout)); err != nil {
				c.abort()
				return
			}
		}
	}
}

// finish flushes the queued frames (not for a slow consumer: it would not read them in
// time), sends the close frame and gives the peer CloseGrace to answer it.
func (c *conn) finish() {
	if c.closeCode != CloseSlowConsumer {
		for n := len(c.send); n > 0; n-- {
			if err := c.write(<-c.send); err != nil {
				c.abort()
				return
			}
		}
	}
	msg := websocket.FormatCloseMessage(c.closeCode, c.closeText)
	if err := c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(c.h.cfg.WriteTimeout)); err != nil {
		c.abort()
		return
	}
	c.awaitPeerClose()
}

// write writes one frame. A write blocked for SlowConsumerTimeout marks the client a
// slow consumer (closed once the write goes through); WriteTimeout fails it. In a hold
// (serveSubs) the frame is kept, and the connection bounds the write of what it keeps.
func (c *conn) write(f []byte) error {
	if c.nc.held() {
		return c.ws.WriteMessage(websocket.TextMessage, f)
	}
	c.slow.Reset(c.h.cfg.SlowConsumerTimeout)
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.h.cfg.WriteTimeout))
	err := c.ws.WriteMessage(websocket.TextMessage, f)
	c.slow.Stop()
	return err
}

// writePrepared writes a frame prepared once for every connection (frameCache), as
// write does.
func (c *conn) writePrepared(pm *websocket.PreparedMessage) error {
	if c.nc.held() {
		return c.ws.WritePreparedMessage(pm)
	}
	c.slow.Reset(c.h.cfg.SlowConsumerTimeout)
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.h.cfg.WriteTimeout))
	err := c.ws.WritePreparedMessage(pm)
	c.slow.Stop()
	return err
}

// serveBurst is how many subscription frames the write loop writes before it looks at
// pings and replies again.
const serveBurst = 256

// serveSubs writes what the acked subscriptions have ready (serveReady), all of it sent
// in one write once it is taken (batchConn): the frames ready at once cost one system
// call, not one each. Errors are write errors.
func (c *conn) serveSubs() error {
	c.nc.holdWrites()
	err := c.serveReady()
	c.slow.Reset(c.h.cfg.SlowConsumerTimeout)
	if ferr := c.nc.flush(time.Now().Add(c.h.cfg.WriteTimeout)); err == nil {
		err = ferr
	}
	c.slow.Stop()
	return err
}

// serveReady writes what the acked subscriptions have ready, one frame per subscription
// per round (fair between sessions), after the replies already queued (a subscription's
// ack precedes its events). After serveBurst frames it signals itself and returns, so
// pings and replies are not held up by a long catch-up. Errors are write errors.
func (c *conn) serveReady() error {
	c.mu.Lock()
	c.serving = c.serving[:0]
	for _, s := range c.subs {
		if s.acked {
			c.serving = append(c.serving, s)
		}
	}
	c.mu.Unlock()
	if err := c.flushReplies(); err != nil {
		return err
	}
	for n := 0; ; {
		progress := false
		for _, s := range c.serving {
			if c.isClosing() {
				return nil
			}
			wrote, err := c.serveOne(s)
			if err != nil {
				return err
			}
			if wrote {
				progress = true
				n++
			}
		}
		if !progress {
			return nil
		}
		if n >= serveBurst {
			c.poke()
			return nil
		}
	}
}

// flushReplies writes the queued replies without waiting for more.
func (c *conn) flushReplies() error {
	for !c.isClosing() {
		select {
		case f := <-c.send:
			if err := c.write(f); err != nil {
				return err
			}
		default:
			return nil
		}
	}
	return nil
}

// serveOne writes s's next event or delta, if one is ready. A failed subscription is
// ended with an error frame for it. Errors are write errors.
func (c *conn) serveOne(s *wsSub) (wrote bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false, nil
	}
	u, ok, err := s.sub.TryNextUpdate(c.ctx)
	switch {
	case err != nil && c.ctx.Err() != nil:
		return false, nil // the connection is ending
	case errors.Is(err, live.ErrClosed):
		return true, c.endSub(s, hidden(CodeUnavailable, fmt.Sprintf("the subscription ended after seq %d: the node is stopping; subscribe again", s.sub.Last()), err))
	case err != nil:
		return true, c.endSub(s, readError(fmt.Sprintf("the subscription ended after seq %d: %s", s.sub.Last(), msgUnavailable), err))
	case !ok:
		return false, nil
	case u.IsDelta:
		pm, err := c.h.frames.wsDelta(s.session, u.Delta)
		if err != nil {
			return true, c.endSub(s, hidden(CodeInternal, msgInternal, err))
		}
		return true, c.writePrepared(pm)
	}
	pm, err := c.h.frames.wsEvent(s.session, u.Event)
	if err != nil {
		return true, c.endSub(s, hidden(CodeInternal, msgInternal, err))
	}
	return true, c.writePrepared(pm)
}

// poke wakes the write loop to serve the subscriptions.
func (c *conn) poke() {
	select {
	case c.ready <- struct{}{}:
	default:
	}
}

// enqueue queues a frame, waiting up to SlowConsumerTimeout for room; a queue that stays
// full closes the connection as a slow consumer. False when the frame was not queued.
func (c *conn) enqueue(ctx context.Context, f []byte) bool {
	select {
	case c.send <- f:
		return true
	case <-c.closing:
		return false
	case <-ctx.Done():
		return false
	default:
	}
	t := time.NewTimer(c.h.cfg.SlowConsumerTimeout)
	defer t.Stop()
	select {
	case c.send <- f:
		return true
	case <-c.closing:
		return false
	case <-ctx.Done():
		return false
	case <-t.C:
		c.logger().Info("closing a slow consumer", "queued", len(c.send))
		c.closeWith(CloseSlowConsumer, "slow consumer: send queue full; reconnect and subscribe from the last seq received")
		return false
	}
}

func (c *conn) reply(f []byte) { c.enqueue(c.ctx, f) }

func (c *conn) replyError(req *Request, sessionID string, err error) {
	c.reply(c.errorFrame(req, sessionID, toAPIError(err)))
}

// errorFrame renders e as an error frame with a new request id; an error with a detail
// (the cause behind a plain message) is logged with that id.
func (c *conn) errorFrame(req *Request, sessionID string, e *apiError) []byte {
	rid := NewID("req")
	if e.detail != nil {
		op := ""
		if req != nil {
			op = truncate(req.Op, 40)
		}
		c.logger().Warn("request failed", "op", op, "session_id", sessionID, "request_id", rid, "code", e.code, "error", e.detail.Error())
	}
	return errorBytes(req, sessionID, rid, e)
}

// dispatch answers one client frame. It runs on the read loop: subscribe and unsubscribe
// are done in order here; grain calls run concurrently (MaxInflight at most).
func (c *conn) dispatch(data []byte) {
	req, err := decodeRequest(data)
	if err != nil {
		c.replyError(req, "", err)
		return
	}
	req.caller, req.ctx = c.caller, c.ctx
	spec, ok := ops[req.Op]
	switch {
	case req.Op == "":
		c.replyError(req, "", errorf(CodeInvalidArgument, "op is required"))
		return
	case !ok:
		c.replyError(req, "", errorf(CodeUnknownOp, "unknown op %q", truncate(req.Op, 40)))
		return
	case c.scope < spec.scope:
		c.replyError(req, req.SessionID, errorf(CodePermissionDenied, "this connection's token is %s-only; %s needs a %s token", c.scope, req.Op, spec.scope))
		return
	}
	switch req.Op {
	case OpSubscribe:
		c.subscribe(req)
	case OpUnsubscribe:
		c.unsubscribe(req)
	case OpSubscribeRestarts:
		c.subscribeRestarts(req)
	default:
		c.call(req)
	}
}

func (c *conn) call(req *Request) {
	c.mu.Lock()
	if c.draining {
		c.mu.Unlock()
		c.replyError(req, req.SessionID, errorf(CodeUnavailable, "the gateway is shutting down"))
		return
	}
	c.work.Add(1)
	c.mu.Unlock()
	select {
	case c.inflight <- struct{}{}:
	case <-c.ctx.Done():
		c.work.Done()
		return
	}
	go func() {
		defer c.work.Done()
		defer func() { <-c.inflight }()
		res, err := c.h.run(req)
		if err != nil {
			c.replyError(req, req.SessionID, err)
			return
		}
		c.reply(ackBytes(req, res.sessionID, res.body))
	}()
}

func (c *conn) subscribe(req *Request) {
	if err := checkSessionID(req.SessionID); err != nil {
		c.replyError(req, "", err)
		return
	}
	if c.h.cfg.Feed == nil {
		c.replyError(req, req.SessionID, errorf(CodeUnsupported, "this gateway has no event feed"))
		return
	}
	// An unknown session is not_found, as on every route: a subscription waits for the
	// events of a session that exists (start it first; from_seq 0 delivers it all).
	if _, err := c.h.sessionHead(c.ctx, c.caller, req.SessionID); err != nil {
		c.replyError(req, req.SessionID, err)
		return
	}
	from := uint64(0)
	if req.FromSeq != nil {
		from = *req.FromSeq
	}
	c.mu.Lock()
	switch {
	case c.draining:
		c.mu.Unlock()
		c.replyError(req, req.SessionID, errorf(CodeUnavailable, "the gateway is shutting down"))
		return
	case c.subs[req.SessionID] != nil:
		c.mu.Unlock()
		c.replyError(req, req.SessionID, errorf(CodeFailedPrecondition, "already subscribed to %s on this connection: unsubscribe first", req.SessionID))
		return
	case len(c.subs) >= c.h.cfg.MaxSubscriptions:
		c.mu.Unlock()
		c.replyError(req, req.SessionID, errorf(CodeResourceExhausted, "a connection may hold %d subscriptions", c.h.cfg.MaxSubscriptions))
		return
	}
	deltas := 0
	if req.Deltas == nil || *req.Deltas {
		deltas = c.h.cfg.DeltaBuffer
	}
	s := &wsSub{session: req.SessionID, sub: c.h.cfg.Feed.Follow(req.SessionID, from, deltas)}
	s.sub.Notify(c.ready)
	c.subs[req.SessionID] = s
	c.mu.Unlock()
	// The ack is queued before the subscription is served: it precedes its events.
	result, _ := json.Marshal(map[string]uint64{"from_seq": from})
	c.reply(ackBytes(req, req.SessionID, result))
	c.mu.Lock()
	s.acked = true
	c.mu.Unlock()
	c.poke() // stored events are not signalled by the feed
}

func (c *conn) unsubscribe(req *Request) {
	if err := checkSessionID(req.SessionID); err != nil {
		c.replyError(req, "", err)
		return
	}
	c.mu.Lock()
	s := c.subs[req.SessionID]
	delete(c.subs, req.SessionID)
	c.mu.Unlock()
	if s == nil {
		c.replyError(req, req.SessionID, errorf(CodeNotFound, "not subscribed to %s", req.SessionID))
		return
	}
	s.stop() // no event of this subscription follows the ack
	result, _ := json.Marshal(map[string]uint64{"last_seq": s.sub.Last()})
	c.reply(ackBytes(req, req.SessionID, result))
}

// endSub ends a failed subscription (the write loop holds s.mu) and tells the client.
func (c *conn) endSub(s *wsSub, e *apiError) error {
	s.stopped = true
	s.sub.Close()
	c.mu.Lock()
	if c.subs[s.session] == s {
		delete(c.subs, s.session)
	}
	c.mu.Unlock()
	return c.write(c.errorFrame(&Request{Op: OpSubscribe}, s.session, e))
}
