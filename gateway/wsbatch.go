package gateway

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// batchConn is a WebSocket's network connection that can hold what is written to it:
// while the write loop serves its subscriptions (hold), the frames it writes are kept
// and go out together (flush), one system call for the frames ready at once instead of
// one per frame. Outside a hold, writes go straight through.
//
// While held, the write deadlines set on it are not applied (a frame kept is not
// written): what is kept goes out with flush's deadline, or, when a hold passes
// maxBatchBytes, with a deadline of timeout from then and slow armed while it is written,
// as the connection bounds each of its writes. The frames of a hold cost no deadline
// and no timer each.
type batchConn struct {
	net.Conn
	timeout  time.Duration // bounds a write in a hold
	slow     *time.Timer   // armed for slowWait while a write in a hold blocks (nil: none)
	slowWait time.Duration

	mu   sync.Mutex
	hold atomic.Bool // set and cleared under mu; read without it by held
	buf  []byte
}

// maxBatchBytes bounds what a hold keeps before it writes it out.
const maxBatchBytes = 64 << 10

// Write keeps p while held (writing out what is kept first when p would pass
// maxBatchBytes), else writes it.
func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.hold.Load() {
		return b.Conn.Write(p)
	}
	if len(b.buf)+len(p) > maxBatchBytes {
		if err := b.bounded(b.writeOut); err != nil {
			return 0, err
		}
	}
	if len(p) <= maxBatchBytes {
		b.buf = append(b.buf, p...)
		return len(p), nil
	}
	var n int
	err := b.bounded(func() (err error) {
		n, err = b.Conn.Write(p)
		return err
	})
	return n, err
}

// SetWriteDeadline sets the connection's write deadline, except while held (see
// batchConn).
func (b *batchConn) SetWriteDeadline(t time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hold.Load() {
		return nil
	}
	return b.Conn.SetWriteDeadline(t)
}

// bounded runs write, a write to the connection in a hold, with a deadline of timeout
// and slow armed. Called with mu held.
func (b *batchConn) bounded(write func() error) error {
	if b.slow != nil {
		b.slow.Reset(b.slowWait)
		defer b.slow.Stop()
	}
	if b.timeout > 0 {
		_ = b.Conn.SetWriteDeadline(time.Now().Add(b.timeout))
	}
	return write()
}

// holdWrites starts a hold.
func (b *batchConn) holdWrites() {
	b.mu.Lock()
	b.hold.Store(true)
	b.mu.Unlock()
}

// held reports whether a hold is on (for the goroutine that starts and ends holds).
func (b *batchConn) held() bool { return b.hold.Load() }

// flush ends the hold and writes what it kept, by deadline.
func (b *batchConn) flush(deadline time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hold.Store(false)
	if len(b.buf) == 0 {
		return nil
	}
	_ = b.Conn.SetWriteDeadline(deadline)
	return b.writeOut()
}

// writeOut writes what is kept. Called with mu held.
func (b *batchConn) writeOut() error {
	_, err := b.Conn.Write(b.buf)
	if cap(b.buf) > 8<<10 {
		b.buf = nil // an idle connection keeps no large buffer
	} else {
		b.buf = b.buf[:0]
	}
	return err
}

// batchHijacker hands the WebSocket upgrade the hijacked connection as a batchConn.
type batchHijacker struct {
	http.ResponseWriter
	conn *batchConn // set by Hijack
}

// Hijack implements http.Hijacker.
func (w *batchHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("gateway: the response writer cannot be hijacked")
	}
	nc, brw, err := h.Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = &batchConn{Conn: nc}
	return w.conn, brw, nil
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *batchHijacker) Unwrap() http.ResponseWriter { return w.ResponseWriter }
