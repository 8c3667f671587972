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
	msgConnectFailed  = "EndpointWriter failed to connect"
	msgStreamFailed   = "EndpointWriter failed to create receive stream"
	msgConnected      = "EndpointWriter connected"
	msgGossipFailed   = "sendGossipForMember failed"
	// msgTopicPruned is pubsub's (cluster/pubsub_topic.go) note that a topic dropped
	// subscribers on a member that left: expected after any leave or death.
	msgTopicPruned = "Topic removed subscribers, because they are dead or they are on members that left the clusterIdentity:"
)

// msgPeerUnreachable is the one INFO line a member writes when a peer's connection is
// lost without a leave (the peer died or is cut off): the provider drops the peer from
// the cluster and its sessions move, so nobody has to act.
const msgPeerUnreachable = "peer unreachable: it died or is cut off; its sessions move once the cluster drops it"

// quietFor is how long a peer that became unreachable stays quiet: its connection
// retries and the gossip to it log at DEBUG, unless it connects again first.
const quietFor = 10 * time.Minute

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
//
// A peer that dies (kill -9, a lost host) is not an operator's problem either: the
// cluster drops it and its sessions move. Proto.Actor would log every lost connection,
// every failed redial (ERROR, several a minute) and every failed gossip to it (WARN,
// several a second). The first of these for a peer becomes one INFO line
// (msgPeerUnreachable); the rest go on at DEBUG until the peer connects again or
// quietFor passes. Pubsub's WARN that a topic dropped the subscribers the peer hosted
// goes on at INFO.
type actorLogHandler struct {
	next    slog.Handler
	min     slog.Level
	leaving *leavingPeers
	// unreachable are the peer addresses, and gossip's member ids, already reported
	// unreachable.
	unreachable *leavingPeers
}

func newActorLogHandler(next slog.Handler, min slog.Level) *actorLogHandler {
	return &actorLogHandler{next: next, min: min, leaving: &leavingPeers{at: map[string]time.Time{}}, unreachable: &leavingPeers{at: map[string]time.Time{}, keep: quietFor}}
}

// Enabled lets INFO through even below min: the peer-leaving notice is an INFO record.
func (h *actorLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= min(h.min, slog.LevelInfo)
}

func (h *actorLogHandler) Handle(ctx context.Context, r slog.Record) error {
	switch r.Message {
	case msgPeerLeaving:
		h.leaving.add(attrString(r, "address"), r.Time)
	case msgConnected:
		h.unreachable.remove(attrString(r, "address"))
	case msgLostConnection:
		if r.Level >= slog.LevelError && h.normalLeave(r) {
			return h.pass(ctx, r, slog.LevelInfo, r.Message, slog.String("reason", "the connection ended with a normal leave"))
		}
		if r.Level >= slog.LevelError {
			return h.peerUnreachable(ctx, r, attrString(r, "address"))
		}
	case msgConnectFailed, msgStreamFailed:
		if r.Level >= slog.LevelError {
			return h.peerUnreachable(ctx, r, attrString(r, "address"))
		}
	case msgGossipFailed:
		return h.peerUnreachable(ctx, r, "member:"+attrString(r, "MemberId"))
	case msgTopicPruned:
		// The cluster already reported the member gone; the topic forgetting its
		// subscribers there is the expected consequence, not an operator's problem.
		return h.pass(ctx, r, slog.LevelInfo, "topic dropped subscribers on members that left the cluster")
	}
	if r.Level < h.min || !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

// peerUnreachable writes r as the one INFO line for key (a peer address, or a gossip
// member id), or at DEBUG when key was reported within quietFor.
func (h *actorLogHandler) peerUnreachable(ctx context.Context, r slog.Record, key string) error {
	if key == "" || key == "member:" || h.unreachable.recent(key, r.Time) {
		return h.pass(ctx, r, slog.LevelDebug, r.Message)
	}
	h.unreachable.add(key, r.Time)
	return h.pass(ctx, r, slog.LevelInfo, msgPeerUnreachable, slog.String("cause", r.Message))
}

// pass hands the next handler a copy of r at level with message msg and extra attrs,
// if it takes records of that level.
func (h *actorLogHandler) pass(ctx context.Context, r slog.Record, level slog.Level, msg string, extra ...slog.Attr) error {
	if !h.next.Enabled(ctx, level) || (level < slog.LevelInfo && level < h.min) {
		return nil
	}
	nr := slog.NewRecord(r.Time, level, msg, r.PC)
	r.Attrs(func(a slog.Attr) bool { nr.AddAttrs(a); return true })
	nr.AddAttrs(extra...)
	return h.next.Handle(ctx, nr)
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
	return &actorLogHandler{next: h.next.WithAttrs(a), min: h.min, leaving: h.leaving, unreachable: h.unreachable}
}

func (h *actorLogHandler) WithGroup(g string) slog.Handler {
	return &actorLogHandler{next: h.next.WithGroup(g), min: h.min, leaving: h.leaving, unreachable: h.unreachable}
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
	// keep is how long an entry is remembered; zero means leaveMemoryFor.
	keep time.Duration
}

func (l *leavingPeers) memory() time.Duration {
	if l.keep > 0 {
		return l.keep
	}
	return leaveMemoryFor
}

// remove forgets addr (it connected again).
func (l *leavingPeers) remove(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.at, addr)
}

func (l *leavingPeers) add(addr string, now time.Time) {
	if addr == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for a, t := range l.at {
		if now.Sub(t) > l.memory() || len(l.at) >= leaveMemoryPeers {
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
	return ok && now.Sub(t) <= l.memory()
}
