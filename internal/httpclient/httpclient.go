// Package httpclient owns the HTTP transport that Fathom's clients of remote APIs share:
// the model providers (llm/openai, llm/anthropic) and the embedding API
// (memory/openaiembed).
//
// net/http's default transport keeps two idle connections per host. A node calls one
// model endpoint from every running session, its summarizer and its fallbacks at once,
// so with the default nearly every call beyond the second dialed a new connection and
// closed it afterwards: a TCP (and TLS) handshake per call, and a socket in TIME_WAIT.
// The shared transport keeps up to MaxIdleConnsPerHost idle connections to each
// endpoint, and since every client of the process uses it, the session and summarizer
// clients of one endpoint share one pool.
package httpclient

import (
	"net/http"
	"sync"
	"time"
)

// Bounds of the shared transport's idle connections.
const (
	// MaxIdleConnsPerHost is how many idle connections to one endpoint stay open:
	// enough for the calls a node makes to one model endpoint at once.
	MaxIdleConnsPerHost = 256
	// MaxIdleConns bounds the idle connections to all endpoints together.
	MaxIdleConns = 1024
	// IdleConnTimeout closes a connection idle this long.
	IdleConnTimeout = 90 * time.Second
)

var shared = sync.OnceValue(func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = MaxIdleConns
	t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	t.IdleConnTimeout = IdleConnTimeout
	return t
})

// Transport is the process's shared transport for calls to remote APIs: the default
// transport's proxy, dial and TLS settings, with idle-connection bounds sized for a
// node's concurrent calls. Callers must not modify it.
func Transport() *http.Transport { return shared() }

// Client is the client a remote API's client makes its calls with. given, when set, is
// the caller's: it is used as it is, except that a nil Transport (which would mean
// net/http's default transport and its two idle connections per host) becomes the shared
// Transport, in a copy (given is never modified). With given nil it is a new client of
// the shared Transport whose Timeout is timeout.
func Client(given *http.Client, timeout time.Duration) *http.Client {
	if given == nil {
		return &http.Client{Timeout: timeout, Transport: Transport()}
	}
	if given.Transport != nil {
		return given
	}
	c := *given
	c.Transport = Transport()
	return &c
}
