package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/live/feed"
)

// TestEventStreamKeepsAliveWhileIdle: an SSE event stream that has nothing to send gets
// a keepalive comment once each PingInterval it waited, never sooner, and the events
// published meanwhile each once, in order.
func TestEventStreamKeepsAliveWhileIdle(t *testing.T) {
	t.Parallel()
	const ping = 200 * time.Millisecond
	g := &gatewayFanout{j: &memJournal{}}
	g.feed = feed.New(g.j, feed.Options{})
	h, err := gateway.New(gateway.Config{Token: token, Sessions: noSessions{}, Feed: g.feed, PingInterval: ping,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	g.h, g.srv = h, httptest.NewServer(h)
	defer g.close()
	g.publish(1)

	req, _ := http.NewRequest(http.MethodGet, g.srv.URL+"/v1/sessions/bench/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if line := sc.Text(); line != "" {
				lines <- line
			}
		}
	}()
	// next returns the next line that is an event's data (its seq) or a keepalive.
	next := func() (seq uint64, keepalive bool, at time.Time) {
		for line := range lines {
			switch {
			case line == ": keepalive":
				return 0, true, time.Now()
			case strings.HasPrefix(line, "data: "):
				if _, err := fmt.Sscanf(line[strings.Index(line, `"seq":`)+len(`"seq":`):], "%d", &seq); err != nil {
					t.Fatalf("frame %q: %v", line, err)
				}
				return seq, false, time.Now()
			}
		}
		t.Fatal("the stream ended")
		return 0, false, time.Time{}
	}
	want := uint64(1)
	for round := range 3 {
		seq, keepalive, last := next()
		if keepalive || seq != want {
			t.Fatalf("round %d: seq %d (keepalive %v), want event %d", round, seq, keepalive, want)
		}
		// Nothing more: a keepalive, an interval after the event. The interval runs from
		// when the server wrote the event, which the client reads some time later (tens
		// of milliseconds under the race detector on a loaded machine), so the gap the
		// client sees may be shorter than the interval: it must be more than half of it
		// (a keepalive sent with the event, or on a timer not reset by it, comes sooner).
		if _, keepalive, at := next(); !keepalive || at.Sub(last) < ping/2 {
			t.Fatalf("round %d: keepalive %v %v after the event, want one after %v", round, keepalive, at.Sub(last), ping)
		}
		want++
		g.publish(want)
	}
	if seq, _, _ := next(); seq != want {
		t.Fatalf("seq %d, want %d", seq, want)
	}
}
