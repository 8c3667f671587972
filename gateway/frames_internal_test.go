package gateway

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/messages"
)

// TestFrameCacheSharesFramesWithoutAllocating: the subscribers of an event or a delta
// all get the bytes a lone subscriber's frame has (rendered once), and each subscriber
// after the first takes it without allocating: the frame cache's cost per delivery.
func TestFrameCacheSharesFramesWithoutAllocating(t *testing.T) {
	c := newFrameCache(16, 16)
	stream := "sess-" + strconv.Itoa(7) // made at run time, as a subscriber's is
	ev := &messages.Event{Seq: 3, SessionId: stream, AtUnixNano: 1,
		Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "s<1>", Description: "a & b"}}}
	d := live.Delta{CallID: "c1", StepID: "s1", Index: 4, Attempt: 1, AfterSeq: 3, Text: "word "}
	wantEvent, err := eventFrame(ev)
	if err != nil {
		t.Fatal(err)
	}
	wantDelta := deltaBytes(stream, d)

	const subscribers = 64
	var wg sync.WaitGroup
	frames := make([][2][]byte, subscribers)
	for i := range frames {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := c.event(stream, ev)
			if err != nil {
				t.Error(err)
			}
			frames[i] = [2][]byte{e, c.delta(stream, d)}
		}()
	}
	wg.Wait()
	for i, f := range frames {
		if !bytes.Equal(f[0], wantEvent) || !bytes.Equal(f[1], wantDelta) {
			t.Fatalf("subscriber %d: frames %q, %q; a lone subscriber's: %q, %q", i, f[0], f[1], wantEvent, wantDelta)
		}
		if &f[0][0] != &frames[0][0][0] || &f[1][0] != &frames[0][1][0] {
			t.Fatalf("subscriber %d got a frame rendered again", i)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = c.event(stream, ev)
		_ = c.delta(stream, d)
		_, _ = c.wsEvent(stream, ev)
		_, _ = c.wsDelta(stream, d)
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per subscriber taking an event's and a delta's frame, want none", allocs)
	}

	// WebSocket connections share one prepared message per frame, and a client reads
	// exactly the frame's bytes from it.
	pmEvent, err := c.wsEvent(stream, ev)
	if err != nil {
		t.Fatal(err)
	}
	pmDelta, _ := c.wsDelta(stream, d)
	if again, _ := c.wsEvent(stream, ev); again != pmEvent {
		t.Fatal("an event's WebSocket message was prepared again")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for _, pm := range []*websocket.PreparedMessage{pmEvent, pmDelta, pmEvent} {
			if err := ws.WritePreparedMessage(pm); err != nil {
				return
			}
		}
		_, _, _ = ws.ReadMessage() // until the client closes
	}))
	defer srv.Close()
	for range 2 { // two connections, the same messages
		ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range [][]byte{wantEvent, wantDelta, wantEvent} {
			typ, got, err := ws.ReadMessage()
			if err != nil || typ != websocket.TextMessage || !bytes.Equal(got, want) {
				t.Fatalf("message %d: %d %q, %v; want the text frame %q", i, typ, got, err, want)
			}
		}
		ws.Close()
	}
}
