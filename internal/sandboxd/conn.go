package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/messages/fsp"
)

// conn is one client connection. Its goroutines: the reader (the HTTP handler's
// goroutine, in serve), the writer, and one per execution; serve returns only after all
// of them ended. Frames leave through one bounded queue, so each execution's frames keep
// their order.
type conn struct {
	srv *Server
	ws  *websocket.Conn
	log *slog.Logger
	dec fsp.Decoder

	out       chan []byte
	done      chan struct{} // closed when the connection is closing
	closeOnce sync.Once
	cause     error // why it closed; read after done

	mu    sync.Mutex
	execs map[string]*execution
	wg    sync.WaitGroup // executions and the writer
}

func newConn(s *Server, ws *websocket.Conn, log *slog.Logger) *conn {
	return &conn{
		srv:   s,
		ws:    ws,
		log:   log,
		dec:   fsp.Decoder{MaxFrameBytes: s.cfg.MaxFrameBytes},
		out:   make(chan []byte, s.cfg.SendQueue),
		done:  make(chan struct{}),
		execs: map[string]*execution{},
	}
}

// serve reads frames until the connection fails or is closed, then kills the
// connection's executions and waits for every goroutine it started.
func (c *conn) serve() {
	c.log.Info("sandbox client connected")
	c.wg.Add(1)
	go c.writeLoop()
	err := c.readLoop()
	c.close(errDisconnected)
	c.wg.Wait()
	_ = c.ws.Close()
	c.log.Info("sandbox client disconnected", "reason", err)
}

// close starts closing the connection: its executions are cancelled with cause (they
// are killed), the writer stops, the socket closes (which ends the reader).
func (c *conn) close(cause error) {
	c.closeOnce.Do(func() {
		c.cause = cause
		close(c.done)
		c.mu.Lock()
		for _, e := range c.execs {
			e.cancel(cause)
		}
		c.mu.Unlock()
		if cause == errShutdown {
			_ = c.ws.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseGoingAway, "sandbox shutting down"), time.Now().Add(time.Second))
		}
		_ = c.ws.SetReadDeadline(time.Now()) // unblocks the reader
	})
}

func (c *conn) readLoop() error {
	c.ws.SetReadLimit(int64(c.srv.cfg.MaxFrameBytes))
	idle := 2 * c.srv.cfg.PingInterval
	_ = c.ws.SetReadDeadline(time.Now().Add(idle))
	c.ws.SetPongHandler(func(string) error { return c.ws.SetReadDeadline(time.Now().Add(idle)) })
	for {
		kind, frame, err := c.ws.ReadMessage()
		if err != nil {
			return fmt.Errorf("read frame: %w", err)
		}
		_ = c.ws.SetReadDeadline(time.Now().Add(idle))
		if kind != websocket.TextMessage {
			c.sendError("", fsp.CodeInvalidRequest, "frames must be JSON text messages")
			continue
		}
		c.dispatch(frame)
	}
}

func (c *conn) writeLoop() {
	defer c.wg.Done()
	ping := time.NewTicker(c.srv.cfg.PingInterval)
	defer ping.Stop()
	for {
		select {
		case b := <-c.out:
			_ = c.ws.SetWriteDeadline(time.Now().Add(c.srv.cfg.WriteTimeout))
			if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
				c.log.Warn("sandbox write failed: closing the connection", "err", err)
				c.close(errDisconnected)
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.srv.cfg.WriteTimeout)); err != nil {
				c.close(errDisconnected)
				return
			}
		case <-c.done:
			return
		}
	}
}

// send queues m; it blocks while the queue is full and returns false once the connection
// is closing.
func (c *conn) send(m fsp.Message) bool {
	b, err := fsp.Encode(m)
	if err != nil { // a bug of ours: never send an invalid frame
		c.log.Error("sandbox frame not encodable", "type", m.MessageHeader().Type, "id", m.MessageHeader().ID, "err", err)
		return false
	}
	select {
	case <-c.done:
		return false
	default:
	}
	select {
	case c.out <- b:
		return true
	case <-c.done:
		return false
	}
}

func (c *conn) sendError(id string, code fsp.Code, msg string) {
	c.send(fsp.NewError(id, code, msg, time.Now()))
}

// dispatch handles one text frame.
func (c *conn) dispatch(frame []byte) {
	msg, err := c.dec.Decode(frame)
	if err != nil {
		var fe *fsp.FrameError
		id := ""
		if errors.As(err, &fe) {
			id = fe.ID
		}
		c.log.Warn("sandbox malformed frame", "id", id, "bytes", len(frame), "err", err)
		c.sendError(id, fsp.CodeInvalidRequest, err.Error())
		return
	}
	switch m := msg.(type) {
	case *fsp.Execute:
		c.onExecute(m)
	case *fsp.Cancel:
		c.onCancel(m)
	case *fsp.Ping:
		load := c.srv.Load()
		c.send(&fsp.Pong{Header: fsp.NewHeader(fsp.TypePong, "", time.Now()), Load: &load})
	default:
		h := m.MessageHeader()
		c.sendError(h.ID, fsp.CodeInvalidRequest, fmt.Sprintf("a sandbox does not accept %q frames", h.Type))
	}
}

// onExecute rejects the request outright (an error, no ack) or acknowledges it and starts
// its execution.
func (c *conn) onExecute(m *fsp.Execute) {
	rt, ok := c.srv.runtimes[m.Language]
	if !ok {
		c.sendError(m.ID, fsp.CodeLanguageNotSupported, fmt.Sprintf("Language '%s' is not available in this sandbox", m.Language))
		return
	}
	limits, err := c.srv.cfg.checkExecute(m)
	if err != nil {
		c.sendError(m.ID, fsp.CodeInvalidRequest, err.Error())
		return
	}
	c.mu.Lock()
	_, dup := c.execs[m.ID]
	c.mu.Unlock()
	if dup {
		c.sendError(m.ID, fsp.CodeInvalidRequest, fmt.Sprintf("execution %q is already in progress on this connection", m.ID))
		return
	}
	if !c.srv.admit() {
		c.sendError(m.ID, fsp.CodeSandboxOverloaded, "sandbox at capacity, try later")
		return
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	e := &execution{conn: c, req: m, rt: rt, limits: limits, ctx: ctx, cancel: cancel, log: c.log.With("id", m.ID, "language", m.Language)}
	c.mu.Lock()
	select {
	case <-c.done: // closing: the admission goes back through acquire
		cancel(c.cause)
	default:
	}
	c.execs[m.ID] = e
	c.wg.Add(1)
	c.mu.Unlock()
	c.send(&fsp.Ack{Header: fsp.NewHeader(fsp.TypeAck, m.ID, time.Now())})
	go e.run()
}

func (c *conn) onCancel(m *fsp.Cancel) {
	c.mu.Lock()
	e, ok := c.execs[m.ID]
	c.mu.Unlock()
	if !ok {
		c.sendError(m.ID, fsp.CodeUnknownExecution, fmt.Sprintf("no execution %q on this connection", m.ID))
		return
	}
	e.log.Info("sandbox execution cancel requested")
	e.cancel(errCancelled)
}

// finished forgets an execution.
func (c *conn) finished(e *execution) {
	c.mu.Lock()
	delete(c.execs, e.req.ID)
	c.mu.Unlock()
	c.wg.Done()
}
