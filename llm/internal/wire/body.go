package wire

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// Body is a request body encoded into a pooled buffer. The buffer goes back to the pool
// once the caller has released it (Release) and the transport has closed every reader
// it was given: net/http may still be writing a body after the response came back, and
// may ask for it again (GetBody) for a retry or a redirect while the call runs.
//
// A client encodes into Buf, attaches the body to the call's context (WithBody) and
// hands Buf to the SDK; Bound's middleware then sends it from the pooled bytes. A body
// whose call never reaches the middleware is left to the garbage collector.
type Body struct {
	// Buf is the encoded body; append to Buf[:0] to reuse the buffer's room.
	Buf  []byte
	refs atomic.Int32
}

// bodies holds the Bodies NewBody hands out.
var bodies = sync.Pool{New: func() any { return new(Body) }}

// NewBody returns an empty Body from the pool, held by the caller.
func NewBody() *Body {
	b := bodies.Get().(*Body)
	b.Buf = b.Buf[:0]
	b.refs.Store(1)
	return b
}

// Release gives up the caller's hold; the buffer is reused once no reader holds it
// either. Call it once, after the call returned.
func (b *Body) Release() { b.release() }

func (b *Body) release() {
	if b.refs.Add(-1) == 0 && cap(b.Buf) <= maxPooledBuffer {
		bodies.Put(b)
	}
}

// open returns a reader of the bytes that holds the buffer until it is closed.
func (b *Body) open() io.ReadCloser {
	b.refs.Add(1)
	r := &bodyReader{owner: b}
	r.r.Reset(b.Buf)
	return r
}

// errBodyClosed is a read of a request body after its Close.
var errBodyClosed = errors.New("wire: read of a closed request body")

// bodyReader reads a Body and lets go of it on its first Close. A transport may close a
// body from one goroutine while another still reads it (HTTP/2 does, when an answer
// comes before the body is sent): Close waits for a read under way, and a read after
// Close fails instead of reading bytes the pool has handed on.
type bodyReader struct {
	mu    sync.Mutex
	r     bytes.Reader
	owner *Body // nil once closed
}

func (r *bodyReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owner == nil {
		return 0, errBodyClosed
	}
	return r.r.Read(p)
}

func (r *bodyReader) Close() error {
	r.mu.Lock()
	owner := r.owner
	r.owner = nil
	r.mu.Unlock()
	if owner != nil {
		owner.release()
	}
	return nil
}

type bodyKey struct{}

// WithBody returns ctx carrying b: Bound's middleware sends the call's body from it.
func WithBody(ctx context.Context, b *Body) context.Context {
	return context.WithValue(ctx, bodyKey{}, b)
}

// useBody replaces the body the SDK built over b's bytes with readers that hold b until
// the transport closes them. A request body it does not recognise as b's bytes pins b:
// the transport may read it for as long as it likes, so b never goes back to the pool.
func useBody(req *http.Request) {
	b, ok := req.Context().Value(bodyKey{}).(*Body)
	if !ok {
		return
	}
	if req.Body == nil || req.Body == http.NoBody || req.ContentLength != int64(len(b.Buf)) {
		b.refs.Add(1)
		return
	}
	_ = req.Body.Close() // the SDK's reader of the same bytes
	req.Body = b.open()
	req.GetBody = func() (io.ReadCloser, error) { return b.open(), nil }
}
