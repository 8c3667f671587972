package wire

import (
	"context"
	"io"
	"net/http"
)

// SplitBodyMin is the size from which a Body is sent in its pieces rather than as one
// buffer (Body.Send): net/http's default write buffer. A request whose headers and body
// fit that buffer goes out in one write only when its body is one buffer, and a larger
// one takes two writes either way.
const SplitBodyMin = 4 << 10

// Body is a JSON request body made of pieces kept elsewhere: segments of a head, with a
// JSON array between each two of them whose elements are encodings a client's memo
// keeps. A model call's body is mostly what every call sends again (its tools, its
// system prompt, the history so far: the same encodings, shared between calls and
// sessions), and a call in flight holds its body until the answer came: in its pieces,
// it holds a few slice headers, not a copy of every byte. A Body and its pieces must
// not change once made; it is safe for concurrent use.
type Body struct {
	segs   [][]byte
	arrays [][][]byte
	n      int64
}

// NewBody returns the body segs[0], arrays[0], segs[1], ..., arrays[k-1], segs[k] (k =
// len(arrays), len(segs) must be k+1), each array written as its elements joined by
// commas in brackets. It keeps the slices given, not copies.
func NewBody(segs [][]byte, arrays ...[][]byte) *Body {
	if len(segs) != len(arrays)+1 {
		panic("wire.NewBody: need one segment more than arrays")
	}
	var n int
	for _, s := range segs {
		n += len(s)
	}
	for _, a := range arrays {
		n += 2 + max(len(a)-1, 0)
		for _, e := range a {
			n += len(e)
		}
	}
	return &Body{segs: segs, arrays: arrays, n: int64(n)}
}

// Len is the body's length in bytes.
func (b *Body) Len() int64 { return b.n }

// Bytes is the whole body in one new buffer.
func (b *Body) Bytes() []byte {
	out := make([]byte, 0, b.n)
	r := bodyReader{b: b}
	for {
		p, ok := r.next()
		if !ok {
			return out
		}
		out = append(out, p...)
	}
}

// Send returns what a call hands its SDK for b: the context and the body argument of
// the SDK's Post. A body under SplitBodyMin goes as one buffer (net/http then writes
// the request in one write). A larger one goes in its pieces: ctx carries it to Bound's
// middleware, which gives the request a reader over them, its length and a GetBody, and
// the SDK gets no body of its own.
func (b *Body) Send(ctx context.Context) (context.Context, any) {
	if b.n < SplitBodyMin {
		return ctx, b.Bytes()
	}
	return context.WithValue(ctx, bodyKey{}, b), nil
}

type bodyKey struct{}

// open returns a reader over the whole body.
func (b *Body) open() (io.ReadCloser, error) { return &bodyReader{b: b}, nil }

// splitBody gives req the body its context carries (Send), if any, and reports whether
// it did.
func splitBody(req *http.Request) bool {
	b, ok := req.Context().Value(bodyKey{}).(*Body)
	if !ok {
		return false
	}
	if req.Body != nil {
		_ = req.Body.Close()
	}
	req.Body, _ = b.open()
	req.GetBody, req.ContentLength = b.open, b.n
	req.Header.Set("Content-Type", "application/json")
	return true
}

// bodyReader reads a Body piece by piece.
type bodyReader struct {
	b   *Body
	cur []byte // what is left of the current piece
	// The next piece: segment j (in == false), or, in array j, the comma before
	// element i (comma), element i, or the closing bracket when i is past the end.
	j, i      int
	in, comma bool
	done      bool
}

var (
	openBracket  = []byte{'['}
	closeBracket = []byte{']'}
	comma        = []byte{','}
)

// next returns the next piece, or false at the end.
func (r *bodyReader) next() ([]byte, bool) {
	if r.done {
		return nil, false
	}
	if !r.in {
		seg := r.b.segs[r.j]
		if r.j == len(r.b.arrays) {
			r.done = true
		} else {
			r.in, r.i = true, -1
		}
		return seg, true
	}
	a := r.b.arrays[r.j]
	switch {
	case r.i < 0:
		r.i = 0
		return openBracket, true
	case r.i == len(a):
		r.in = false
		r.j++
		return closeBracket, true
	case r.comma:
		r.comma = false
		return comma, true
	}
	e := a[r.i]
	r.i++
	r.comma = r.i < len(a)
	return e, true
}

// Read implements io.Reader.
func (r *bodyReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.cur) == 0 {
			piece, ok := r.next()
			if !ok {
				r.b = nil // nothing more to read: let go of the body
				return n, io.EOF
			}
			r.cur = piece
			continue
		}
		c := copy(p[n:], r.cur)
		r.cur = r.cur[c:]
		n += c
	}
	return n, nil
}

// Close implements io.Closer.
func (r *bodyReader) Close() error { return nil }
