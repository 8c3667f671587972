package sse_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm/sse"
)

func readAll(t testing.TB, s string, limit int) ([]sse.Event, error) {
	r := sse.NewReader(strings.NewReader(s))
	r.MaxEventBytes = limit
	var out []sse.Event
	for {
		ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, ev)
	}
}

func TestOpenAIStyleStream(t *testing.T) {
	stream := ": keep-alive\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\r\n\r\n" +
		"event: message_delta\nid: 7\nretry: 250\ndata: line one\ndata:line two\n\n" +
		"data: [DONE]\n\n"
	evs, err := readAll(t, stream, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 {
		t.Fatalf("%d events: %+v", len(evs), evs)
	}
	if evs[1].Data != `{"choices":[{"delta":{"content":"lo"}}]}` {
		t.Fatalf("CRLF event %q", evs[1].Data)
	}
	if e := evs[2]; e.Type != "message_delta" || e.ID != "7" || e.Retry != 250 || e.Data != "line one\nline two" {
		t.Fatalf("multi-field event %+v", e)
	}
	if evs[3].Data != "[DONE]" {
		t.Fatalf("last %+v", evs[3])
	}
}

func TestCutStreamIsAnError(t *testing.T) {
	for _, s := range []string{"data: {\"partial\":", "data: complete line\n", "event: x\n"} {
		if _, err := readAll(t, "data: ok\n\n"+s, 0); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%q: err %v, want ErrUnexpectedEOF", s, err)
		}
	}
}

func TestOversizeIsBounded(t *testing.T) {
	if _, err := readAll(t, "data: "+strings.Repeat("x", 100)+"\n\n", 64); !errors.Is(err, sse.ErrTooLarge) {
		t.Fatalf("long line: %v", err)
	}
	if _, err := readAll(t, strings.Repeat("data: "+strings.Repeat("x", 30)+"\n", 5)+"\n", 64); !errors.Is(err, sse.ErrTooLarge) {
		t.Fatalf("many data lines: %v", err)
	}
}

// FuzzReader checks the reader never panics, never returns more data than the stream
// holds, and respects its bound, on arbitrary input.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: [DONE]\n\n",
		"data: a\r\ndata: b\r\n\r\n",
		": comment\nevent: e\nid: 1\nretry: x\ndata\n\n",
		"data: {\"x\":1}\r\rdata: y\n\n",
		"\n\n\n",
		"data: cut",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := sse.NewReader(strings.NewReader(s))
		r.MaxEventBytes = 1 << 10
		total := 0
		for i := 0; i <= len(s); i++ {
			ev, err := r.Next()
			if err != nil {
				return
			}
			if len(ev.Data) > 1<<10 {
				t.Fatalf("event data %d bytes over the bound", len(ev.Data))
			}
			total += len(ev.Data)
			if total > len(s) {
				t.Fatalf("read %d bytes of data from a %d-byte stream", total, len(s))
			}
		}
		t.Fatalf("more events than bytes")
	})
}
