package wire

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A Body reads as the head's segments with its arrays between them, in reads of any
// size, again from GetBody, and Len is its length.
func TestBodyReadsAsItsPieces(t *testing.T) {
	b := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i, x := range s {
			out[i] = []byte(x)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		segs   [][]byte
		arrays [][][]byte
		want   string
	}{
		{"no arrays", b(`{"a":1}`), nil, `{"a":1}`},
		{"an empty array", b(`{"m":`, `}`), [][][]byte{nil}, `{"m":[]}`},
		{"one element", b(`{"m":`, `}`), [][][]byte{b(`{"x":1}`)}, `{"m":[{"x":1}]}`},
		{"two arrays", b(`{"m":`, `,"t":`, `,"n":2}`), [][][]byte{b(`1`, `{"y":"z"}`, `"3"`), b(`[]`, `{}`)},
			`{"m":[1,{"y":"z"},"3"],"t":[[],{}],"n":2}`},
		{"empty pieces", b(``, ``), [][][]byte{b(``, ``)}, `[,]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := NewBody(tc.segs, tc.arrays...)
			if got := string(body.Bytes()); got != tc.want {
				t.Fatalf("Bytes() = %q, want %q", got, tc.want)
			}
			if body.Len() != int64(len(tc.want)) {
				t.Fatalf("Len() = %d, want %d", body.Len(), len(tc.want))
			}
			for _, size := range []int{1, 2, 3, 7, 4096} {
				r, _ := body.open()
				var got bytes.Buffer
				buf := make([]byte, size)
				for {
					n, err := r.Read(buf)
					got.Write(buf[:n])
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				if got.String() != tc.want {
					t.Fatalf("read %d bytes at a time: %q, want %q", size, got.String(), tc.want)
				}
				if n, err := r.Read(buf); n != 0 || err != io.EOF {
					t.Fatalf("a read after the end: %d, %v; want 0, EOF", n, err)
				}
			}
		})
	}
}

// Send hands a small body to the SDK as one buffer, and a large one through the context,
// from which the middleware gives the request a reader over the pieces, its length, a
// GetBody that reads it again and its content type.
func TestSendSplitsOnlyLargeBodies(t *testing.T) {
	small := NewBody([][]byte{[]byte(`{"m":`), []byte(`}`)}, [][]byte{[]byte(`"hi"`)})
	ctx, payload := small.Send(context.Background())
	if p, ok := payload.([]byte); !ok || string(p) != `{"m":["hi"]}` {
		t.Fatalf("a small body went as %T %v, want its bytes", payload, payload)
	}
	if ctx.Value(bodyKey{}) != nil {
		t.Fatal("a small body is also in the context")
	}

	elems := make([][]byte, 200)
	for i := range elems {
		elems[i] = []byte(`"` + strings.Repeat("x", 40) + `"`)
	}
	large := NewBody([][]byte{[]byte(`{"m":`), []byte(`}`)}, elems)
	want := large.Bytes()
	if len(want) < SplitBodyMin {
		t.Fatalf("the large body has %d bytes, under %d", len(want), SplitBodyMin)
	}
	ctx, payload = large.Send(context.Background())
	if payload != nil {
		t.Fatalf("a large body went to the SDK as %T too", payload)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://model.test/v1/chat/completions", nil)
	if err != nil {
		t.Fatal(err)
	}
	requestBody(req)
	if req.ContentLength != int64(len(want)) || req.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("ContentLength %d, Content-Type %q; want %d, application/json", req.ContentLength, req.Header.Get("Content-Type"), len(want))
	}
	for i, open := range []func() (io.ReadCloser, error){func() (io.ReadCloser, error) { return req.Body, nil }, req.GetBody} {
		r, err := open()
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %d: %d bytes (%v), want the body's %d", i, len(got), err, len(want))
		}
	}
}

// WithTimeout adds no deadline to a context whose own comes first.
func TestWithTimeoutKeepsAnEarlierDeadline(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx, stop := WithTimeout(parent, time.Hour)
	stop()
	if ctx != parent {
		t.Fatal("a context with a deadline a minute away got another one an hour away")
	}
	ctx, stop = WithTimeout(parent, time.Second)
	defer stop()
	if dl, _ := ctx.Deadline(); time.Until(dl) > time.Second {
		t.Fatalf("the call's deadline is %s away, want at most 1s", time.Until(dl))
	}
	ctx, stop = WithTimeout(context.Background(), time.Second)
	defer stop()
	if _, ok := ctx.Deadline(); !ok {
		t.Fatal("a context without a deadline got none")
	}
}
