package wire

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestBodyOutlivesTheCall: the transport may still be reading a request body after the
// response came back (net/http writes bodies from its own goroutine) and may ask for it
// again (GetBody); the pooled bytes stay the call's until every reader is closed, however
// many calls reuse the pool meanwhile.
func TestBodyOutlivesTheCall(t *testing.T) {
	sent := strings.Repeat("the body of call one; ", 20)
	body := NewBody()
	body.Buf = append(body.Buf, sent...)
	req, err := http.NewRequestWithContext(WithBody(context.Background(), body), http.MethodPost, "http://h/v1/chat", bytes.NewReader(body.Buf))
	if err != nil {
		t.Fatal(err)
	}
	var held, again io.ReadCloser
	mw := Bound("test", 1<<20, func([]byte) (string, string, string, bool) { return "", "", "", false })
	resp, err := mw(req, func(r *http.Request) (*http.Response, error) {
		held = r.Body // read only after the call returned, as a slow writeLoop would
		if again, err = r.GetBody(); err != nil {
			return nil, err
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}"))}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	body.Release()
	for range 100 { // other calls take bodies from the pool and write over them
		b := NewBody()
		b.Buf = append(b.Buf, strings.Repeat("X", len(sent))...)
		b.Release()
	}
	for _, r := range []io.ReadCloser{held, again} {
		got, err := io.ReadAll(r)
		if err != nil || string(got) != sent {
			t.Fatalf("body read after the call: %q, %v; want %q", got, err, sent)
		}
		_ = r.Close()
		_ = r.Close() // a second close (the SDK's and the transport's) releases nothing more
		if n, err := r.Read(make([]byte, 8)); n != 0 || err == nil {
			t.Fatalf("read after close: %d bytes, %v", n, err)
		}
	}
	if n := body.refs.Load(); n != 0 {
		t.Fatalf("body holds %d references after every reader closed", n)
	}
}

// TestBodyCloseDuringRead: a transport may close a body while its writer goroutine
// still reads it; the read either completes on the call's own bytes or fails, never
// reads bytes handed on to another call (run with -race).
func TestBodyCloseDuringRead(t *testing.T) {
	for range 50 {
		body := NewBody()
		body.Buf = append(body.Buf, strings.Repeat("a", 4096)...)
		r := body.open()
		body.Release()
		done := make(chan error, 1)
		go func() {
			p := make([]byte, 64)
			for {
				n, err := r.Read(p)
				if bytes.ContainsFunc(p[:n], func(c rune) bool { return c != 'a' }) {
					done <- fmt.Errorf("read %q", p[:n])
					return
				}
				if err != nil {
					done <- nil
					return
				}
			}
		}()
		_ = r.Close()
		other := NewBody()
		other.Buf = append(other.Buf, strings.Repeat("b", 4096)...)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		other.Release()
	}
}

// TestBodyNotRecognisedIsPinned: when the request the middleware sees does not carry the
// Body's bytes as the SDK is known to build them (here: another length), the transport
// reads something the Body cannot track, so the Body never returns to the pool.
func TestBodyNotRecognisedIsPinned(t *testing.T) {
	body := NewBody()
	body.Buf = append(body.Buf, "twelve bytes"...)
	req, err := http.NewRequestWithContext(WithBody(context.Background(), body), http.MethodPost, "http://h/v1/chat", strings.NewReader("other"))
	if err != nil {
		t.Fatal(err)
	}
	mw := Bound("test", 1<<20, func([]byte) (string, string, string, bool) { return "", "", "", false })
	resp, err := mw(req, func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}"))}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	body.Release()
	if n := body.refs.Load(); n <= 0 {
		t.Fatalf("an unrecognised body was released to the pool (refs %d)", n)
	}
}
