package cluster

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Proto.Actor's remoting messages this handler rewrites (remote/endpoint_writer.go).
const (
	msgPeerLeaving    = "EndpointWriter got DisconnectRequest form remote" // sic
	msgLostConnection = "EndpointWriter lost connection"
)

// leaveMemory bounds how long and how many announced leaves are remembered. A leaving
// peer's connection can end more than once (the writer stopped on its DisconnectRequest,
// then a late send that redialled its closing server), so an announcement covers every
// ending within leaveMemoryFor.
const (
	leaveMemoryFor   = 30 * time.Second
	leaveMemoryPeers = 1024
)

// actorLogHandler is the handler of Proto.Actor's own logs. It passes on records at or
// above min, except one: Proto.Actor logs "EndpointWriter lost connection" at ERROR
// whenever a connection to a peer ends, also when the peer left the cluster normally.
// A normal leave is recognised two ways: the peer sent a DisconnectRequest on that
// connection first (its endpoint manager does so when it stops), or the stream ended
// with codes.Canceled (this member closed it while leaving). Such a record goes on at
// INFO; a connection lost any other way stays an ERROR.
type actorLogHandler struct {
	next    slog.Handler
	min     slog.Level
	leaving *leavingPeers
}

func newActorLogHandler(next slog.Handler, min slog.Level) *actorLogHandler {
	return &actorLogHandler{next: next, min: min, leaving: &leavingPeers{at: map[string]time.Time{}}}
}

// Enabled lets INFO through even below min: the peer-leaving notice is an INFO record.
func (h *actorLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= min(h.min, slog.LevelInfo)
}

func (h *actorLogHandler) Handle(ctx context.Context, r slog.Record) error {
	switch r.Message {
	case msgPeerLeaving:
		h.leaving.add(attrString(r, "address"), r.Time)
	case msgLostConnection:
		if r.Level >= slog.LevelError && h.normalLeave(r) {
			nr := slog.NewRecord(r.Time, slog.LevelInfo, r.Message, r.PC)
			r.Attrs(func(a slog.Attr) bool { nr.AddAttrs(a); return true })
			nr.AddAttrs(slog.String("reason", "the connection ended with a normal leave"))
			if !h.next.Enabled(ctx, slog.LevelInfo) {
				return nil
			}
			return h.next.Handle(ctx, nr)
		}
	}
	if r.Level < h.min || !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

// normalLeave reports whether a lost-connection record follows a graceful leave.
func (h *actorLogHandler) normalLeave(r slog.Record) bool {
	if h.leaving.recent(attrString(r, "address"), r.Time) {
		return true
	}
	var canceled bool
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "error" {
			return true
		}
		if err, ok := a.Value.Any().(error); ok {
			canceled = status.Code(err) == codes.Canceled || errors.Is(err, context.Canceled)
		}
		return false
	})
	return canceled
}

func (h *actorLogHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return &actorLogHandler{next: h.next.WithAttrs(a), min: h.min, leaving: h.leaving}
}

func (h *actorLogHandler) WithGroup(g string) slog.Handler {
	return &actorLogHandler{next: h.next.WithGroup(g), min: h.min, leaving: h.leaving}
}

func attrString(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// leavingPeers are the peer addresses that announced their leave, with when; shared by
// every copy of a handler (WithAttrs), bounded in time and size.
type leavingPeers struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (l *leavingPeers) add(addr string, now time.Time) {
	if addr == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for a, t := range l.at {
		if now.Sub(t) > leaveMemoryFor || len(l.at) >= leaveMemoryPeers {
			delete(l.at, a)
		}
	}
	l.at[addr] = now
}

// recent reports whether addr announced its leave within leaveMemoryFor of now.
func (l *leavingPeers) recent(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.at[addr]
	return ok && now.Sub(t) <= leaveMemoryFor
}
