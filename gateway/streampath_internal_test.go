package gateway

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/messages"
)

// discardWriter is a response writer that flushes and takes deadlines as a connection's
// does, and keeps only the count of bytes written.
type discardWriter struct {
	h       http.Header
	n       int
	flushes int
}

func (w *discardWriter) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}
func (w *discardWriter) Write(b []byte) (int, error)      { w.n += len(b); return len(b), nil }
func (w *discardWriter) WriteHeader(int)                  {}
func (w *discardWriter) FlushError() error                { w.flushes++; return nil }
func (w *discardWriter) SetWriteDeadline(time.Time) error { return nil }

// streamPathEvents are a step's typical events: a model answer with a tool call and its
// usage, and the tool's result.
func streamPathEvents() []*messages.Event {
	return []*messages.Event{
		{SessionId: "s-bench", AtUnixNano: 1764000000123456789, CommandId: "cmd-1",
			Payload: &messages.Event_LlmResponded{LlmResponded: &messages.LlmResponded{CallId: "step-3/llm-1", StepId: "step-3", Model: "mock",
				Content: "I will read the file and then summarise it.", FinishReason: "tool_calls", DurationMs: 12, CostUsd: 0.0012,
				Usage:     &messages.Usage{InputTokens: 1800, OutputTokens: 42, TotalTokens: 1842},
				ToolCalls: []*messages.ToolCallRequest{{Id: "call-1", Name: "read_file", Arguments: `{"path":"notes/plan.md"}`}}}}},
		{SessionId: "s-bench", AtUnixNano: 1764000000223456789,
			Payload: &messages.Event_ToolResult{ToolResult: &messages.ToolResult{StepId: "step-3", CallId: "call-1", Tool: "read_file",
				DurationMs: 3, Tokens: 120, Result: strings.Repeat("a line of the file\n", 20)}}},
	}
}

// BenchmarkEventStreamPath is the gateway's part of a live event's way to a lone
// subscriber of an event stream (GET /v1/sessions/{id}/events), per event: its frame
// rendered through the frame cache (a new seq each time, so rendered, as every event of
// a live stream is by its first subscriber) and written and flushed as an NDJSON line or
// a server-sent event. The feed and the socket are left out.
func BenchmarkEventStreamPath(b *testing.B) {
	for _, sse := range []bool{false, true} {
		name := "ndjson"
		if sse {
			name = "sse"
		}
		b.Run(name, func(b *testing.B) {
			evs := streamPathEvents()
			c := newFrameCache(4096, 16)
			w := &discardWriter{}
			s := &eventStream{w: w, rc: http.NewResponseController(w), sse: sse, timeout: time.Minute}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ev := evs[i%len(evs)]
				ev.Seq = uint64(i + 1)
				frame, err := c.event("s-bench", ev)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.add(frame, ev.Seq, FrameEvent, true); err != nil {
					b.Fatal(err)
				}
				if err := s.flush(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(w.n)/float64(b.N), "bytes/event")
		})
	}
}

// TestEventFrameIsTheEventJSON: an event frame is the event's JSON with "op":"event" in
// front, in a slice of its own (later frames rendered through the shared scratch buffer
// leave it as it was), for a frame larger than the scratch buffer too.
func TestEventFrameIsTheEventJSON(t *testing.T) {
	evs := streamPathEvents()
	big := &messages.Event{Seq: 9, SessionId: "s", Payload: &messages.Event_ToolResult{ToolResult: &messages.ToolResult{Result: strings.Repeat("x", 100<<10)}}}
	evs = append(evs, big, big)
	var frames, want [][]byte
	for i, ev := range evs {
		if ev.Seq == 0 {
			ev.Seq = uint64(i + 1)
		}
		f, err := eventFrame(ev)
		if err != nil {
			t.Fatal(err)
		}
		js, err := messages.MarshalEventJSON(ev)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
		want = append(want, append([]byte(`{"op":"event",`), js[1:]...))
	}
	for i := range frames {
		if !bytes.Equal(frames[i], want[i]) {
			t.Fatalf("frame %d:\n got %.200s\nwant %.200s", i, frames[i], want[i])
		}
		if cap(frames[i]) > len(frames[i])+len(frames[i])/8+64 {
			t.Errorf("frame %d: %d bytes in a slice of %d, want its own of about its size", i, len(frames[i]), cap(frames[i]))
		}
	}
}
