package gateway

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestBatchConnBoundsWhatAHoldWrites: in a hold, the deadlines set for each frame are not
// applied (a deadline already past does not fail the frames kept), flush writes them
// by its own deadline, and a hold that passes maxBatchBytes writes what it kept bounded
// by its timeout, with the slow-consumer timer armed while the write blocks.
func TestBatchConnBoundsWhatAHoldWrites(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	defer server.Close()
	slowFired := make(chan struct{}, 1)
	slow := time.AfterFunc(time.Hour, func() { slowFired <- struct{}{} })
	slow.Stop()
	b := &batchConn{Conn: server, timeout: 50 * time.Millisecond, slow: slow, slowWait: 10 * time.Millisecond}

	b.holdWrites()
	if err := b.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := b.Write([]byte("frame")); err != nil {
			t.Fatalf("a frame kept in a hold: %v", err)
		}
	}
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 64)
		n, _ := io.ReadAtLeast(client, buf, 15)
		got <- buf[:n]
	}()
	if err := b.flush(time.Now().Add(time.Second)); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if g := string(<-got); g != "frameframeframe" {
		t.Fatalf("flushed %q, want the three frames in one write", g)
	}

	// Nobody reads now: the hold's write past maxBatchBytes blocks, the slow timer fires,
	// and the timeout fails it.
	b.holdWrites()
	_ = b.SetWriteDeadline(time.Now().Add(time.Hour)) // not applied in a hold
	big := make([]byte, maxBatchBytes/2+1)
	if _, err := b.Write(big); err != nil {
		t.Fatalf("the first half kept: %v", err)
	}
	start := time.Now()
	_, err := b.Write(big)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a blocked write in a hold: %v, want the deadline exceeded", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the blocked write failed after %v, want about its 50ms timeout", waited)
	}
	select {
	case <-slowFired:
	case <-time.After(5 * time.Second):
		t.Fatal("the slow-consumer timer was not armed while the write blocked")
	}
}
