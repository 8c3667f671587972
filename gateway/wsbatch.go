package gateway

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// batchConn is a WebSocket's network connection that can hold what is written to it:
// while the write loop serves its subscriptions (hold), the frames it writes are kept
// and go out together (flush), one system call for the frames ready at once instead of
// one per frame. Outside a hold, writes go straight through.
type batchConn struct {
	net.Conn

	mu   sync.Mutex
	hold bool
	buf  []byte
}

// maxBatchBytes bounds what a hold keeps before it writes it out.
const maxBatchBytes = 64 << 10

// Write keeps p while held (writing out what is kept first when p would pass
// maxBatchBytes), else writes it.
func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hold {
		if len(b.buf)+len(p) > maxBatchBytes {
			if err := b.writeOut(); err != nil {
				return 0, err
			}
		}
		if len(p) <= maxBatchBytes {
			b.buf = append(b.buf, p...)
			return len(p), nil
		}
	}
	return b.Conn.Write(p)
}

// holdWrites starts a hold.
func (b *batchConn) holdWrites() {
	b.mu.Lock()
	b.hold = true
	b.mu.Unlock()
}

// flush ends the hold and writes what it kept, by deadline.
func (b *batchConn) flush(deadline time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hold = false
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
