package sandbox

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/messages/fsp"
)

// This file holds the socket I/O of a connection actor. Everything that blocks runs in
// goroutines the actor owns (one dial at a time; a reader and a writer per socket); they
// talk to the actor only by sending it typed messages through the actor system's root
// context, never through its actor.Context.

// outBuffer is how many frames may wait for the writer. A connection writes at most a
// ping, an execute and a cancel at a time, so a full buffer means a stuck socket.
const outBuffer = 16

// dialed (dial goroutine → connection) reports the end of a dial attempt.
type dialed struct {
	attempt *dialAttempt
	err     *DialError
}

// frameIn (reader → connection) carries one frame the sandbox sent.
type frameIn struct {
	sock *socket
	data []byte
}

// socketClosed (reader → connection) says the socket is gone: read error or close.
type socketClosed struct {
	sock *socket
	err  error
}

// dialAttempt is one dial goroutine. The goroutine leaves a successful connection in
// conn unless the actor abandoned the attempt first, in which case it closes it: a
// connection never leaks into a stopped actor's mailbox.
type dialAttempt struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	conn      *websocket.Conn
	abandoned bool
}

// startDial dials url in a goroutine with the current token and reports a *dialed to self.
func startDial(root *actor.RootContext, self *actor.PID, url, token string, timeout time.Duration) *dialAttempt {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	a := &dialAttempt{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		defer cancel()
		conn, err := dial(ctx, url, token, timeout)
		a.mu.Lock()
		if a.abandoned {
			if conn != nil {
				_ = conn.Close()
			}
			a.mu.Unlock()
			return
		}
		a.conn = conn
		a.mu.Unlock()
		root.Send(self, &dialed{attempt: a, err: err})
	}()
	return a
}

// take returns the dialed connection (nil after a failure) and forgets it.
func (a *dialAttempt) take() *websocket.Conn {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.conn
	a.conn = nil
	return c
}

// abandon cancels the attempt, closes whatever it produced and waits for its goroutine.
func (a *dialAttempt) abandon() {
	a.mu.Lock()
	a.abandoned = true
	if a.conn != nil {
		_ = a.conn.Close()
		a.conn = nil
	}
	a.mu.Unlock()
	a.cancel()
	<-a.done
}

// dial opens the WebSocket with the protocol's upgrade headers.
func dial(ctx context.Context, url, token string, timeout time.Duration) (*websocket.Conn, *DialError) {
	h := http.Header{}
	h.Set(fsp.HeaderAuthorization, fsp.BearerPrefix+token)
	h.Set(fsp.HeaderProtocolVersion, fsp.VersionHeaderValue)
	d := websocket.Dialer{HandshakeTimeout: timeout, Proxy: http.ProxyFromEnvironment}
	conn, resp, err := d.DialContext(ctx, url, h)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		de := &DialError{URL: url, Err: err}
		if resp != nil {
			de.Status = resp.StatusCode
		}
		return nil, de
	}
	if v := resp.Header.Get(fsp.HeaderProtocolVersion); v != "" && v != fsp.VersionHeaderValue {
		_ = conn.Close()
		return nil, &DialError{URL: url, Err: errors.New("sandbox speaks protocol version " + v + ", want " + fsp.VersionHeaderValue)}
	}
	conn.SetReadLimit(fsp.DefaultMaxFrameBytes)
	return conn, nil
}

// socket is an open WebSocket with its reader and writer goroutines.
type socket struct {
	conn *websocket.Conn
	out  chan []byte
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// startSocket starts the reader (frames and the final close go to self) and the writer
// (frames queued by send, each bounded by writeTimeout).
func startSocket(root *actor.RootContext, self *actor.PID, conn *websocket.Conn, writeTimeout time.Duration) *socket {
	s := &socket{conn: conn, out: make(chan []byte, outBuffer), done: make(chan struct{})}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		for {
			_, data, err := conn.ReadMessage()
			if err != nil {
				root.Send(self, &socketClosed{sock: s, err: err})
				return
			}
			root.Send(self, &frameIn{sock: s, data: data})
		}
	}()
	go func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.done:
				return
			case b := <-s.out:
				_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
				if err := conn.WriteMessage(websocket.TextMessage, b); err != nil {
					_ = conn.Close() // the reader fails and reports socketClosed
					return
				}
			}
		}
	}()
	return s
}

// send queues a frame without blocking; false means the socket is closed or stuck.
func (s *socket) send(b []byte) bool {
	select {
	case <-s.done:
		return false
	default:
	}
	select {
	case s.out <- b:
		return true
	default:
		return false
	}
}

// close stops both goroutines and closes the connection (after a best-effort close
// frame); it is idempotent and returns once the goroutines have ended, which the closed
// connection makes immediate.
func (s *socket) close() {
	s.once.Do(func() {
		close(s.done)
		_ = s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(100*time.Millisecond))
		_ = s.conn.Close()
	})
	s.wg.Wait()
}
