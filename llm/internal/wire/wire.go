// Package wire holds what Fathom's two SDK-based model clients (llm/openai,
// llm/anthropic) add on the HTTP level: one SDK middleware that turns error answers into
// *llm.APIError (status, type, code, message, Retry-After) and bounds every response
// body, so a runaway stream or answer cannot exhaust memory; request bodies sent in the
// pieces the clients' memos keep (Body); and those memos (Memo).
package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fathom-agents/fathom/llm"
)

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// ErrTooLarge is returned (wrapped) when a response body exceeds its bound.
var ErrTooLarge = errors.New("response too large")

// ErrorFields extracts (type, code, message) from an error body; ok is false when the
// body is not the API's error shape.
type ErrorFields func(body []byte) (typ, code, msg string, ok bool)

// Middleware is the SDKs' middleware shape (option.Middleware in both SDKs).
type Middleware = func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error)

// Bound returns a middleware that converts non-2xx answers into *llm.APIError (parsed
// with fields) and limits 2xx bodies to maxBytes: reading past it fails with an error
// wrapping ErrTooLarge that says "exceeds N bytes". prefix names the client in errors.
func Bound(prefix string, maxBytes int64, fields ErrorFields) Middleware {
	return func(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
		dropTelemetry(req.Header)
		requestBody(req)
		resp, err := next(req)
		return bounded(req, resp, err, prefix, maxBytes, fields)
	}
}

// bounded is Bound's work on the answer. It is a function of its own, never inlined,
// because the calling goroutine waits on the network in next with Bound's frame on its
// stack (a cost per call in flight): that frame is kept to the call.
//
//go:noinline
func bounded(req *http.Request, resp *http.Response, err error, prefix string, maxBytes int64, fields ErrorFields) (*http.Response, error) {
	if err != nil {
		return nil, fmt.Errorf("%s: %s %s: %w", prefix, req.Method, req.URL.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, APIError(resp, data, fields)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "event-stream") && !strings.Contains(ct, "json") {
		// Some compatible servers answer JSON as text/plain (or with no type); the
		// SDKs decode only what is labelled JSON.
		resp.Header.Set("Content-Type", "application/json")
	}
	lb := &limitedBody{rc: resp.Body, left: maxBytes, max: maxBytes, prefix: prefix}
	if t, ok := req.Context().Value(trackerKey{}).(*Tracker); ok {
		t.body.Store(lb)
	}
	resp.Body = lb
	return resp, nil
}

// requestBody gives req its body: the pieces its context carries (Body.Send), or the
// SDK's buffer again, in memory (inMemoryBody). It is never inlined: Bound's frame is on
// the stack while the call waits, and this work is done before.
//
//go:noinline
func requestBody(req *http.Request) {
	if !splitBody(req) {
		inMemoryBody(req)
	}
}

// inMemoryBody gives the request its body again in a reader net/http knows to be in
// memory. The SDKs encode the body into memory but hand it over wrapped (to close it
// once), which hides it: net/http then writes the headers and the body in two writes
// (two system calls, and two packets on the wire) and copies the body through a fresh
// 32 kB buffer per call. The SDKs' GetBody reads the same bytes again.
func inMemoryBody(req *http.Request) {
	if req.GetBody == nil || req.Body == nil || req.Body == http.NoBody {
		return
	}
	if b, err := req.GetBody(); err == nil {
		_ = req.Body.Close()
		req.Body = b
	}
}

// dropTelemetry removes the SDKs' platform headers (X-Stainless-Lang, -OS, -Arch,
// -Runtime-Version, -Package-Version, -Retry-Count, …): they describe the client to
// the server, which needs none of it, and Fathom retries itself (llm/resilient), so the
// retry count is always 0. Each call then writes, and the server parses, half the
// headers.
func dropTelemetry(h http.Header) {
	for k := range h {
		if strings.HasPrefix(k, "X-Stainless-") {
			delete(h, k)
		}
	}
}

// limitedBody fails a read that would take the body past max bytes, and remembers the
// last bytes it passed (Tail) so a stream's end marker can be checked.
type limitedBody struct {
	rc     io.ReadCloser
	left   int64
	max    int64
	prefix string
	tail   [64]byte
	ntail  int
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, fmt.Errorf("%s: response exceeds %d bytes: %w", b.prefix, b.max, ErrTooLarge)
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, fmt.Errorf("%s: response exceeds %d bytes: %w", b.prefix, b.max, ErrTooLarge)
	}
	b.remember(p[:n])
	return n, err
}

func (b *limitedBody) remember(p []byte) {
	if len(p) >= len(b.tail) {
		b.ntail = copy(b.tail[:], p[len(p)-len(b.tail):])
		return
	}
	keep := min(b.ntail, len(b.tail)-len(p))
	copy(b.tail[:], b.tail[b.ntail-keep:b.ntail])
	b.ntail = keep + copy(b.tail[keep:], p)
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// WithTimeout is context.WithTimeout(ctx, d), but ctx itself when its deadline comes
// first: a session's call carries its own deadline, shorter than a client's, and a
// second one would cost the call a context and a timer for nothing (and hold them while
// it waits).
func WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return ctx, noCancel
	}
	return context.WithTimeout(ctx, d)
}

func noCancel() {}

// Tracker finds the body one streamed call reads through, to check how it ended. Attach
// it to the call's context with WithTracker.
type Tracker struct{ body atomic.Pointer[limitedBody] }

type trackerKey struct{}

// WithTracker returns ctx carrying t: Bound's middleware records the call's body in it.
func WithTracker(ctx context.Context, t *Tracker) context.Context {
	return context.WithValue(ctx, trackerKey{}, t)
}

// EndsWithDone reports whether the recorded body ended with the OpenAI stream
// terminator "data: [DONE]" (trailing blank lines allowed).
func (t *Tracker) EndsWithDone() bool {
	b := t.body.Load()
	return b != nil && bytes.HasSuffix(bytes.TrimRight(b.tail[:b.ntail], "\r\n "), []byte("[DONE]"))
}

// APIError converts an error answer into an *llm.APIError: the fields parsed from the
// body, or its text (cut to 512 bytes), and the Retry-After wait (seconds or an HTTP
// date).
func APIError(resp *http.Response, data []byte, fields ErrorFields) *llm.APIError {
	e := &llm.APIError{StatusCode: resp.StatusCode}
	if typ, code, msg, ok := fields(data); ok {
		e.Type, e.Code, e.Message = typ, code, msg
	} else {
		msg := strings.TrimSpace(string(data))
		if len(msg) > 512 {
			msg = msg[:512] + "…"
		}
		e.Message = msg
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if s, err := strconv.Atoi(ra); err == nil && s >= 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		} else if t, err := http.ParseTime(ra); err == nil {
			e.RetryAfter = max(0, time.Until(t))
		}
	}
	return e
}
