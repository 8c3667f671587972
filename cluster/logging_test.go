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
	if l := lines(); len(l) != 2 || !strings.Contains(l[0], "level=ERROR") || !strings.Contains(l[1], "level=ERROR") {
		t.Fatalf("connections lost without a (recent) leave: %q", l)
	}
}
