package gateway_test

import (
	"strings"
	"testing"
	"time"
)

// TestGatewayWSBreakpointPauseResume drives interrupts over the WebSocket: a breakpoint
// before the write step stops the session there (interrupt_triggered, no step_started),
// resume with a modified step continues with it, and the session completes.
func TestGatewayWSBreakpointPauseResume(t *testing.T) {
	g := startGW(t, gwOpts{delayMS: 150})
	c := g.mustDial(token)
	c.send(map[string]any{"op": "start", "id": "s", "session_id": "ws-bp", "goal": "write a haiku"})
	// Requests on one connection run concurrently: wait for the start's ack (the research
	// step, two slow model turns, is still running then).
	for f := c.read(10 * time.Second); f["op"] != "ack" || f["id"] != "s"; f = c.read(10 * time.Second) {
		if f["op"] == "error" {
			t.Fatalf("start: %v", f)
		}
	}
	c.send(map[string]any{"op": "subscribe", "id": "sub", "session_id": "ws-bp", "deltas": false})
	c.next("ack", 5*time.Second)
	c.send(map[string]any{"op": "set_breakpoint", "id": "b", "session_id": "ws-bp", "position": "before", "step_type": "write", "breakpoint_id": "before-write"})
	var interrupted map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for interrupted == nil {
		f := c.read(time.Until(deadline))
		switch {
		case f["op"] == "error":
			t.Fatalf("error frame %v", f)
		case f["type"] == "step_started" && f["step_type"] == "write":
			t.Fatalf("the write step started despite the breakpoint: %v", f)
		case f["type"] == "interrupt_triggered":
			interrupted = f
		}
	}
	if interrupted["step_id"] != "s3" || interrupted["position"] != "before" || interrupted["breakpoint_id"] != "before-write" {
		t.Fatalf("interrupt_triggered %v", interrupted)
	}
	c.send(map[string]any{"op": "resume", "id": "r", "session_id": "ws-bp",
		"modified_step": map[string]any{"id": "s3", "type": "write", "description": "Write it in five words"}})
	var started, writer map[string]any
	for {
		f := c.read(time.Until(deadline))
		if f["op"] == "error" {
			t.Fatalf("error frame %v", f)
		}
		if f["type"] == "step_started" && f["step_id"] == "s3" {
			started = f
		}
		if f["type"] == "subagent_started" && f["step_id"] == "s3" {
			writer = f
		}
		if f["type"] == "session_completed" {
			break
		}
	}
	if started["description"] != "Write it in five words" {
		t.Fatalf("s3 started as %v", started)
	}
	// The modified step was merged into s3: it keeps its dependency on s1, whose hand-off
	// its writer gets.
	if task, _ := writer["task"].(string); !strings.Contains(task, "Task: Write it in five words") ||
		!strings.Contains(task, "Hand-offs of the steps this one depends on:\n- s1: ") {
		t.Fatalf("s3's writer brief lost the modification or s1's hand-off: %v", writer)
	}
	// The session has ended: further interrupt ops are refused, the connection lives on.
	c.send(map[string]any{"op": "pause", "id": "p", "session_id": "ws-bp"})
	if f := c.next("error", 10*time.Second); f["code"] != "failed_precondition" || f["id"] != "p" {
		t.Fatalf("pause after the end: %v", f)
	}
}
