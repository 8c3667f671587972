package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestActorLogHandlerLowersOnlyNormalLeaves drives the handler the way Proto.Actor's
// endpoint writer logs: a lost connection after the peer's DisconnectRequest, or ended
// by this member (Canceled), is INFO; one lost any other way stays an ERROR.
func TestActorLogHandlerLowersOnlyNormalLeaves(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(newActorLogHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}), slog.LevelWarn)).With("lib", "protoactor")
	unavailable := status.Error(codes.Unavailable, "error reading from server: EOF")
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }

	log.Info(msgPeerLeaving, slog.String("address", "10.0.0.2:4000"))
	log.Error(msgLostConnection, slog.String("address", "10.0.0.2:4000"), slog.Any("error", unavailable))
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], "level=INFO") || !strings.Contains(l[0], "normal leave") || !strings.Contains(l[0], "lib=protoactor") {
		t.Fatalf("after a DisconnectRequest: %q", l)
	}
	buf.Reset()
	log.Error(msgLostConnection, slog.String("address", "10.0.0.3:4000"), slog.Any("error", status.Error(codes.Canceled, "context canceled")))
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], "level=INFO") {
		t.Fatalf("closed by this member: %q", l)
	}
	buf.Reset()
	// A peer that announced nothing, or too long ago, lost its connection: an error.
	log.Error(msgLostConnection, slog.String("address", "10.0.0.4:4000"), slog.Any("error", unavailable))
	h := newActorLogHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}), slog.LevelWarn)
	then := time.Now()
	announce := slog.NewRecord(then, slog.LevelInfo, msgPeerLeaving, 0)
	announce.AddAttrs(slog.String("address", "10.0.0.5:4000"))
	lostLater := slog.NewRecord(then.Add(leaveMemoryFor+time.Second), slog.LevelError, msgLostConnection, 0)
	lostLater.AddAttrs(slog.String("address", "10.0.0.5:4000"), slog.Any("error", unavailable))
	for _, r := range []slog.Record{announce, lostLater} {
		if err := h.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	log.Info("EndpointReader stream closed")
	if l := lines(); len(l) != 2 || !strings.Contains(l[0], "level=INFO") || !strings.Contains(l[0], "peer unreachable") || !strings.Contains(l[1], "peer unreachable") {
		t.Fatalf("connections lost without a (recent) leave: %q", l)
	}
}

// TestDeadPeerIsOneInfoLine drives the handler with what Proto.Actor logs on a member
// when a peer is killed (kill -9): the lost connection, the redials that fail (ERROR)
// and the gossip that cannot reach it (WARN, many). The member writes one INFO line for
// the peer's address and one for its gossip member id, then nothing; once the peer
// connects again, a later loss is reported once more.
func TestDeadPeerIsOneInfoLine(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(newActorLogHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}), slog.LevelWarn)).With("lib", "protoactor")
	lines := func() []string {
		if strings.TrimSpace(buf.String()) == "" {
			return nil
		}
		return strings.Split(strings.TrimSpace(buf.String()), "\n")
	}
	const addr = "10.0.0.9:4000"
	refused := status.Error(codes.Unavailable, "connection refused")
	log.Error(msgLostConnection, slog.String("address", addr), slog.Any("error", refused))
	for i := range 20 {
		log.Error(msgStreamFailed, slog.String("address", addr), slog.Any("error", refused))
		log.Error(msgConnectFailed, slog.String("address", addr), slog.Any("error", refused), slog.Int("retry", i))
	}
	for range 300 {
		log.Warn(msgGossipFailed, slog.String("MemberId", "m-9"), slog.Any("error", refused))
	}
	l := lines()
	if len(l) != 2 {
		t.Fatalf("a dead peer logged %d lines, want one for its address and one for its member id: %q", len(l), l[:min(len(l), 4)])
	}
	for _, line := range l {
		if !strings.Contains(line, "level=INFO") || !strings.Contains(line, "peer unreachable") {
			t.Fatalf("want INFO peer unreachable lines only: %q", l)
		}
	}
	if !strings.Contains(l[0], addr) || !strings.Contains(l[1], "MemberId=m-9") {
		t.Fatalf("the lines do not name the peer: %q", l)
	}

	// The peer comes back (Proto.Actor logs the connect at INFO, below the handler's
	// level): it is reported again when it is lost again, once.
	buf.Reset()
	log.Info(msgConnected, slog.String("address", addr))
	log.Error(msgLostConnection, slog.String("address", addr), slog.Any("error", refused))
	log.Error(msgConnectFailed, slog.String("address", addr), slog.Any("error", refused))
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], "peer unreachable") {
		t.Fatalf("a peer lost again after it reconnected: %q", l)
	}
	// The pubsub topic forgetting the dead member's subscribers is one INFO line.
	buf.Reset()
	log.Warn(msgTopicPruned, slog.String("topic", "fathom.restarts"), slog.Any("subscribers", []string{"observer"}))
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], "level=INFO") || !strings.Contains(l[0], "topic=fathom.restarts") {
		t.Fatalf("a topic pruning a dead member's subscribers: %q", l)
	}
	// Other Proto.Actor errors pass as they are.
	buf.Reset()
	log.Error("something else broke", slog.String("address", addr))
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], "level=ERROR") {
		t.Fatalf("an unrelated error: %q", l)
	}
}
